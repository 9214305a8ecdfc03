"""Context assembly, references and flush on real SQLite files (and the real embedder)."""

from datetime import UTC, datetime, timedelta

import pytest

from raymem.config import ContextSettings, RecallSettings
from raymem.errors import InvalidRef, InvalidRequest, RefNotFound
from raymem.pipelines import ingest
from raymem.pipelines.context import episodes
from raymem.pipelines.context.assemble import (
    Section,
    SlowSections,
    allocate,
    assemble,
    block_limits,
)
from raymem.pipelines.context.flush import flush
from raymem.pipelines.context.refs import resolve
from raymem.pipelines.known import KnownFacts
from raymem.pipelines.recall import Recaller
from raymem.pipelines.types import Candidate
from raymem.store import ProfileStore, blocks, work
from raymem.store.reads import PENDING_TABLES
from raymem.types import MessageIn, RecallRequest
from raymem.types_context import (
    SECTION_ORDER,
    ContextItem,
    ContextRequest,
    FlushRequest,
    ResolvedBlockEntry,
    ResolvedEpisode,
    ResolvedMemory,
    ResolvedMessage,
    ResolvedWorkItem,
    WorkItemOpen,
)

DIM = 384
SETTINGS = ContextSettings()
LIMITS = block_limits(SETTINGS)
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
BUDGETS = [1, 2, 5, 10, 20, 33, 50, 80, 120, 200, 333, 500, 800, 1_200, 2_000, 3_000, 8_000]


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p" / "profile.db", dim=DIM)
    yield store
    await store.close()


async def fill(store: ProfileStore, embed=None) -> None:
    """Blocks, a work item, memories (one superseded), a closed item's episode, a session.

    With ``embed``, every row gets its vector, as the profile's vectoriser would give it.
    """
    async with store.write() as writer:
        for block, entry in (
            ("user", "Name: Ana; prefers short answers"),
            ("user", "Lives in Vienna since May 2026"),
            ("project", "raymem: memory service on Ray; Python 3.11"),
        ):
            await blocks.add_entry(writer, block, entry, defaults=LIMITS, now=NOW)
        await work.open_item(
            writer,
            WorkItemOpen(
                objective="Release 0.2", session_id="s1", todos=["Tag the release", "Write notes"]
            ),
            item_id="w-release",
            now=NOW,
        )
        await work.open_item(
            writer, WorkItemOpen(objective="Fix the flaky login test"), item_id="w-flaky", now=NOW
        )
    await ingest.ingest(
        store,
        "s0",
        [
            MessageIn(
                role="user", content="I live in Budapest.", created_at=NOW - timedelta(days=9)
            ),
            MessageIn(
                role="user", content="Use pnpm, not npm.", created_at=NOW - timedelta(days=9)
            ),
        ],
    )
    await ingest.remember(store, "I moved to Vienna in May 2026.", memory_id="m-vienna")
    await episodes.close_work_item(
        store, "w-flaky", "Fixed a race in the login test", settings=SETTINGS, now=NOW
    )
    turns = [
        MessageIn(
            role="user",
            content=f"Turn {i}: let's plan the release notes.",
            created_at=NOW + timedelta(minutes=i),
        )
        if i % 2 == 0
        else MessageIn(
            role="assistant", content=f"Reply {i}: noted.", created_at=NOW + timedelta(minutes=i)
        )
        for i in range(8)
    ]
    await ingest.ingest(store, "s1", turns, embed=embed)
    if embed is not None:
        await vectorise(store, embed)


async def vectorise(store: ProfileStore, embed) -> None:
    """Embed every row still without a vector (memories, turns, episodes)."""
    for table in PENDING_TABLES:
        pending = await store.reads.pending_vectors(table, limit=1_000)
        if pending:
            vectors = await embed([text for _, text in pending])
            async with store.write() as writer:
                await writer.set_vectors(
                    table, list(zip([seq for seq, _ in pending], vectors, strict=True))
                )


def recaller(store: ProfileStore, embed=None) -> Recaller:
    return Recaller(store, RecallSettings(), embed)


async def context(store: ProfileStore, embed=None, settings=SETTINGS, **request):
    request.setdefault("query", "Where does the user live?")
    return await assemble(store, recaller(store, embed), ContextRequest(**request), settings)


