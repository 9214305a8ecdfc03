"""Recall with a configured model: query expansion, a model-written HyDE statement and the
answer, against a local server that speaks the OpenAI chat protocol; rules when it fails."""

import json

import pytest
from openai_server import ChatServer

from raymem.config import RecallSettings
from raymem.models.chat import OpenAIChat
from raymem.pipelines import ingest as ingest_pipeline
from raymem.pipelines.recall import Recaller
from raymem.pipelines.recall_model import ANSWER_SYSTEM, EXPAND_SYSTEM
from raymem.store import ProfileStore
from raymem.types import RecallRequest


@pytest.fixture
async def store(tmp_path, embed):
    store = await ProfileStore.open(tmp_path / "p.db", dim=384)
    for index, text in enumerate(
        ["Rex is our border collie.", "The boiler was serviced in March.", "I teach maths."]
    ):
        await ingest_pipeline.remember(store, text, memory_id=f"m{index}", embed=embed)
    yield store
    await store.close()


def scripted(body: dict) -> tuple[int, str]:
    system = body["messages"][0]["content"]
    if system == EXPAND_SYSTEM:
        return 200, json.dumps({"terms": ["collie", "pet"], "statement": "Our dog is Rex."})
    if system == ANSWER_SYSTEM:
        facts = body["messages"][-1]["content"]
        return 200, "Your dog is Rex." if "Rex" in facts else "I do not know."
    return 500, "unexpected prompt"


async def test_a_model_widens_the_query_and_answers(store, embed):
    server = ChatServer(scripted)
    with server.running():
        chat = OpenAIChat(server.base_url, "test-model", attempts=1)
        result = await Recaller(store, RecallSettings(), embed, chat).recall(
            RecallRequest(query="What is my pet called?")
        )

    assert result.answer == "Your dog is Rex."
    assert result.generated_by == {"analysis": "rules+model", "answer": "model"}
    assert "Rex" in result.memories[0].content
    assert "collie" in result.memories[0].content  # found through the model's terms too
    assert "memory_fts" in result.memories[0].channels
    asked = [body["messages"][0]["content"] for _, _, body in server.requests]
    assert asked == [EXPAND_SYSTEM, ANSWER_SYSTEM]


async def test_a_failing_model_leaves_the_rules_in_place(store, embed):
    server = ChatServer(lambda body: (500, "overloaded"))
    with server.running():
        chat = OpenAIChat(server.base_url, "test-model", attempts=1)
        result = await Recaller(store, RecallSettings(), embed, chat).recall(
            RecallRequest(query="Who is Rex?")
        )

    assert result.generated_by["analysis"].startswith("rules (model failed")
    assert result.generated_by["answer"].startswith("rules (model failed")
    assert "Rex" in result.answer  # the composed answer


async def test_a_slow_model_times_out_to_the_rules(store, embed):
    server = ChatServer(scripted, delay_s=2.0)
    with server.running():
        chat = OpenAIChat(server.base_url, "test-model", attempts=1)
        settings = RecallSettings(model_timeout_s=0.2)
        result = await Recaller(store, settings, embed, chat).recall(
            RecallRequest(query="Who is Rex?")
        )

    assert result.generated_by == {
        "analysis": "rules (model failed: TimeoutError)",
        "answer": "rules (model failed: TimeoutError)",
    }
    assert "Rex" in result.answer


async def test_without_a_model_every_stage_is_rules(store, embed):
    result = await Recaller(store, RecallSettings(), embed).recall(RecallRequest(query="Rex"))

    assert result.generated_by == {"analysis": "rules", "answer": "rules"}
