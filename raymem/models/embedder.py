"""Sentence embedders: torch (``SentenceTransformerEmbedder``) or ONNX Runtime. No Ray imports.

The weights are found by ``raymem.models.locate``; ``make_embedder`` picks the
backend and precision for a configuration.
"""

import logging
import os
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from raymem.models.locate import DEFAULT_EMBEDDER, locate_model

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Turns texts into unit-length vectors of ``dim`` dimensions."""

    name: str  # what stores record: the model, and its precision when not float32
    model: str  # the model as configured (a hub id or a directory)
    precision: str  # float32, bfloat16, float16 or int8
    device: str  # where it runs: cpu, cuda, ...
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


PRECISIONS = ("auto", "float32", "bfloat16", "float16", "int8")


def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AMX or AVX512-BF16).

    Elsewhere bfloat16 is emulated and slower than float32. Read from the Linux
    CPU flags; False where they cannot be read.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return False


def resolve_precision(precision: str, device: str) -> str:
    """The precision ``auto`` stands for on ``device``, or ``precision`` itself, validated.

    ``auto``: float16 on a GPU; bfloat16 on a CPU that multiplies it natively
    (3-4x float32 here, cosine to the float32 vectors above 0.999); float32 elsewhere.

    Raises:
        ValueError: an unknown precision, or int8 on a GPU (dynamic int8 is CPU-only).
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"Unknown embedder precision {precision!r}; one of {', '.join(PRECISIONS)}"
        )
    on_gpu = device.startswith("cuda")
    if precision == "auto":
        if on_gpu:
            return "float16"
        return "bfloat16" if native_bf16_cpu() else "float32"
    if precision == "int8" and on_gpu:
        raise ValueError("int8 embedding runs on a CPU only; use float16 on a GPU")
    return precision


def embedder_name(model: str, precision: str) -> str:
    """The name vectors are recorded under: the model, and the precision when not float32.

    Vectors of one model at different precisions are close but not equal; a store
    records this name so that vectors made differently can be told apart.
    """
    return model if precision == "float32" else f"{model}@{precision}"


def _quantize_int8(model: Any) -> None:
    """Dynamic int8 for the linear layers, in place, except the feed-forward outputs.

    The inputs of the feed-forward output projections (``encoder.layer.N.output.dense``)
    carry large outlier activations: quantizing those too dropped the cosine to the
    float32 vectors to about 0.93 on LoCoMo turns; without them it is about 0.985
    (lowest 0.97) at about 1.4x the speed of float32. bfloat16, where the CPU has it,
    is both closer (above 0.999) and faster (3-4x).
    """
    import torch
    from torch import nn

    names = {
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
        and not (name.endswith("output.dense") and "attention" not in name)
    }
    with warnings.catch_warnings():  # the eager-mode API is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        # torch leaves quantize_dynamic unannotated.
        torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
            model, names, dtype=torch.qint8, inplace=True
        )


class SentenceTransformerEmbedder:
    """A sentence-transformers model on CPU or GPU, with an explicit thread count.

    Args:
        name: a hub repository id or a local directory (see ``locate_model``).
        threads: torch threads; 0 uses half the cores. Keep replicas x threads
            within the cores the process gets: oversubscribed torch threads spin.
        device: ``cpu``, ``cuda``, ...; None lets sentence-transformers choose.
        precision: ``auto``, ``float32``, ``bfloat16``, ``float16`` or ``int8``
            (see ``resolve_precision``); the name the vectors are recorded under
            carries it (``embedder_name``).
        batch_size: texts per forward pass.
        max_seq_length: tokens per text before truncation; 0 keeps the model's own (256).
    """

    def __init__(
        self,
        name: str = DEFAULT_EMBEDDER,
        *,
        threads: int = 0,
        device: str | None = None,
        precision: str = "auto",
        batch_size: int = 64,
        max_seq_length: int = 0,
    ):
        import torch
        from sentence_transformers import SentenceTransformer

        # Under CPU contention torch's default thread pool spins: pin it explicitly.
        torch.set_num_threads(threads or max(1, (os.cpu_count() or 2) // 2))
        path = locate_model(name)
        log.info("loading embedding model %s from %s", name, path)
        self.model = name
        self._model = SentenceTransformer(str(path), device=device)
        self.device = str(self._model.device)
        self.precision = resolve_precision(precision, self.device)
        if self.precision == "bfloat16":
            self._model.to(torch.bfloat16)
        elif self.precision == "float16":
            self._model.to(torch.float16)
        elif self.precision == "int8":
            _quantize_int8(self._model)
        if max_seq_length > 0:
            self._model.max_seq_length = max_seq_length
        self.batch_size = max(1, batch_size)
        self.name = embedder_name(name, self.precision)
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ValueError(f"Embedding model {name!r} does not declare its dimension")
        self.dim = int(dim)
        log.info("embedding with %s on %s", self.name, self.device)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, in order, float32; a text repeated in the list is run once."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        raw = self._model.encode(unique, batch_size=self.batch_size, convert_to_numpy=True)
        # Normalised in float32: a reduced-precision norm is off by up to about 0.5%.
        vectors = np.asarray(raw, dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        if len(unique) == len(texts):
            return vectors
        row = {text: index for index, text in enumerate(unique)}
        return vectors[[row[text] for text in texts]]


BACKENDS = ("auto", "torch", "onnx")


def make_embedder(
    name: str = DEFAULT_EMBEDDER,
    *,
    backend: str = "auto",
    threads: int = 0,
    device: str = "cpu",
    precision: str = "auto",
    batch_size: int = 64,
    max_seq_length: int = 0,
    cache_dir: Path | None = None,
) -> Embedder:
    """The embedder for a configuration: ONNX Runtime or torch.

    ``auto`` runs ONNX Runtime where torch would run float32 on a CPU (no native
    bfloat16; same vectors, faster) and torch everywhere else: on GPUs, on CPUs
    with native bfloat16, at a reduced precision asked for, or when the model
    cannot be exported (a warning says why).

    Args:
        name: a hub repository id or a local directory.
        backend: ``auto``, ``torch`` or ``onnx``.
        threads: threads of the model's own pool; 0 uses half the cores.
        device: ``cpu``, ``cuda``, ...
        precision: see ``resolve_precision``; ONNX Runtime runs float32 only.
        batch_size: texts per forward pass.
        max_seq_length: tokens per text; 0 keeps the model's own.
        cache_dir: where ONNX exports are kept (None: ``~/.cache/raymem/onnx``).

    Raises:
        ValueError: an unknown backend, or ``onnx`` with a GPU or a reduced precision.
    """
    if backend not in BACKENDS:
        raise ValueError(f"Unknown embedder backend {backend!r}; one of {', '.join(BACKENDS)}")
    resolved = resolve_precision(precision, device)
    on_cpu_float32 = device == "cpu" and resolved == "float32"
    if backend == "onnx" and not on_cpu_float32:
        raise ValueError("The onnx embedder backend runs float32 on a CPU only")
    if backend != "torch" and on_cpu_float32:
        from raymem.models.onnx_embedder import OnnxEmbedder

        try:
            return OnnxEmbedder(
                name,
                threads=threads,
                batch_size=batch_size,
                max_seq_length=max_seq_length,
                cache_dir=cache_dir,
            )
        except (ImportError, ValueError, RuntimeError, OSError) as exc:
            if backend == "onnx":
                raise
            log.warning("ONNX Runtime cannot run %s (%s); embedding with torch", name, exc)
    return SentenceTransformerEmbedder(
        name,
        threads=threads,
        device=device,
        precision=precision,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
    )