async def test_the_budget_is_never_exceeded_and_sections_keep_their_order(store):
    await fill(store)
    for fmt in ("markdown", "text"):
        previous = -1
        for budget in BUDGETS:
            result = await context(store, session_id="s1", budget_chars=budget, format=fmt)
            assert len(result.text) <= budget == result.budget_chars, (fmt, budget)
            assert [s.name for s in result.sections] == list(SECTION_ORDER)
            shown = sum(len(s.items) for s in result.sections)
            assert shown >= previous  # a larger budget never shows less
            previous = shown
            cut = {ref for refs in result.dropped.values() for ref in refs}
            kept = {item.source_ref for s in result.sections for item in s.items}
            assert not cut & kept
            assert sum(s.chars for s in result.sections if s.items) <= len(result.text)
    small = await context(store, session_id="s1", budget_chars=5)
    assert small.text == "" and "core" in small.dropped
    assert set(small.latency_ms) >= {*SECTION_ORDER, "assemble", "total"}


async def test_shares_that_add_up_to_more_than_the_whole_still_keep_the_budget(store):
    await fill(store)
    greedy = ContextSettings(
        core_share=0.9,
        working_memory_share=0.9,
        memories_share=0.9,
        episodes_share=0.9,
        recent_turns_share=0.9,
    )
    for budget in BUDGETS:
        result = await context(store, settings=greedy, session_id="s1", budget_chars=budget)
        assert len(result.text) <= budget


async def test_a_large_budget_shows_every_section_in_order(store):
    await fill(store)
    result = await context(
        store,
        query="Was the flaky login test fixed? Which package manager?",
        session_id="s1",
        budget_chars=8_000,
    )
    text = result.text
    headings = [
        "## Core memory",
        "## Working memory",
        "## Relevant memories",
        "## Relevant episodes",
        "## Recent turns",
    ]
    positions = [text.index(h) for h in headings]
    assert positions == sorted(positions) and positions[0] == 0
    assert "### user\nName: Ana; prefers short answers\n§\nLives in Vienna since May 2026\n" in text
    assert "- Work item: Release 0.2\n  Plan: [ ] Tag the release; [ ] Write notes" in text
    assert "- Work item: Fix the flaky login test" not in text  # closed: an episode now
    assert "Fix the flaky login test (ended 2026-05-01): Outcome: Fixed a race" in text
    assert text.endswith("assistant: Reply 7: noted.\n")
    sections = {s.name: s for s in result.sections}
    assert [i.role for i in sections["recent_turns"].items][-2:] == ["user", "assistant"]
    assert result.dropped == {}
    plain = await context(store, session_id="s1", budget_chars=8_000, format="text")
    assert plain.text.startswith("CORE MEMORY\n[user]\n") and "## " not in plain.text


async def test_memories_tell_the_current_truth(store, embed):
    await fill(store, embed)
    result = await context(store, embed, budget_chars=8_000)
    memories = {s.name: s for s in result.sections}["memories"].items
    contents = " ".join(item.content for item in memories)
    assert "Vienna" in contents
    assert "I live in Budapest" not in contents  # its memory was superseded: a stale turn
    recalled = await recaller(store, embed).recall(RecallRequest(query="Where does the user live?"))
    assert "I live in Budapest." in [hit.content for hit in recalled.memories]  # recall has it


async def test_the_prefix_is_stable_across_turns_until_a_slow_section_changes(store):
    await fill(store)
    first = await context(
        store, query="Where does the user live?", session_id="s1", budget_chars=3_000
    )
    await ingest.ingest(
        store,
        "s1",
        [
            MessageIn(
                role="user",
                content="Which editor do I use? Helix.",
                created_at=NOW + timedelta(hours=1),
            )
        ],
    )
    second = await context(store, query="Which editor?", session_id="s1", budget_chars=3_000)
    prefix = first.text[: first.text.index("## Relevant memories")]
    assert second.text.startswith(prefix) and len(prefix) > 200
    again = await context(store, query="Which editor?", session_id="s1", budget_chars=3_000)
    assert again.text == second.text  # same inputs, same bytes

    async with store.write() as writer:
        await blocks.add_entry(
            writer, "project", "Releases are tagged on Fridays", defaults=LIMITS, now=NOW
        )
    third = await context(store, query="Which editor?", session_id="s1", budget_chars=3_000)
    assert not third.text.startswith(prefix)


async def test_without_a_query_the_latest_user_turn_is_asked(store):
    await fill(store)
    question = MessageIn(
        role="user", content="Which package manager?", created_at=NOW + timedelta(hours=1)
    )
    await ingest.ingest(store, "s1", [question])
    result = await context(store, query="", session_id="s1", budget_chars=8_000)
    memories = {s.name: s for s in result.sections}["memories"].items
    assert any("pnpm" in item.content for item in memories)


