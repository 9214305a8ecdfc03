"""Recall against real components: SQLite files with FTS5 and vec0, and the real embedding model."""

import os
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from raymem.config import RecallSettings
from raymem.pipelines import fusion, language, recall, temporal
from raymem.pipelines import ingest as ingest_pipeline
from raymem.pipelines import query as query_analysis
from raymem.store import ProfileStore
from raymem.types import MessageIn, RecallRequest, StoredMessage

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DISTRACTORS = [
    "I work at Acme as a data engineer.",
    "The quarterly review moved to Thursday afternoon.",
    "My sister plays the cello in an orchestra.",
    "We repainted the kitchen a pale green colour.",
]


@pytest.fixture
async def store(tmp_path):
    store = await ProfileStore.open(tmp_path / "p.db", dim=384)
    yield store
    await store.close()


async def vectorise(store: ProfileStore, embed) -> None:
    """What the profile actor does in the background: embed every pending row."""
    for table in ("memory_vectors", "message_vectors"):
        pending = await store.reads.pending_vectors(table, limit=10_000)
        if pending:
            vectors = await embed([text for _, text in pending])
            async with store.write() as writer:
                await writer.set_vectors(
                    table, [(seq, vectors[i]) for i, (seq, _) in enumerate(pending)]
                )


async def remember_all(store: ProfileStore, contents: list[str]) -> None:
    for index, content in enumerate(contents):
        await ingest_pipeline.remember(store, content, memory_id=f"m{index}")


def recaller(store: ProfileStore, embed) -> recall.Recaller:
    return recall.Recaller(store, RecallSettings(), embed)


async def ask(store, embed, query: str, **options):
    return await recaller(store, embed).recall(RecallRequest(query=query, **options))


# ----------------------------------------------------------------- channels


async def test_exact_identifier_is_found_by_full_text(store, embed):
    await remember_all(store, [*DISTRACTORS, "The staging deploy token is ZX4471QP."])
    await vectorise(store, embed)

    result = await ask(store, embed, "ZX4471QP")

    assert "ZX4471QP" in result.memories[0].content
    assert "memory_fts" in result.memories[0].channels


async def test_paraphrase_is_found_by_vectors_only(store, embed):
    await remember_all(store, [*DISTRACTORS, "I adopted a golden retriever puppy in spring."])
    await vectorise(store, embed)

    result = await ask(store, embed, "Which canine companion joined my household?")

    top = result.memories[0]
    assert "retriever" in top.content
    assert "memory_vector" in top.channels
    assert not {"memory_fts", "message_fts"} & set(top.channels)  # no word in common


async def test_topic_key_finds_the_current_preference(store, embed):
    await remember_all(store, [*DISTRACTORS, "Use npm for this repo.", "Switch to pnpm, please."])
    await vectorise(store, embed)

    result = await ask(store, embed, "Which package manager should I use?")

    top = result.memories[0]
    assert top.topic_key == "user.package_manager"
    assert "pnpm" in top.content  # the head of the chain, not the superseded npm
    assert "topic_key" in top.channels
    assert all("npm for this repo" not in hit.content for hit in result.memories)


async def test_raw_message_that_extraction_skipped(store, embed):
    turns = [
        MessageIn(role="user", content="Where does the staging server live?"),
        MessageIn(role="assistant", content="The staging box answers on 10.0.4.17 port 2222."),
    ]
    result = await ingest_pipeline.ingest(store, "s1", turns)
    assert result.memories.added == 0  # a question and an assistant statement: nothing extracted
    await vectorise(store, embed)

    found = await ask(store, embed, "staging box port")

    hit = next(hit for hit in found.memories if "10.0.4.17" in hit.content)
    assert hit.type == "message"
    assert hit.role == "assistant"
    assert "message_fts" in hit.channels


async def test_memory_and_its_source_turn_share_one_slot(store, embed):
    await ingest_pipeline.ingest(
        store, "s1", [MessageIn(role="user", content="I keep my bees on the roof of the library.")]
    )
    await vectorise(store, embed)

    result = await ask(store, embed, "Where are the bees kept?")

    evidence = [hit.source_message_ids[0] for hit in result.memories]
    assert len(evidence) == len(set(evidence))
    assert {"memory_fts", "message_fts"} <= set(result.memories[0].channels)


