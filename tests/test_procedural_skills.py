"""Skills and sequence search on real SQLite files with the real embedding model."""

from pathlib import Path

import pytest
from procedural_helpers import CREATE, FAIL, UPDATE, at, enabled_store, run_session

from raymem.errors import Conflict, SkillNotFound
from raymem.pipelines import procedural
from raymem.pipelines.procedural import search, skills
from raymem.store import ProfileStore
from raymem.store.procedural import skills as stored
from raymem.types_procedural import SkillIn, SkillInput

DIM = 384


@pytest.fixture
async def store(tmp_path: Path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    await enabled_store(store)
    yield store
    await store.close()


DEPLOY = SkillIn(
    name="Deploy the web app",
    when_to_use="When a change to the web app has been merged and must go live.",
    steps=["Run the test suite", "Build the container image", "Roll out to production"],
    inputs=[SkillInput(name="version", description="the git tag to release")],
)
ROTATE = SkillIn(
    name="Rotate database credentials",
    when_to_use="When a database password leaked or is older than ninety days.",
    steps=["Create a new password in the vault", "Update the service configuration"],
)


async def test_skills_are_added_searched_by_text_and_vector_and_fetched(
    store: ProfileStore, embed
) -> None:  # type: ignore[no-untyped-def]
    deploy = await skills.add(store, DEPLOY, at(0))
    rotate = await skills.add(store, ROTATE, at(1))
    assert (deploy.status, deploy.source, deploy.inputs[0].name) == (
        "active",
        "operator",
        "version",
    )
    with pytest.raises(Conflict, match="A skill named 'Deploy the web app' exists already"):
        await skills.add(store, DEPLOY, at(2))

    by_text = await skills.search(store, "container image")
    assert [hit.id for hit in by_text] == [deploy.id]
    assert await procedural.vectorise(store, embed, batch=16) == 2
    # No word in common: only the vector finds it.
    by_meaning = await skills.search(store, "secret key exposed", embed=embed, limit=1)
    assert [hit.id for hit in by_meaning] == [rotate.id]
    assert (await skills.get(store, rotate.id)) == rotate
    with pytest.raises(SkillNotFound):
        await skills.get(store, "nope")


async def test_an_updated_skill_is_embedded_again_and_a_deleted_one_is_gone(
    store: ProfileStore, embed
) -> None:  # type: ignore[no-untyped-def]
    deploy = await skills.add(store, DEPLOY, at(0))
    await procedural.vectorise(store, embed, batch=16)
    renamed = SkillIn(
        name="Release the web app", when_to_use=DEPLOY.when_to_use, steps=DEPLOY.steps
    )
    updated = await skills.update(store, deploy.id, renamed, at(5))
    assert (updated.name, updated.created_at, updated.updated_at) == (
        "Release the web app",
        at(0),
        at(5),
    )
    [(_, text)] = await stored.pending_vectors(store.reader, "skill_vectors", limit=5)
    assert text.startswith("Release the web app\n")  # its vector is made again
    assert [hit.id for hit in await skills.search(store, "release")] == [deploy.id]
    await skills.remove(store, deploy.id)
    assert await skills.search(store, "release") == []
    with pytest.raises(SkillNotFound):
        await skills.remove(store, deploy.id)


async def test_a_repeatedly_successful_intent_is_proposed_for_review(store: ProfileStore) -> None:
    for index in range(skills.PROPOSE_MIN_SUCCESSES - 1):
        await run_session(
            store, f"s{index}", [CREATE, UPDATE], start=at(index), intent="Rename a person"
        )
    await run_session(store, "odd", [CREATE, FAIL], start=at(10), intent="rename a person")
    await run_session(store, "failed", [FAIL], start=at(11), intent="delete a person")
    assert await skills.propose(store, at(20)) == []  # 4 successes: 5 are needed

    await run_session(store, "s9", [CREATE, UPDATE], start=at(12), intent="rename a person")
    [candidate] = await skills.propose(store, at(30))
    assert (candidate.status, candidate.source, candidate.name) == (
        "candidate",
        "proposed",
        "rename a person",
    )
    assert candidate.steps == ["create_node on the node", "update_node on the node"]
    assert [i.name for i in candidate.inputs] == ["node"]
    assert candidate.evidence == {"sequences": 6.0, "successes": 5.0}  # 83% succeeded
    assert await skills.search(store, "rename") == []  # not active until adopted
    assert await skills.propose(store, at(40)) == []  # proposed once

    adopted = await skills.review(store, candidate.id, adopt=True, now=at(50))
    assert adopted.status == "active"
    assert [hit.id for hit in await skills.search(store, "rename")] == [candidate.id]
    with pytest.raises(Conflict, match="is active, not a candidate"):
        await skills.review(store, candidate.id, adopt=False, now=at(51))


async def test_a_discarded_proposal_is_not_proposed_again(store: ProfileStore) -> None:
    for index in range(skills.PROPOSE_MIN_SUCCESSES):
        await run_session(store, f"s{index}", [CREATE], start=at(index), intent="add a person")
    [candidate] = await skills.propose(store, at(10))
    discarded = await skills.review(store, candidate.id, adopt=False, now=at(11))
    assert discarded.status == "discarded"
    assert await skills.propose(store, at(20)) == []
    listed = await stored.list_skills(store.reader, status=None)
    assert [(s.id, s.status) for s in listed] == [(candidate.id, "discarded")]


async def test_sequences_are_searchable_by_text_and_vector(store: ProfileStore, embed) -> None:  # type: ignore[no-untyped-def]
    billing = await run_session(
        store, "a", [UPDATE], start=at(0), intent="refund the customer's invoice"
    )
    await run_session(store, "b", [UPDATE], start=at(1), intent="rename a graph node")
    assert [s.id for s in await search.search_sequences(store, "invoice")] == [billing.id]
    await procedural.vectorise(store, embed, batch=16)
    found = await search.search_sequences(store, "money back purchase", embed=embed, limit=1)
    assert [s.id for s in found] == [billing.id]


async def test_an_intent_that_often_fails_is_not_proposed(store: ProfileStore) -> None:
    for index in range(7):  # 5 of 7 succeed: 71%, under 80%
        steps = [CREATE] if index < 5 else [FAIL]
        await run_session(store, f"s{index}", steps, start=at(index), intent="add a person")
    assert await skills.propose(store, at(10)) == []