async def test_budgets_in_tokens_and_bad_budgets(store):
    result = await context(store, budget_tokens=100)
    assert result.budget_chars == 400  # 4 characters per token
    with pytest.raises(InvalidRequest, match="not both"):
        await context(store, budget_tokens=100, budget_chars=100)
    with pytest.raises(InvalidRequest, match="at most 200,000 characters"):
        await context(store, budget_chars=200_001)
    empty = await context(store, budget_chars=100)
    assert empty.text == "" and empty.dropped == {}  # an empty profile: nothing to show


async def test_every_source_ref_resolves_to_its_record(store, embed):
    await fill(store, embed)
    result = await context(store, embed, session_id="s1", budget_chars=20_000)
    refs = [item.source_ref for section in result.sections for item in section.items]
    kinds = {}
    for ref in refs:
        resolved = await resolve(store, ref, block_limits=LIMITS)
        assert resolved.source_ref == ref
        kinds[type(resolved)] = resolved
    assert set(kinds) == {
        ResolvedBlockEntry,
        ResolvedWorkItem,
        ResolvedMemory,
        ResolvedMessage,
        ResolvedEpisode,
    }
    entry = kinds[ResolvedBlockEntry]
    assert (entry.block, entry.position) in {("user", 0), ("user", 1), ("project", 0)}
    vienna = await resolve(store, "mem_m-vienna", block_limits=LIMITS)
    assert [m.content for m in vienna.memory.history][-1] == "I moved to Vienna in May 2026."
    assert len(vienna.memory.history) == 2  # the Budapest fact it superseded
    turns = await store.reads.session_messages("s1")
    middle = await resolve(store, f"msg_{turns[3][1].id}", block_limits=LIMITS)
    assert middle.message == turns[3][1]
    assert [t.content for t in middle.before] == [turns[1][1].content, turns[2][1].content]
    assert [t.content for t in middle.after] == [turns[4][1].content, turns[5][1].content]

    for bad in ("nope", "mem_", "xyz_1", "blk_user", "blk_user_XYZ", "blk_../x_0123456789ab"):
        with pytest.raises(InvalidRef):
            await resolve(store, bad, block_limits=LIMITS)
    for unknown in (
        "mem_0000",
        "msg_0000",
        "epi_0000",
        "wrk_0000",
        "blk_user_0123456789ab",
        "blk_nope_0123456789ab",
    ):
        with pytest.raises(RefNotFound, match="reference"):
            await resolve(store, unknown, block_limits=LIMITS)


async def test_recall_finds_episodes_in_their_own_channel(store, embed):
    await fill(store, embed)
    rec = recaller(store, embed)
    found = await rec.recall(RecallRequest(query="flaky login test race", types=["episode"]))
    assert [hit.type for hit in found.memories] == ["episode"]
    hit = found.memories[0]
    assert hit.source_ref.startswith("epi_") and hit.channels == ["episode_fts", "episode_vector"]
    assert hit.content.startswith("Fix the flaky login test: Outcome: Fixed a race")
    everything = await rec.recall(RecallRequest(query="flaky login test race"))
    assert "episode" in {h.type for h in everything.memories}
    assert all(h.source_ref for h in everything.memories)
    facts = await rec.recall(RecallRequest(query="flaky login test race", types=["fact"]))
    assert "episode" not in {h.type for h in facts.memories}


async def test_the_kept_core_and_working_memory_follow_every_change_of_the_store(store):
    await fill(store)
    slow = SlowSections()

    async def shown(**request):
        result = await assemble(
            store,
            recaller(store),
            ContextRequest(query="release", budget_chars=8_000, **request),
            SETTINGS,
            slow=slow,
        )
        return {s.name: [i.content for i in s.items] for s in result.sections}

    first = await shown(session_id="s1")
    assert first == await shown(session_id="s1")  # read once, shown again
    async with store.write() as writer:
        await blocks.add_entry(writer, "project", "Docs live in docs/", defaults=LIMITS, now=NOW)
        await work.open_item(
            writer, WorkItemOpen(objective="Rotate the keys"), item_id="w-keys", now=NOW
        )
    after = await shown(session_id="s1")
    assert "Docs live in docs/" in after["core"] and "Docs live in docs/" not in first["core"]
    assert any("Rotate the keys" in text for text in after["working_memory"])
    elsewhere = await shown(session_id="s9")  # another session: its own working memory
    assert not any("Release 0.2" in text for text in elsewhere["working_memory"])
    assert any("Release 0.2" in text for text in after["working_memory"])
    await store.close()
    reopened = await ProfileStore.open(store.path, dim=DIM)  # a new read connection
    try:
        async with reopened.write() as writer:
            await blocks.add_entry(writer, "user", "Drinks tea", defaults=LIMITS, now=NOW)
        result = await assemble(
            reopened,
            recaller(reopened),
            ContextRequest(query="release", session_id="s1", budget_chars=8_000),
            SETTINGS,
            slow=slow,
        )
        assert "Drinks tea" in result.text
    finally:
        await reopened.close()


