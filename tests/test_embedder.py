"""The embedding model: located through the hub cache or the packaged weights, then run."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from raymem.models.embedder import (
    SentenceTransformerEmbedder,
    embedder_name,
    native_bf16_cpu,
    resolve_precision,
)
from raymem.models.locate import DEFAULT_EMBEDDER, locate_model
from raymem.store import ProfileStore
from raymem.store.connection import open_sync


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


# ------------------------------------------------------------- precision

SENTENCES = [
    "The cat sat on the mat.",
    "A kitten rested on a rug.",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: I'm swamped with the kids & work.",
    "User moved to Vienna in May 2026",
    "User lives in Budapest",
    "Use pnpm, not npm.",
    "Quarterly tax filing deadline is April 15th.",
    "John: I've always been passionate about veterans and their rights.",
    "Remind me to renew the Kestrel certificate by Friday.",
]


@pytest.fixture(scope="module")
def float32():
    return SentenceTransformerEmbedder(DEFAULT_EMBEDDER, threads=1, precision="float32")


def nearest_other(vectors: np.ndarray) -> np.ndarray:
    """Each sentence's most similar other sentence, and by how much it beats the runner-up."""
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1.0)
    ranked = np.sort(similarity, axis=1)
    return np.stack([similarity.argmax(axis=1), ranked[:, -1] - ranked[:, -2]], axis=1)


@pytest.mark.parametrize(
    ("precision", "least", "mean", "drift"),
    [("bfloat16", 0.999, 0.9995, 0.01), ("int8", 0.97, 0.98, 0.06)],
)
def test_reduced_precision_vectors_stay_close_to_float32(float32, precision, least, mean, drift):
    reduced = SentenceTransformerEmbedder(DEFAULT_EMBEDDER, threads=1, precision=precision)
    assert (reduced.precision, reduced.name) == (precision, f"{DEFAULT_EMBEDDER}@{precision}")
    exact, approx = float32.embed(SENTENCES), reduced.embed(SENTENCES)
    assert approx.dtype == np.float32
    assert np.allclose(np.linalg.norm(approx, axis=1), 1.0, atol=1e-5)
    cosine = (exact * approx).sum(axis=1)
    assert cosine.min() > least and cosine.mean() > mean, cosine
    # Similarities between sentences (what search ranks by) move by less than ``drift``,
    # and every clear nearest neighbour stays the same.
    assert np.abs(exact @ exact.T - approx @ approx.T).max() < drift
    exact_nearest, approx_nearest = nearest_other(exact), nearest_other(approx)
    clear = exact_nearest[:, 1] > 2 * drift
    assert clear.sum() >= 5
    assert (exact_nearest[clear, 0] == approx_nearest[clear, 0]).all()


def test_float32_keeps_the_plain_model_name(float32):
    assert (float32.precision, float32.name) == ("float32", DEFAULT_EMBEDDER)


def test_auto_precision_follows_the_hardware():
    expected = "bfloat16" if native_bf16_cpu() else "float32"
    assert resolve_precision("auto", "cpu") == expected
    assert resolve_precision("auto", "cuda") == resolve_precision("auto", "cuda:1") == "float16"
    assert resolve_precision("int8", "cpu") == "int8"
    with pytest.raises(ValueError, match="int4"):
        resolve_precision("int4", "cpu")
    with pytest.raises(ValueError, match="CPU only"):
        resolve_precision("int8", "cuda")


def test_default_embedder_records_its_backend(embedder):
    expected = resolve_precision("auto", "cpu")
    assert embedder.precision == expected
    assert embedder.name == embedder_name(DEFAULT_EMBEDDER, expected)


async def test_store_records_the_embedder_name(tmp_path, embedder):
    store = await ProfileStore.open(
        tmp_path / "profile.db", dim=embedder.dim, embedder=embedder.name
    )
    await store.close()
    conn = open_sync(tmp_path / "profile.db")
    try:
        [(recorded,)] = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchall()
    finally:
        conn.close()
    assert recorded == embedder.name


def test_repeated_texts_run_once_and_keep_their_order(float32, monkeypatch):
    seen: list[list[str]] = []
    encode = float32._model.encode

    def recording(texts, **kwargs):
        seen.append(list(texts))
        return encode(texts, **kwargs)

    monkeypatch.setattr(float32._model, "encode", recording)
    texts = [SENTENCES[2], SENTENCES[0], SENTENCES[2], SENTENCES[4], SENTENCES[0]]
    vectors = float32.embed(texts)
    assert seen == [[SENTENCES[2], SENTENCES[0], SENTENCES[4]]]
    alone = float32.embed([SENTENCES[0], SENTENCES[2], SENTENCES[4]])
    assert np.allclose(vectors, alone[[1, 0, 1, 2, 0]], atol=1e-5)


def test_max_seq_length_truncates_long_texts():
    short = SentenceTransformerEmbedder(
        DEFAULT_EMBEDDER, threads=1, precision="float32", max_seq_length=16
    )
    head = "Our release checklist covers builds, tests, signing and the changelog for every version"
    texts = [f"{head} and then the Falcon server.", f"{head} and then the tax deadline."]
    same = short.embed(texts)
    assert float(same[0] @ same[1]) > 0.9999  # the tails lie beyond 16 tokens
    full = SentenceTransformerEmbedder(DEFAULT_EMBEDDER, threads=1, precision="float32")
    differ = full.embed(texts)
    assert float(differ[0] @ differ[1]) < 0.99
