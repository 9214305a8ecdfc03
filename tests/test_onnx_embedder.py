"""The ONNX Runtime embedder: exported once from the installed weights, same vectors as torch."""

import json
import shutil

import numpy as np
import pytest

from raymem.models.embedder import (
    SentenceTransformerEmbedder,
    make_embedder,
    native_bf16_cpu,
)
from raymem.models.locate import DEFAULT_EMBEDDER, locate_model
from raymem.models.onnx_embedder import OnnxEmbedder, export_key, supports

TEXTS = [
    "I caught a huge trout at the lake.",
    "Use pnpm, not npm.",
    "x",
    "The quarterly report covers revenue, churn and hiring. " * 60,  # past 256 tokens
    "Use pnpm, not npm.",
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def onnx(cache_dir):
    return OnnxEmbedder(DEFAULT_EMBEDDER, threads=1, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def torch_float32():
    return SentenceTransformerEmbedder(DEFAULT_EMBEDDER, threads=1, precision="float32")


def test_vectors_equal_the_torch_float32_vectors(onnx, torch_float32):
    got, expected = onnx.embed(TEXTS), torch_float32.embed(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert (got * expected).sum(axis=1).min() > 0.9999
    # The same name, so a store made with either needs no re-embedding.
    assert (onnx.name, onnx.dim) == (torch_float32.name, torch_float32.dim)


def test_batches_do_not_change_vectors(cache_dir, onnx):
    small_batches = OnnxEmbedder(DEFAULT_EMBEDDER, threads=1, batch_size=2, cache_dir=cache_dir)
    assert np.allclose(small_batches.embed(TEXTS), onnx.embed(TEXTS), atol=1e-5)
    alone = np.stack([onnx.embed([text])[0] for text in TEXTS])
    assert np.allclose(onnx.embed(TEXTS), alone, atol=1e-5)
    assert onnx.embed([]).shape == (0, 384)


def test_the_export_is_made_once_and_reused(cache_dir, onnx):
    [exported] = list(cache_dir.glob("*.onnx"))
    stamp = exported.stat().st_mtime_ns
    OnnxEmbedder(DEFAULT_EMBEDDER, threads=1, cache_dir=cache_dir)
    assert [p.name for p in cache_dir.iterdir()] == [exported.name]  # no temporary left
    assert exported.stat().st_mtime_ns == stamp


def test_the_cache_key_follows_the_model_files_not_where_they_lie(tmp_path):
    installed = locate_model(DEFAULT_EMBEDDER)
    copy = shutil.copytree(installed, tmp_path / "copy")
    assert export_key(copy) == export_key(installed)  # another environment reuses it
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "hidden_dropout_prob": 0.2}))
    assert export_key(copy) != export_key(installed)


def test_auto_backend_runs_onnx_where_torch_would_run_float32(cache_dir):
    auto = make_embedder(threads=1, cache_dir=cache_dir)
    expected = SentenceTransformerEmbedder if native_bf16_cpu() else OnnxEmbedder
    assert type(auto) is expected
    # A reduced precision asked for is torch's to run.
    int8 = make_embedder(threads=1, precision="int8", cache_dir=cache_dir)
    assert type(int8) is SentenceTransformerEmbedder and int8.precision == "int8"
    torch_only = make_embedder(threads=1, backend="torch", precision="float32")
    assert type(torch_only) is SentenceTransformerEmbedder


def test_onnx_backend_refuses_what_it_cannot_run(cache_dir):
    with pytest.raises(ValueError, match="float32 on a CPU"):
        make_embedder(backend="onnx", precision="bfloat16", cache_dir=cache_dir)
    with pytest.raises(ValueError, match="float32 on a CPU"):
        make_embedder(backend="onnx", device="cuda", cache_dir=cache_dir)
    with pytest.raises(ValueError, match="Unknown embedder backend"):
        make_embedder(backend="tensorrt")


def _model_dir(tmp_path, modules, pooling):
    (tmp_path / "1_Pooling").mkdir(parents=True)
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return tmp_path


def test_only_mean_pooled_transformers_are_supported(tmp_path):
    assert supports(locate_model(DEFAULT_EMBEDDER))
    transformer = {"path": "", "type": "sentence_transformers.models.Transformer"}
    pooling = {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
    cls = _model_dir(
        tmp_path / "cls",
        [transformer, pooling],
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
    )
    assert not supports(cls)
    dense = {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    with_dense = _model_dir(
        tmp_path / "dense", [transformer, pooling, dense], {"pooling_mode_mean_tokens": True}
    )
    assert not supports(with_dense)
    assert not supports(tmp_path / "missing")
    with pytest.raises(ValueError, match="mean pooling"):
        OnnxEmbedder(str(cls), cache_dir=tmp_path / "cache")