def test_a_light_recall_has_no_model_stages_and_smaller_pools(store):
    full = Recaller(store, RecallSettings(hyde_memory_vector_weight=0.5), None, chat=object())
    light = full.light(20)
    assert light.chat is None and light.store is store
    assert light.settings.candidates_per_channel == 20
    assert light.weights()["hyde_memory_vector"] == 0.0
    assert full.light(500).settings.candidates_per_channel == 50  # never more than recall's


async def test_flush_leaves_out_what_the_core_blocks_say(store):
    async with store.write() as writer:
        await blocks.add_entry(writer, "user", "User prefers dark mode", defaults=LIMITS, now=NOW)
    result = await flush(
        store,
        FlushRequest(
            session_id="s1",
            messages=[
                MessageIn(role="user", content="I prefer dark mode."),
                MessageIn(role="user", content="My dentist appointment is on Tuesday."),
            ],
        ),
        block_limits=LIMITS,
    )
    assert result.error is None and result.known == 1
    assert result.messages.stored == 2 and result.memories.added == 1
    stored = await store.reads.memories_by_id(result.memory_ids)
    assert ["dentist" in m.content for m in stored] == [True]


async def test_flush_leaves_out_a_restatement_in_other_words_by_embedding(store, embed):
    entry = "Prefers tabs to spaces for indentation."
    async with store.write() as writer:
        await blocks.add_entry(writer, "user", entry, defaults=LIMITS, now=NOW)
    restated = "For indentation I always pick tabs, not spaces."  # 0.93 cosine to the entry
    assert not KnownFacts([entry]).restates(restated)  # its words alone do not tell
    result = await flush(
        store,
        FlushRequest(
            session_id="s1",
            messages=[
                MessageIn(role="user", content=restated),
                MessageIn(role="user", content="My cat Miso is twelve years old."),
            ],
        ),
        block_limits=LIMITS,
        embed=embed,
    )
    assert result.error is None and result.known == 1 and "known" in result.latency_ms
    stored = await store.reads.memories_by_id(result.memory_ids)
    assert [m.content for m in stored] == ["My cat Miso is twelve years old."]


async def test_known_facts_keep_what_differs_in_a_concrete_value(embed):
    known = KnownFacts(["User's sister lives in Lisbon."])
    candidates = [
        Candidate(content=text, type="fact", importance=0.5, confidence=0.8)
        for text in ("My sister lives in Porto.", "My sister Ana lives in Lisbon with her kids.")
    ]
    kept = await known.leave_out(candidates, embed)
    assert [c.content for c in kept] == [c.content for c in candidates]
    assert known.repeated == 0


async def test_flush_reports_a_failing_stage_instead_of_failing(store):
    async def broken_embed(texts):
        raise RuntimeError("embedder pool is down")

    result = await flush(
        store,
        FlushRequest(
            session_id="s1", messages=[MessageIn(role="user", content="I use Helix as my editor.")]
        ),
        block_limits=LIMITS,
        embed=broken_embed,
    )
    assert result.error == "RuntimeError: embedder pool is down (stored by the rules alone)"
    assert result.messages.stored == 1 and result.memories.added == 1


def test_a_long_top_hit_is_not_crowded_out_by_shorter_ones_below_it():
    def item(ref: str, chars: int) -> ContextItem:
        return ContextItem(source_ref=ref, kind="memory", content="x" * chars)

    sections = {
        name: Section(name, [], newest_first=name == "recent_turns") for name in SECTION_ORDER
    }
    sections["memories"] = Section(
        "memories", [item("top", 1_500), *(item(f"m{i}", 100) for i in range(10))]
    )
    sections["recent_turns"] = Section(
        "recent_turns", [item("t2", 150), item("t1", 150)], newest_first=True
    )
    allocate(sections, 2_000, SETTINGS, "markdown")
    taken = [i.source_ref for i in sections["memories"].items()]
    assert taken[0] == "top"  # the memories' share alone (about 1,000) could not hold it
    assert [i.source_ref for i in sections["recent_turns"].items()] == ["t1", "t2"]
    assert sum(s.chars for s in sections.values()) <= 2_000