async def test_neighbour_of_a_strong_turn_joins_the_result(store, embed):
    turns = [
        MessageIn(role="user", content="What did the locksmith charge for the cellar door?"),
        MessageIn(role="assistant", content="Eighty-five euros, cash only."),
        *(MessageIn(role="user", content=text) for text in DISTRACTORS),
    ]
    await ingest_pipeline.ingest(store, "s1", turns)
    await vectorise(store, embed)

    result = await ask(store, embed, "locksmith cellar door charge")

    answer = next(hit for hit in result.memories if "Eighty-five" in hit.content)
    # Found weakly by a channel itself, it is lifted as context; found by none, as a neighbour.
    assert {"neighbour", "context"} & set(answer.channels)


async def test_turn_among_other_found_turns_outranks_a_stray_match(store, embed):
    """The answer sits amid the talk about its topic; a lone keyword match does not."""
    await ingest_pipeline.ingest(
        store,
        "s1",
        [
            MessageIn(role="user", content="Mia: We finally went sailing on the lake."),
            MessageIn(role="user", content="Tom: How was the boat?"),
            MessageIn(role="user", content="Mia: The sailing boat was small but fast."),
            MessageIn(role="user", content="Tom: Did the wind hold up?"),
        ],
    )
    await ingest_pipeline.ingest(
        store,
        "s2",
        [
            MessageIn(role="user", content="Tom: My cousin sells boat insurance now."),
            *(MessageIn(role="user", content=f"Mia: {text}") for text in DISTRACTORS),
        ],
    )
    await vectorise(store, embed)

    result = await ask(store, embed, "Mia sailing boat lake", limit=5)

    first = result.memories[0]
    assert first.session_id == "s1"
    assert {"context", "neighbour"} & set(first.channels)


def test_context_lift_comes_from_nearby_found_turns_of_the_same_session():
    def turn(session: str, seq: int, score: float) -> fusion.Scored:
        message = StoredMessage(
            id=f"{session}-{seq}",
            session_id=session,
            role="user",
            content="x",
            created_at=datetime(2024, 1, 1, tzinfo=UTC),
        )
        return fusion.Scored({"message_fts": score}, message=message, message_seq=seq)

    items = [turn("a", 10, 1.0), turn("a", 11, 0.5), turn("a", 13, 0.5), turn("b", 12, 1.0)]

    lifts = fusion.context_lifts(items, window=3, share=0.4)

    assert lifts[0] == pytest.approx(0.4 * (0.5 / 1 + 0.5 / 3))
    assert lifts[1] == pytest.approx(0.4 * (1.0 / 1 + 0.5 / 2))
    assert lifts[3] == 0.0  # alone in its session, however close its seq
    assert fusion.context_lifts(items, window=0, share=0.4) == [0.0] * 4


def test_query_names_skip_the_first_word_and_possessives():
    assert query_analysis.query_names("What is Dave's main passion?") == ["dave"]
    assert query_analysis.query_names("Did Audrey and Andrew grow up with a dog?") == [
        "audrey",
        "andrew",
    ]
    assert query_analysis.query_names("what did I buy last week?") == []


async def test_turns_said_by_the_person_asked_about_are_favoured(store, embed):
    await ingest_pipeline.ingest(
        store,
        "s1",
        [
            MessageIn(role="user", content="Calvin: Dave, I really love vintage guitars."),
            MessageIn(role="user", content="Dave: I really love vintage cars, Calvin."),
            *(MessageIn(role="user", content=f"Calvin: {text}") for text in DISTRACTORS),
        ],
    )
    await vectorise(store, embed)

    result = await ask(store, embed, "What vintage things does Dave love?")

    assert result.memories[0].content.startswith("Dave:")
    assert "speaker" in result.memories[0].channels


async def test_question_about_what_the_assistant_said_favours_its_turns(store, embed):
    turns = [
        MessageIn(role="user", content="Any hiking trail near Moncayo you would recommend?"),
        MessageIn(role="assistant", content="Try the Moncayo summit trail from the sanctuary."),
        MessageIn(role="user", content="I hiked a Moncayo trail with my brother last spring."),
    ]
    await ingest_pipeline.ingest(store, "s1", turns)
    await vectorise(store, embed)

    query = "Which Moncayo trail did you recommend?"
    plain = await recall.Recaller(store, RecallSettings(speaker_share=0), embed).recall(
        RecallRequest(query=query)
    )
    result = await ask(store, embed, query)

    def assistant(answer):
        return next(hit for hit in answer.memories if hit.role == "assistant")

    assert "speaker" in assistant(result).channels
    assert assistant(result).score > assistant(plain).score
    assert "speaker" not in {
        c for hit in result.memories if hit.role != "assistant" for c in hit.channels
    }


