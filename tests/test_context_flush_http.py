"""Flush before compaction over HTTP: the core blocks' entries are known facts, not re-saved.

Without a model (the rules), a memory restating an entry, in its words or in other
words (by embedding), is left out while a new fact is stored. With a model (a
local server speaking the OpenAI protocol, as a second app on the same Serve
proxy), the extraction prompt lists the entries with the instruction not to
extract them again, and what the model extracts anyway is still left out.
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from conftest import wait_until
from openai_server import ChatServer

from raymem.config import load_settings
from raymem.pipelines.generators import DECIDE_SYSTEM, EXTRACT_SYSTEM, KNOWN_CONTEXT

PREFIX = "/flush-model"
TABS = "Prefers tabs to spaces for indentation."


def extraction_answer(body: dict[str, Any]) -> tuple[int, str]:
    """A scripted model: it extracts a restatement of the entry and a new fact."""
    system = body["messages"][0]["content"]
    if system == EXTRACT_SYSTEM:
        memories = [
            {"content": "The user prefers tabs to spaces for indentation.", "lines": [0]},
            {"content": "The user's cat Miso is twelve years old.", "lines": [1], "type": "fact"},
        ]
        return 200, json.dumps({"memories": memories})
    if system == DECIDE_SYSTEM:
        return 200, json.dumps({"decision": "add", "target": None})
    return 200, "{}"


@pytest.fixture(scope="module")
def chat_server() -> Iterator[ChatServer]:
    with ChatServer(extraction_answer).running() as server:
        yield server


@pytest.fixture(scope="module")
def model_url(
    serve_app: str, chat_server: ChatServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A second raymem app whose generator is the local OpenAI-protocol server."""
    from ray import serve

    from raymem.serve.app import build_app

    settings = load_settings(
        environ={"RAYMEM_DATA_DIR": str(tmp_path_factory.mktemp("flush-model-data"))}
    )
    models = msgspec.structs.replace(
        settings.models,
        generator="openai",
        openai_base_url=chat_server.base_url,
        openai_model="scripted",
        generator_attempts=1,
    )
    settings = msgspec.structs.replace(
        settings, app_name="raymem-flush-model", namespace="raymem-flush-model", models=models
    )
    serve.run(build_app(settings), name="raymem-flush-model", route_prefix=PREFIX, blocking=False)
    url = f"{serve_app}{PREFIX}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, timeout=120)
    yield url
    serve.delete("raymem-flush-model")


def flush_with_entry(client: httpx.Client, profile: str, turns: list[str]) -> dict[str, Any]:
    base = f"/v1/profiles/{profile}"
    added = client.post(f"{base}/blocks/user/entries", json={"content": TABS})
    assert added.status_code == 201, added.text
    messages = [{"role": "user", "content": turn} for turn in turns]
    flushed = client.post(f"{base}/flush", json={"session_id": "s1", "messages": messages})
    assert flushed.status_code == 200, flushed.text
    result: dict[str, Any] = flushed.json()
    return result


def stored_contents(client: httpx.Client, profile: str) -> list[str]:
    memories = client.get(f"/v1/profiles/{profile}/memories").json()["memories"]
    return [memory["content"] for memory in memories]


def test_without_a_model_a_restatement_in_other_words_is_not_saved(http, profile_name):
    restated = "For indentation I always pick tabs, not spaces."
    result = flush_with_entry(http, profile_name, [restated, "My cat Miso is twelve years old."])
    assert result["error"] is None and result["messages"]["stored"] == 2
    assert result["known"] == 1 and result["memories"]["added"] == 1
    assert stored_contents(http, profile_name) == ["My cat Miso is twelve years old."]


def test_a_model_is_shown_the_core_blocks_and_what_it_repeats_is_not_saved(
    model_url, chat_server, profile_name
):
    with httpx.Client(base_url=model_url, timeout=60) as client:
        result = flush_with_entry(
            client, profile_name, ["I prefer tabs to spaces.", "My cat Miso is twelve years old."]
        )
        stored = stored_contents(client, profile_name)
    assert result["error"] is None and result["messages"]["stored"] == 2
    extractions = [
        body["messages"][-1]["content"]
        for _, _, body in chat_server.requests
        if body["messages"][0]["content"] == EXTRACT_SYSTEM
    ]
    shown = [prompt for prompt in extractions if "My cat Miso" in prompt]
    assert shown and all(prompt.startswith(f"{KNOWN_CONTEXT}\n- {TABS}\n") for prompt in shown)
    assert result["known"] == 1, stored  # the model repeated the entry anyway: left out
    assert stored == ["The user's cat Miso is twelve years old."]
