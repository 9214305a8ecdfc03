"""Pre-execution injection on real SQLite files: what is shown, in what order, and recorded."""

from pathlib import Path

import pytest
from procedural_helpers import CREATE, FAIL, UPDATE, action, at, enabled_store, run_session

from raymem.pipelines.procedural import capture, inject, patterns, sequences
from raymem.store import ProfileStore
from raymem.store.procedural import patterns as stored
from raymem.types_procedural import AnnotateRequest, InjectRequest, Pattern

DIM = 8
DELETE_FAIL = ("delete_node", "failure", "PermissionDenied")


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    await enabled_store(store)
    yield store
    await store.close()


async def promote(
    store: ProfileStore, steps, *, fail: int, succeed: int, target: str = "n1", offset: int = 0
) -> Pattern:  # type: ignore[no-untyped-def]
    """Sessions where ``steps`` go wrong ``fail`` times and succeed ``succeed`` times; the pattern."""
    success = [(steps[0][0], "success", None)]
    for index in range(fail + succeed):
        chosen = steps if index < fail else success
        await run_session(
            store, f"s{offset}-{index}", chosen, start=at(offset + index), target=target
        )
    await patterns.evaluate_patterns(store, at(offset + fail + succeed))
    found = await stored.list_patterns(store.reader, action_type=steps[0][0])
    return found[0]


async def test_the_block_names_the_pattern_and_its_precondition(store: ProfileStore) -> None:
    for index in range(5):
        steps = [FAIL, CREATE, UPDATE] if index < 3 else [FAIL]
        await run_session(store, f"s{index}", steps, start=at(index))
    await patterns.evaluate_patterns(store, at(10))
    block = await inject.injection_block(store, "update_node", "node", ["n9"])
    assert [p.action_type for p in block.patterns] == ["update_node"]
    assert block.text == (
        "Past experience (procedural memory):\n"
        "- update_node on node targets failed with NodeNotFoundError in 100% of 5 sequences;"
        " it succeeded in 100% of attempts after create_node on the same target:"
        " run create_node first. (confidence 1.00)"
    )
    assert await inject.injection_block(store, "update_node", "person") == inject.Injection(
        text="", patterns=[]
    )


async def test_only_confident_or_annotated_patterns_and_never_suppressed(
    store: ProfileStore,
) -> None:
    low = await promote(store, [FAIL], fail=3, succeed=2)  # 0.6
    await run_session(store, "extra", [UPDATE], start=at(0, days=1))
    await patterns.evaluate_patterns(store, at(5, days=1))  # 3 of 6: 0.5, in place
    low = await stored.get_pattern(store.reader, low.id)
    assert low is not None and low.confidence == 0.5
    assert (await inject.injection_block(store, "update_node", "node")).patterns == []

    await patterns.annotate(
        store, low.id, AnnotateRequest(annotation="ask first"), now=at(0, days=2)
    )
    block = await inject.injection_block(store, "update_node", "node")
    assert [p.id for p in block.patterns] == [low.id]
    assert block.text.endswith(
        "- update_node on node (NodeNotFoundError): Operator note: ask first"
    )

    await patterns.annotate(store, low.id, AnnotateRequest(suppressed=True), now=at(0, days=2))
    assert (await inject.injection_block(store, "update_node", "node")).patterns == []


async def test_patterns_on_the_same_targets_join_sorted_by_confidence(store: ProfileStore) -> None:
    update = await promote(store, [FAIL], fail=5, succeed=0, target="n1")  # 1.0
    delete = await promote(store, [DELETE_FAIL], fail=4, succeed=1, target="n2", offset=100)  # 0.8
    # update_node on n2: its own pattern, and delete_node's, which went wrong on n2.
    block = await inject.injection_block(store, "update_node", "node", ["n2"])
    assert [p.id for p in block.patterns] == [update.id, delete.id]
    lines = block.text.splitlines()
    assert lines[1].startswith("- update_node") and lines[2].startswith("- delete_node")
    assert "(confidence 0.80)" in lines[2]
    # Without the shared target, only the same action's pattern applies.
    assert [
        p.id for p in (await inject.injection_block(store, "update_node", "node", ["n7"])).patterns
    ] == [update.id]
    # Deterministic: the same block every time.
    assert await inject.injection_block(store, "update_node", "node", ["n2"]) == block


async def test_disabled_means_no_injection(store: ProfileStore) -> None:
    await promote(store, [FAIL], fail=5, succeed=0)
    await capture.set_enabled(store, False, now=at(0, days=1))
    assert await inject.injection_block(store, "update_node", "node") == inject.Injection(
        text="", patterns=[]
    )
    assert (await capture.state(store)).counts.patterns == 1  # still readable


async def test_the_block_is_capped(store: ProfileStore) -> None:
    for kind in range(inject.MAX_INJECTED + 2):
        failing = [(f"tool{kind}", "failure", "Error")]
        await promote(store, failing, fail=5, succeed=0, offset=100 * kind)
    block = await inject.injection_block(store, "update_node", "node", ["n1"])
    assert len(block.patterns) == inject.MAX_INJECTED
    assert len(block.text.splitlines()) == 1 + inject.MAX_INJECTED


async def test_recorded_injections_tell_whether_the_warning_was_heeded(store: ProfileStore) -> None:
    pattern = await promote(store, [FAIL], fail=5, succeed=0)
    request = InjectRequest(action_type="update_node", target_type="node", session_id="heeded")
    shown = await inject.inject(store, request, now=at(0, days=1))
    assert [p.id for p in shown.patterns] == [pattern.id]
    heeded = await run_session(store, "heeded", [CREATE, UPDATE], start=at(1, days=1))
    assert (heeded.warned, heeded.avoided) == ([pattern.id], True)

    ignored_request = InjectRequest(
        action_type="update_node", target_type="node", session_id="ignored"
    )
    await inject.inject(store, ignored_request, now=at(0, days=1))
    ignored = await run_session(store, "ignored", [FAIL], start=at(1, days=1))
    assert (ignored.warned, ignored.avoided) == ([pattern.id], False)

    unwarned = await run_session(store, "unwarned", [FAIL], start=at(1, days=1))
    assert (unwarned.warned, unwarned.avoided) == ([], None)


async def test_an_injection_without_a_session_writes_nothing(store: ProfileStore) -> None:
    await promote(store, [FAIL], fail=5, succeed=0)
    before = await store.reads.ledger_seq()
    await inject.inject(
        store, InjectRequest(action_type="update_node", target_type="node"), now=at(0, days=1)
    )
    assert await store.reads.ledger_seq() == before
    await capture.capture(store, [action("later", "search", at=at(0, days=2))], now=at(0, days=2))
    closed = await sequences.close_session(store, "later", at(1, days=2))
    assert closed is not None and closed.warned == []