async def test_failing_embedder_falls_back_to_text_channels(store, embed):
    await remember_all(store, [*DISTRACTORS, "The staging deploy token is ZX4471QP."])
    await vectorise(store, embed)

    async def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model pool is down")

    result = await ask(store, broken, "What is the staging deploy token?")

    assert "ZX4471QP" in result.memories[0].content
    channels = {c for hit in result.memories for c in hit.channels}
    assert channels and not any("vector" in c for c in channels)


@pytest.mark.parametrize(
    "query",
    [
        '"deploy token',
        "deploy* token*",
        "NEAR(deploy token, 2)",
        "deploy AND token OR NOT staging",
        "content:token search_queries:deploy",
        "((deploy token",
        "token) ^ - + :",
        "*",
        '"',
        "___",
    ],
)
async def test_fts_syntax_in_a_query_is_harmless(store, embed, query):
    await remember_all(store, [*DISTRACTORS, "The staging deploy token is ZX4471QP."])
    await vectorise(store, embed)

    result = await ask(store, embed, query)

    assert isinstance(result.memories, list)
    if language.query_words(query):  # a query with words still finds the memory by them
        assert any("ZX4471QP" in hit.content for hit in result.memories[:3])


# ------------------------------------------------------------------- fusion


def test_fusion_weights_and_agreement():
    rankings = {
        "memory_fts": [("memory", 1), ("memory", 2)],
        "memory_vector": [("memory", 2), ("memory", 3)],
        "topic_key": [("memory", 4)],
    }
    weights = {"memory_fts": 1.0, "memory_vector": 1.0, "topic_key": 2.0}

    fused = {c.seq: c for c in fusion.fuse(rankings, weights, k=60)}

    assert fused[4].score > fused[2].score  # topic key at rank 1 weighs double
    assert fused[2].score > fused[1].score  # found by two channels beats one
    assert fused[2].channels == ["memory_fts", "memory_vector"]


async def test_ties_are_broken_by_recency(store, embed):
    older, newer = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC)
    for session, moment in (("old", older), ("new", newer)):
        turn = MessageIn(
            role="assistant", content=f"Reminder {session}: water the ferns.", created_at=moment
        )
        await ingest_pipeline.ingest(store, session, [turn])
    rows = store.search.messages_by_seq([1, 2])
    items = [
        fusion.Scored({"message_fts": 1.0}, message=row, message_seq=seq)
        for seq, row in rows.items()
    ]

    ordered = fusion.order(items)

    assert [item.when for item in ordered] == [newer, older]


# ------------------------------------------------------------ query analysis


def test_fts_query_quotes_words_and_adds_verb_forms():
    query = query_analysis.fts_query('When did Caroline go to the "support" group*?')

    assert query is not None
    assert '"caroline"' in query and '"went"' in query and '"support"' in query
    assert '"the"' not in query  # stop words carry no topic
    assert query_analysis.fts_query("what is it?") is None


def test_hyde_statement_phrases_the_answer():
    assert query_analysis.hyde_statement("When did Caroline go to the support group?") == (
        "Caroline went to the support group"
    )
    assert (
        query_analysis.hyde_statement("What is Melanie's favourite book?")
        == "Melanie's favourite book is"
    )
    assert query_analysis.hyde_statement("pottery class") is None


def test_time_ranges_resolve_absolute_and_relative_dates():
    anchor = datetime(2023, 7, 15, 12, tzinfo=UTC)

    (day,) = temporal.time_ranges("What did I do on 8 May, 2023?", anchor)
    (month,) = temporal.time_ranges("Which concerts did I see in March?", anchor)
    (yesterday,) = temporal.time_ranges("What did I cook yesterday?", anchor)

    assert (day.start, day.end) == (
        datetime(2023, 5, 8, tzinfo=UTC),
        datetime(2023, 5, 9, tzinfo=UTC),
    )
    assert (month.start, month.end) == (
        datetime(2023, 3, 1, tzinfo=UTC),
        datetime(2023, 4, 1, tzinfo=UTC),
    )
    assert yesterday.start == datetime(2023, 7, 14, tzinfo=UTC)


async def test_time_range_channel_prefers_turns_in_the_named_month(store, embed):
    for month in (3, 5):
        moment = datetime(2023, month, 10, tzinfo=UTC)
        turn = MessageIn(
            role="user",
            content=f"I went hiking at Mount Ellis, trip number {month}.",
            created_at=moment,
        )
        await ingest_pipeline.ingest(store, f"s{month}", [turn])
    await vectorise(store, embed)

    result = await ask(store, embed, "Where did I go hiking in May 2023?")

    assert "number 5" in result.memories[0].content
    assert "message_time" in result.memories[0].channels


