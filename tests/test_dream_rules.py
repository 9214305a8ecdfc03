"""A dream's rules on hand-made memories: clustering, values, subjects, lost evidence, decay."""

import math
from datetime import UTC, datetime, timedelta

import numpy as np

from raymem.pipelines import ingest
from raymem.pipelines.dream import rules
from raymem.pipelines.dream.items import Item, concrete_values, load_items, subject_of
from raymem.store import NewMemory, ProfileStore, erase, to_db_time
from raymem.store.memory_use import Use
from raymem.types import MessageIn

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def at_angle(degrees: float) -> np.ndarray:
    """A unit vector in a plane: the cosine between two is the cosine of their angle apart."""
    radians = math.radians(degrees)
    return np.array([math.cos(radians), math.sin(radians), 0.0], dtype=np.float32)


def item(
    memory_id: str,
    content: str,
    vector: np.ndarray | None = None,
    *,
    sources: int = 1,
    said_days_ago: float = 10,
    memory_type: str = "fact",
    importance: float = 0.5,
    learned_days_ago: float = 10,
    use: Use | None = None,
    sources_found: int = 1,
    session_exists: bool = True,
) -> Item:
    record = NewMemory(
        id=memory_id,
        type=memory_type,
        content=content,
        importance=importance,
        source_message_ids=[f"{memory_id}-turn{n}" for n in range(sources)],
        source_spans=[(0, 0)] * sources,
        search_queries=[f"question about {memory_id}?"],
        created_at=to_db_time(NOW - timedelta(days=learned_days_ago)),
    )
    return Item(
        record=record,
        seq=hash(memory_id) % 10_000,
        said_at=NOW - timedelta(days=said_days_ago),
        learned_at=NOW - timedelta(days=learned_days_ago),
        sources_found=sources_found,
        session_exists=session_exists,
        use=use,
        subject=subject_of(record),
        values=concrete_values(content),
        vector=vector,
    )


def test_clusters_form_around_the_best_supported_statement_without_chaining():
    # b is 18 degrees from a (cosine .95), c 18 more (cosine .81 to a, .95 to b).
    a = item("a", "I walk the dog daily.", at_angle(0), sources=2)
    b = item("b", "I walk my dog every day.", at_angle(18))
    c = item("c", "Walking the dog is my daily routine.", at_angle(36))
    (change,) = rules.merges([c, b, a], gate=0.9)
    assert change.kept == "a" and change.memory_ids == ["a", "b"]  # c is not b's to bring
    assert change.memory is not None
    assert change.memory.source_message_ids == ["a-turn0", "a-turn1", "b-turn0"]
    assert change.memory.search_queries == ["question about a?", "question about b?"]


def test_statements_with_other_values_or_of_other_people_are_not_merged():
    vector = at_angle(0)
    rooms = [
        item("r14", "My office is room 14.", vector),
        item("r15", "My office is room 15.", vector),
    ]
    assert rules.merges(rooms, gate=0.9) == []
    people = [
        item("c", "Caroline: I moved to Paris.", vector),
        item("m", "Melanie: I moved to Paris.", vector),
    ]
    assert [i.subject for i in people] == ["caroline", "melanie"]
    assert rules.merges(people, gate=0.9) == []
    assert concrete_values("Melanie: Family's important to me.") == frozenset()


def test_the_newest_value_replaces_the_older_ones():
    old = item("old", "Our standup is at 9:30.", at_angle(0), said_days_ago=40)
    new = item("new", "Our standup is at 10:15.", at_angle(10), said_days_ago=5)
    event = item("e", "We met at 9:30.", at_angle(5), memory_type="event", said_days_ago=1)
    (change,) = rules.contradictions([old, new, event], gate=0.85)
    assert (change.action, change.kept, change.memory_ids) == ("replace", "new", ["new", "old"])
    keyed = [item("k1", "I live in Rome.", None, said_days_ago=30), item("k2", "I live in Oslo.")]
    for memory in keyed:
        memory.record.topic_key = "user.location"
    (by_key,) = rules.contradictions(keyed, gate=0.85)
    assert by_key.kept == "k2" and "user.location" in by_key.reason


def test_decay_retires_idle_memories_but_never_instructions_or_recently_used_ones():
    idle = item("idle", "I like kites.", learned_days_ago=800)
    rule = item("rule", "Always answer in French.", memory_type="instruction", learned_days_ago=800)
    used = item(
        "used",
        "I like kayaks.",
        learned_days_ago=800,
        use=Use(3, to_db_time(NOW - timedelta(days=2))),
    )
    fresh = item("fresh", "I like knots.", learned_days_ago=1)
    changes = rules.stale([idle, rule, used, fresh], NOW, half_life_days=90, below=0.05)
    assert [change.memory_ids for change in changes] == [["idle"]]
    assert rules.strength(fresh, NOW, 90) > rules.strength(idle, NOW, 90)
    lost = item("lost", "I like kale.", sources_found=0, session_exists=False)
    purged = item("purged", "I like kiwis.", sources_found=0, session_exists=True)
    assert [c.memory_ids for c in rules.lost_evidence([lost, purged, fresh])] == [["lost"]]


async def test_the_retention_purge_does_not_make_evidence_lost(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=8)
    try:
        turns = [MessageIn(role="user", content="The staging database is called orchid-42.")]
        await ingest.ingest(store, "s1", turns)
        async with store.write() as writer:
            await erase.erase_turns_before(
                writer, to_db_time(datetime.now(UTC) + timedelta(days=1))
            )
        (loaded,) = await load_items(store)
        assert (loaded.sources_found, loaded.session_exists) == (0, True)
        assert rules.lost_evidence([loaded]) == []
        async with store.write() as writer:  # a session erased without its memories
            await writer.conn.execute("DELETE FROM sessions")
        (loaded,) = await load_items(store)
        assert [change.action for change in rules.lost_evidence([loaded])] == ["retire"]
    finally:
        await store.close()


def test_statements_that_name_no_one_and_no_value_are_retired_as_stating_no_fact():
    empty = {
        "remark": "Melanie: That sounds amazing!",
        "generic": "Jon: Change is possible, it just takes time.",
        "to-listener": "Caroline: You really care about helping others.",
    }
    stating = {
        "person": "Melanie: I ran a charity race for mental health.",
        "third": "Jon: She finally opened the dance studio.",
        "values": "Jon: The studio opens on 5 May in Newark.",
        "left-out-subject": "Tim: Just got back from a road trip with the family.",
        "regular-past": "Tim: Started learning the violin last month.",
        "act": "Melanie: [shares a photo: a painting of a sunset over a lake]",
        "instruction": "Keep answers short and skip the small talk.",
        "task": "Buy more coffee filters before the weekend.",
    }
    items = [item(key, content) for key, content in empty.items()]
    items += [item("instruction", stating["instruction"], memory_type="instruction")]
    items += [item("task", stating["task"], memory_type="task")]
    items += [
        item(key, content) for key, content in stating.items() if key not in ("instruction", "task")
    ]
    changes = rules.no_fact(items)
    assert {change.memory_ids[0] for change in changes} == set(empty)
    assert all(change.action == "retire" and "no fact" in change.reason for change in changes)
