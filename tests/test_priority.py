"""The embedder pool's scheduler: batching, interactive work first, errors kept to their call."""

import asyncio
import threading
import time

import numpy as np
import pytest

from raymem.models.priority import PriorityBatcher


class RecordingModel:
    """Rows of [len(text)] per text; records each call's texts; can hold a call until released."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        self.release.set()
        self.fail_on: str | None = None

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        self.release.wait(timeout=10)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError("model failed")
        return np.array([[float(len(text))] for text in texts], dtype=np.float32)


async def _until(condition, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


def _waiting(batcher: PriorityBatcher) -> tuple[int, int]:
    """Requests queued, the running call's included until it is done: (interactive, background)."""
    stats = batcher.stats()
    return stats["waiting_interactive"], stats["waiting_background"]


async def _occupy(batcher: PriorityBatcher, model: RecordingModel, texts: list[str], **kw):
    """Start a first call and hold it in the model, so that what follows has to queue."""
    model.release.clear()
    first = asyncio.create_task(batcher.run(texts, **kw))
    await _until(lambda: len(model.calls) == 1)
    return first


async def test_rows_come_back_in_order_across_chunks():
    model = RecordingModel()
    batcher = PriorityBatcher(model, background_chunk=3)
    texts = ["a" * n for n in range(1, 9)]
    rows = await batcher.run(texts, background=True)
    assert rows[:, 0].tolist() == [float(n) for n in range(1, 9)]
    assert [len(call) for call in model.calls] == [3, 3, 2]


async def test_a_split_request_goes_to_the_model_shortest_first_and_returns_in_order():
    model = RecordingModel()
    batcher = PriorityBatcher(model, background_chunk=3)
    lengths = [7, 1, 9, 4, 2, 8, 3, 6, 5]
    rows = await batcher.run(["x" * n for n in lengths], background=True)
    assert rows[:, 0].tolist() == [float(n) for n in lengths]
    assert [[len(text) for text in call] for call in model.calls] == [
        [1, 2, 3],
        [4, 5, 6],
        [7, 8, 9],
    ]


async def test_a_background_call_holds_a_bounded_number_of_characters():
    model = RecordingModel()
    batcher = PriorityBatcher(model, background_chunk=16, background_chunk_chars=25)
    texts = ["y" * 100, *["x" * 10 for _ in range(5)]]
    rows = await batcher.run(texts, background=True)
    assert rows[:, 0].tolist() == [100.0] + [10.0] * 5
    # Two short texts fit in 25 characters; the long one goes alone, never left out.
    assert [[len(text) for text in call] for call in model.calls] == [
        [10, 10],
        [10, 10],
        [10],
        [100],
    ]


async def test_interactive_work_goes_before_waiting_background_work():
    model = RecordingModel()
    batcher = PriorityBatcher(model, background_chunk=2)
    backlog = await _occupy(batcher, model, [f"turn {i}" for i in range(6)], background=True)
    queries = [asyncio.create_task(batcher.run([f"query {i}"])) for i in range(3)]
    await _until(lambda: _waiting(batcher) == (3, 1))  # the backlog stays queued until done
    model.release.set()
    results = await asyncio.gather(backlog, *queries)
    # The first background chunk was already running; the three queries share the next call.
    assert model.calls[0] == ["turn 0", "turn 1"]
    assert model.calls[1] == ["query 0", "query 1", "query 2"]
    assert model.calls[2:] == [["turn 2", "turn 3"], ["turn 4", "turn 5"]]
    assert results[0][:, 0].tolist() == [6.0] * 6
    assert [r[0, 0] for r in results[1:]] == [7.0, 7.0, 7.0]


async def test_background_work_waits_for_a_quiet_moment_while_queries_still_go_first():
    model = RecordingModel()
    batcher = PriorityBatcher(model, background_after_s=0.3)
    await batcher.run(["ingest"])
    backlog = asyncio.create_task(batcher.run(["turn"], background=True))
    await asyncio.sleep(0.1)
    assert model.calls == [["ingest"]]  # held back: a query came 0.1 s ago
    started = time.monotonic()
    await batcher.run(["query"])  # not held up by the waiting background work
    assert time.monotonic() - started < 0.1
    last_query = time.monotonic()
    await backlog
    assert time.monotonic() - last_query >= 0.3 - 0.01
    assert model.calls == [["ingest"], ["query"], ["turn"]]


async def test_a_steady_stream_of_queries_holds_background_work_back_only_so_long():
    model = RecordingModel()
    batcher = PriorityBatcher(model, background_after_s=10.0, background_max_delay_s=0.2)
    await batcher.run(["first query"])
    backlog = asyncio.create_task(batcher.run(["turn"], background=True))
    started = time.monotonic()
    while not backlog.done():
        await batcher.run(["query"])
        await asyncio.sleep(0.02)
        assert time.monotonic() - started < 2.0
    assert time.monotonic() - started >= 0.2 - 0.01
    assert (await backlog)[0, 0] == float(len("turn"))


async def test_a_failed_call_fails_its_callers_only():
    model = RecordingModel()
    batcher = PriorityBatcher(model)
    first = await _occupy(batcher, model, ["warm"])
    model.fail_on = "bad"
    doomed = asyncio.create_task(batcher.run(["bad", "x"]))
    await _until(lambda: _waiting(batcher) == (2, 0))  # the running call's request counts
    model.release.set()
    assert (await first)[0, 0] == 4.0
    with pytest.raises(RuntimeError, match="model failed"):
        await doomed
    model.fail_on = None
    assert (await batcher.run(["fine"]))[0, 0] == 4.0


async def test_an_abandoned_request_costs_no_model_time():
    model = RecordingModel()
    batcher = PriorityBatcher(model)
    first = await _occupy(batcher, model, ["busy"])
    gone = asyncio.create_task(batcher.run(["never embedded"], background=True))
    await _until(lambda: _waiting(batcher) == (1, 1))
    gone.cancel()
    model.release.set()
    await first
    assert (await batcher.run(["next"]))[0, 0] == 4.0
    assert ["never embedded"] not in model.calls
    assert batcher.stats()["waiting_background"] == 0


async def test_no_texts_need_no_model_call():
    model = RecordingModel()
    batcher = PriorityBatcher(model)
    assert (await batcher.run([])).shape[0] == 0
    assert model.calls == []


async def test_a_query_does_not_wait_for_a_large_ingest_queued_before_it():
    model = RecordingModel()
    batcher = PriorityBatcher(model, max_batch=4)
    first = await _occupy(batcher, model, ["busy"])
    ingest = asyncio.create_task(batcher.run([f"memory {i}" for i in range(10)]))
    await _until(lambda: _waiting(batcher) == (2, 0))
    query = asyncio.create_task(batcher.run(["query"]))
    await _until(lambda: _waiting(batcher) == (3, 0))
    model.release.set()
    await asyncio.gather(first, ingest, query)
    # The query goes in the next call, and the ingest fills the rest of every call.
    assert model.calls[1] == ["query", "memory 0", "memory 1", "memory 2"]
    assert [len(call) for call in model.calls[2:]] == [4, 3]
    assert (await ingest)[:, 0].tolist() == [8.0] * 10