# ---------------------------------------------------------- date arithmetic


async def dated_history(store: ProfileStore) -> None:
    start = datetime(2023, 5, 1, 9, tzinfo=UTC)
    events = [
        (start, "I signed up for the pottery class downtown."),
        (start + timedelta(days=40), "I ran the Lisbon marathon this morning!"),
        (start + timedelta(days=60), "Just planning the garden."),
    ]
    for index, (moment, content) in enumerate(events):
        await ingest_pipeline.ingest(
            store, f"s{index}", [MessageIn(role="user", content=content, created_at=moment)]
        )


async def test_days_between_two_events(store, embed):
    await dated_history(store)

    result = await ask(
        store, embed, "How many days passed between the pottery class and the Lisbon marathon?"
    )

    assert "40 days apart" in result.answer
    assert "1 May 2023" in result.answer and "10 June 2023" in result.answer


async def test_which_came_first(store, embed):
    await dated_history(store)

    result = await ask(
        store, embed, "Which happened first, the Lisbon marathon or the pottery class?"
    )

    assert result.answer.startswith(
        "the pottery class (1 May 2023) came before the Lisbon marathon"
    )


async def test_how_long_ago_counts_from_as_of_or_the_clock(store, embed):
    await dated_history(store)
    question = "How many weeks ago did I run the Lisbon marathon?"
    asked = datetime(2023, 6, 30, 9, tzinfo=UTC)  # 20 days after the marathon

    dated = await ask(store, embed, question, as_of=asked)
    undated = await ask(store, embed, question)

    assert "2.9 weeks apart" in dated.answer
    # "Now" is the clock, not the newest conversation: years after 2023 by now.
    weeks = (datetime.now(UTC) - datetime(2023, 6, 10, tzinfo=UTC)).days / 7
    found = re.search(r"([\d.]+) weeks apart", undated.answer)
    assert found and abs(float(found.group(1)) - weeks) < 0.5, undated.answer


async def test_result_shape_and_latency(store, embed):
    await remember_all(store, DISTRACTORS)
    await vectorise(store, embed)

    result = await ask(store, embed, "Where do I work?", limit=2)

    assert len(result.memories) == 2
    assert result.method.startswith("hybrid:")
    assert {"analyse", "text_channels", "vector_channels", "fuse", "total"} <= set(
        result.latency_ms
    )
    assert result.memories[0].score >= result.memories[1].score
    assert "Acme" in result.answer


# ------------------------------------------------------------ term budget


def test_within_budget_keeps_the_rarest_terms_in_query_order():
    phrases = ['"member"', '"guitar"', '"3806"', '"kept"']
    assert query_analysis.within_budget(phrases, [9000, 900, 1, 0], budget=1000) == [
        '"guitar"',
        '"3806"',
    ]
    assert query_analysis.within_budget(phrases, [9000, 900, 1, 0], budget=10_000) == phrases[:3]
    # only common terms: the rarest one still searches
    assert query_analysis.within_budget(phrases[:2], [9000, 5001], budget=100) == ['"guitar"']
    assert query_analysis.within_budget(phrases, [0, 0, 0, 0], budget=100) == []


async def test_term_counts_stop_at_the_cap(store):
    await ingest_pipeline.ingest(
        store,
        "s1",
        [MessageIn(role="user", content=f"Member {i} keeps a lamp at home.") for i in range(30)],
    )
    counts = store.search.term_counts("messages", ['"member"', '"7"', '"piano"'], cap=10)
    assert counts == [10, 1, 0]
    assert store.search.term_counts("messages", ['"member"'], cap=100) == [30]
    assert (store.search.term_counts("memories", ['"lamp"', '"7"'], cap=100))[1] >= 1


async def test_a_word_in_every_row_is_left_out_but_the_rare_one_finds_its_turn(store, embed):
    contents = [f"Member {i} keeps a lamp at home." for i in range(40)]
    await ingest_pipeline.ingest(store, "s1", [MessageIn(role="user", content=c) for c in contents])
    settings = RecallSettings(fts_postings_budget=20)
    recaller = recall.Recaller(store, settings, None)
    analysis = query_analysis.analyse("Where does member 17 keep the lamp?")
    query = await recaller._budgeted_query("messages", analysis.fts_terms)
    assert query is not None and '"17"' in query
    assert '"member"' not in query and '"lamp"' not in query
    result = await recaller.recall(RecallRequest(query="Where does member 17 keep the lamp?"))
    assert "Member 17 keeps" in result.memories[0].content
