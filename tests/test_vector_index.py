"""The in-memory vector index: its answers against exact search, and staying in step with SQLite."""

import asyncio

import numpy as np
import pytest

from raymem.models.embedder import SentenceTransformerEmbedder
from raymem.pipelines import ingest
from raymem.store import ProfileStore, erase, to_db_time, utc_now
from raymem.store.connection import open_sync
from raymem.store.vector_index import VectorIndex, read_index
from raymem.types import MessageIn

DIM = 16

PEOPLE = ["Ana", "Bram", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun"]
HOBBIES = [
    "plays the cello",
    "climbs at the gym on weekends",
    "bakes sourdough bread",
    "restores old motorbikes",
    "grows tomatoes on the balcony",
    "runs half marathons",
    "collects vinyl records",
    "paints watercolour landscapes",
    "volunteers at the animal shelter",
    "learns Japanese in the evenings",
]
PLACES = ["in Lisbon", "in Osaka", "near the lake", "with her sister", "after work"]


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def sentences_and_vectors():
    """500 distinct sentences and their real MiniLM vectors."""
    sentences = [
        f"{person} {hobby} {place}." for person in PEOPLE for hobby in HOBBIES for place in PLACES
    ]
    return sentences, SentenceTransformerEmbedder(threads=1).embed(sentences)


def test_coarse_search_agrees_with_exact_search_on_real_embeddings(sentences_and_vectors):
    sentences, vectors = sentences_and_vectors
    index = VectorIndex(vectors.shape[1], exact_up_to=0)  # always the coarse pass
    index.upsert(list(range(len(sentences))), vectors)
    queries = SentenceTransformerEmbedder(threads=1).embed(
        ["Who bakes bread?", "Which person fixes motorcycles?", "Chen's music hobby", "Osaka"]
    )
    overlaps = []
    for query in queries:
        exact = np.argsort(-(vectors @ query))[:10]
        found = index.search(query, 10)
        assert len(found) == 10
        assert [d for _, d in found] == sorted(d for _, d in found)
        overlaps.append(len(set(exact.tolist()) & {seq for seq, _ in found}) / 10)
        # the distance reported is the cosine distance, to within int8 rounding
        seq, distance = found[0]
        assert abs(distance - (1 - float(vectors[seq] @ query))) < 0.01
    assert np.mean(overlaps) >= 0.9


def test_upsert_replaces_and_remove_hides():
    rng = np.random.default_rng(1)
    vectors = unit(rng.standard_normal((50, DIM)).astype(np.float32))
    index = VectorIndex(DIM)
    index.upsert(list(range(50)), vectors)
    assert index.search(vectors[7], 1)[0][0] == 7
    index.upsert([7], vectors[8:9])  # seq 7 now points where 8 does
    assert len(index) == 50
    assert {seq for seq, _ in index.search(vectors[8], 2)} == {7, 8}
    index.remove([8, 999])  # an unknown seq is ignored
    assert len(index) == 49
    assert 8 not in {seq for seq, _ in index.search(vectors[8], 50)}
    assert index.search(vectors[8], 1)[0][0] == 7


def test_a_seq_given_twice_in_one_batch_keeps_its_last_vector():
    basis = np.eye(DIM, dtype=np.float32)
    index = VectorIndex(DIM)
    index.upsert([1, 2, 1], np.stack([basis[0], basis[1], basis[2]]))
    assert len(index) == 2
    assert index.search(basis[2], 1) == [(1, pytest.approx(0.0, abs=1e-6))]
    assert index.search(basis[1], 1)[0][0] == 2
    # no row is left behind for the first vector given for seq 1
    assert [d for _, d in index.search(basis[0], 5)] == [pytest.approx(1.0, abs=1e-6)] * 2


def test_removed_vectors_never_come_back_from_the_coarse_pass_or_compaction():
    rng = np.random.default_rng(2)
    count = 6000
    vectors = unit(rng.standard_normal((count, DIM)).astype(np.float32))
    index = VectorIndex(DIM, capacity=16, exact_up_to=0)  # grows, then compacts
    for first in range(0, count, 1000):
        index.upsert(list(range(first, first + 1000)), vectors[first : first + 1000])
    removed = set(range(0, count, 2))  # enough to trigger compaction
    index.remove(sorted(removed))
    assert len(index) == count // 2
    for probe in (0, 2, 4, 1, 3):
        found = {seq for seq, _ in index.search(vectors[probe], 20)}
        assert not found & removed
        if probe % 2:
            assert probe in found


async def test_store_search_follows_commits_and_ignores_rollbacks(tmp_path):
    store = await ProfileStore.open(tmp_path / "profile.db", dim=DIM)
    try:
        await ingest.ingest(
            store, "s1", [MessageIn(role="user", content=f"Turn number {i}.") for i in range(3)]
        )
        pending = await store.reads.pending_vectors("message_vectors")
        basis = np.eye(DIM, dtype=np.float32)
        assert await store.search.vectors("message_vectors", basis[0], limit=5) == []
        async with store.write() as writer:
            await writer.set_vectors("message_vectors", [(pending[0][0], basis[0])])
        assert [s for s, _ in await store.search.vectors("message_vectors", basis[0], limit=5)] == [
            pending[0][0]
        ]
        with pytest.raises(RuntimeError):
            async with store.write() as writer:
                await writer.set_vectors("message_vectors", [(pending[1][0], basis[1])])
                raise RuntimeError("rolled back")
        hits = await store.search.vectors("message_vectors", basis[1], limit=5)
        assert [s for s, _ in hits] == [pending[0][0]]  # the rolled-back vector is absent
        async with store.write() as writer:
            await erase.erase_session(writer, "s1", at=to_db_time(utc_now()))
        assert await store.search.vectors("message_vectors", basis[0], limit=5) == []
    finally:
        await store.close()


async def test_a_reopened_store_reads_its_vectors_back(tmp_path):
    path = tmp_path / "profile.db"
    rng = np.random.default_rng(3)
    vectors = unit(rng.standard_normal((40, DIM)).astype(np.float32))
    store = await ProfileStore.open(path, dim=DIM)
    try:
        await ingest.ingest(
            store, "s1", [MessageIn(role="user", content=f"Fact number {i}.") for i in range(40)]
        )
        pending = await store.reads.pending_vectors("message_vectors")
        seqs = [seq for seq, _ in pending]
        # commits while the index is being read are not lost: start the read, then write
        warming = asyncio.ensure_future(store.warm_vector_indexes())
        async with store.write() as writer:
            await writer.set_vectors("message_vectors", list(zip(seqs, vectors, strict=True)))
        await warming
        before = await store.search.vectors("message_vectors", vectors[5], limit=3)
        assert before[0][0] == seqs[5]
    finally:
        await store.close()
    reopened = await ProfileStore.open(path, dim=DIM)
    try:
        assert await reopened.search.vectors("message_vectors", vectors[5], limit=3) == before
    finally:
        await reopened.close()
    assert len(read_index(path, "message_vectors", DIM)) == 40


async def test_vectors_of_another_model_are_dropped_and_queued_again(tmp_path):
    path = tmp_path / "profile.db"
    basis = np.eye(DIM, dtype=np.float32)

    async def vectorised_count(embedder: str) -> tuple[int, int]:
        store = await ProfileStore.open(path, dim=DIM, embedder=embedder)
        try:
            pending = await store.reads.pending_vectors("message_vectors")
            if pending and embedder == "model-a":
                async with store.write() as writer:
                    await writer.set_vectors("message_vectors", [(pending[0][0], basis[0])])
                pending = await store.reads.pending_vectors("message_vectors")
            found = await store.search.vectors("message_vectors", basis[0], limit=5)
            return len(found), len(pending)
        finally:
            await store.close()

    store = await ProfileStore.open(path, dim=DIM, embedder="model-a")
    await ingest.ingest(store, "s1", [MessageIn(role="user", content="The only turn here.")])
    await store.close()
    assert await vectorised_count("model-a") == (1, 0)
    # the same model at another precision: its vectors are kept
    assert await vectorised_count("model-a@bfloat16") == (1, 0)
    # another model: nothing comparable is left, everything waits to be embedded again
    assert await vectorised_count("model-b") == (0, 1)
    conn = open_sync(path)
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone() == (
            "model-b",
        )
    finally:
        conn.close()
