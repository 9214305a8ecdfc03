"""The embedding model: located through the hub cache or the packaged weights, then run."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from raymem.models.embedder import DEFAULT_EMBEDDER, SentenceTransformerEmbedder, locate_model


@pytest.fixture(scope="module")
def embedder():
    return SentenceTransformerEmbedder(DEFAULT_EMBEDDER, threads=1)


def test_default_model_is_found_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hub"))
    path = locate_model(DEFAULT_EMBEDDER)
    assert (path / "config.json").exists() and (path / "modules.json").exists()


def test_hub_cache_is_used_when_it_holds_the_model(monkeypatch, tmp_path):
    """A model in the huggingface-hub cache layout is found there, not elsewhere."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "models--acme--tiny-embedder"
    revision = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(locate_model(DEFAULT_EMBEDDER), repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    found = locate_model("acme/tiny-embedder")
    assert found == repo / "snapshots" / revision


def test_unknown_model_offline_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(Exception, match="acme/not-there"):
        locate_model("acme/not-there")


def test_local_directory_is_used_as_is(tmp_path):
    assert locate_model(str(tmp_path)) == Path(tmp_path)


def test_embeddings_are_unit_vectors_that_capture_meaning(embedder):
    vectors = embedder.embed(
        ["The cat sat on the mat.", "A kitten rested on a rug.", "Quarterly tax filing deadline"]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > unrelated + 0.3
    assert embedder.embed([]).shape == (0, 384)
