"""Generator backends: rules, an OpenAI-compatible endpoint over real HTTP, a tiny local LM."""

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from openai_server import ChatServer

from raymem.actors.pools import GeneratorPool, generator_options, pool_generator
from raymem.config import ModelSettings
from raymem.models.chat import MalformedAnswer, OpenAIChat, TransformersChat
from raymem.models.prompt_cache import PromptCache, shared_prefix_length
from raymem.pipelines.generators import (
    KNOWN_CONTEXT,
    LLMGenerator,
    RulesGenerator,
    extract_prompt,
    make_generator,
    parse_extract_answer,
)
from raymem.pipelines.types import Chunk, Line, Neighbour


def chunk_of(*texts: str, role: str = "user") -> Chunk:
    lines = [
        Line(index=i, message_id=f"m{i}", line=0, role=role, date="2026-04-15", text=text)
        for i, text in enumerate(texts)
    ]
    return Chunk(number=0, message_ids=[line.message_id for line in lines], lines=lines)


def answer(*memories: dict) -> str:
    return json.dumps({"memories": list(memories)})


async def test_a_model_is_shown_what_is_known_and_told_not_to_extract_it_again():
    server = ChatServer(lambda body: (200, answer({"content": "Has a cat", "lines": [0]})))
    chunk = chunk_of("My cat Miso is twelve.", "I  prefer   dark mode.")
    with server.running():
        chat = OpenAIChat(server.base_url, "tiny-llm", timeout_s=5)
        generator = LLMGenerator(chat)
        items = await generator.extract(chunk, known=["Prefers dark mode.", "Works at Acme."])
        await generator.extract(chunk)
    assert [item.content for item in items] == ["Has a cat"]
    told, plain = (body["messages"][-1]["content"] for _, _, body in server.requests)
    assert told.startswith(KNOWN_CONTEXT) and "- Prefers dark mode.\n- Works at Acme.\n" in told
    assert told.index("Works at Acme.") < told.index("Transcript:")
    assert told.endswith(plain) and KNOWN_CONTEXT not in plain  # the same prompt after it


async def test_openai_chat_speaks_the_wire_protocol():
    server = ChatServer(lambda body: (200, answer({"content": "x", "lines": [0]})))
    with server.running():
        chat = OpenAIChat(server.base_url, "tiny-llm", api_key="sk-test", timeout_s=5)
        text = await chat.complete([{"role": "user", "content": "hi"}], max_tokens=32)
        await chat.close()
    assert json.loads(text)["memories"][0]["content"] == "x"
    [(path, headers, body)] = server.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "tiny-llm" and body["max_tokens"] == 32
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["response_format"] == {"type": "json_object"} and body["temperature"] == 0


async def test_openai_chat_retries_server_errors_then_succeeds():
    statuses = iter([503, 500, 200])
    server = ChatServer(lambda body: (next(statuses), "ok"))
    with server.running():
        chat = OpenAIChat(server.base_url, "m", attempts=3, timeout_s=5)
        assert await chat.complete([{"role": "user", "content": "hi"}], max_tokens=4) == "ok"
        await chat.close()
    assert len(server.requests) == 3


async def test_openai_chat_does_not_retry_a_bad_request_and_times_out():
    server = ChatServer(lambda body: (400, "bad"))
    with server.running():
        chat = OpenAIChat(server.base_url, "m", attempts=3, timeout_s=5)
        with pytest.raises(httpx.HTTPStatusError):
            await chat.complete([{"role": "user", "content": "hi"}], max_tokens=4)
        await chat.close()
    assert len(server.requests) == 1
    slow = ChatServer(lambda body: (200, "late"), delay_s=1.0)
    with slow.running():
        chat = OpenAIChat(slow.base_url, "m", attempts=2, timeout_s=0.2)
        with pytest.raises(httpx.TimeoutException):
            await chat.complete([{"role": "user", "content": "hi"}], max_tokens=4)
        await chat.close()
    assert len(slow.requests) == 2  # a timeout is retried


async def test_llm_generator_prompts_with_the_transcript_and_parses_items():
    reply = answer(
        {
            "content": "User prefers pnpm",
            "type": "instruction",
            "lines": [1],
            "topic_key": "user.package_manager",
            "questions": ["Which package manager?"],
        }
    )
    server = ChatServer(lambda body: (200, f"Sure! ```json\n{reply}\n```"))
    with server.running():
        generator = LLMGenerator(OpenAIChat(server.base_url, "m"))
        items = await generator.extract(chunk_of("Hello there.", "Use pnpm, not npm."))
    [item] = items
    assert (item.content, item.type, item.lines) == ("User prefers pnpm", "instruction", [1])
    prompt = server.requests[0][2]["messages"]
    assert "[1] 2026-04-15 user: Use pnpm, not npm." in prompt[-1]["content"]
    assert '"memories"' in prompt[0]["content"]


@pytest.mark.parametrize(
    "text",
    ["no json here", '{"memories": [{"lines": [0]}]}', '{"memories": "x"}', "{broken"],
)
def test_malformed_answers_are_rejected(text):
    with pytest.raises(MalformedAnswer):
        parse_extract_answer(text)


async def test_llm_decision_must_target_a_neighbour():
    replies = iter(
        ['{"decision": "supersede", "target": "nope"}', '{"decision": "duplicate", "target": "m1"}']
    )
    server = ChatServer(lambda body: (200, next(replies)))
    near = [Neighbour(id="m1", content="User lives in Budapest", similarity=0.8)]
    with server.running():
        generator = LLMGenerator(OpenAIChat(server.base_url, "m"))
        with pytest.raises(MalformedAnswer):
            await generator.decide("User lives in Vienna", near)
        decision = await generator.decide("User lives in Budapest.", near)
    assert (decision.action, decision.target) == ("duplicate", "m1")


async def test_rules_generator_full_and_detail_passes():
    chunk = chunk_of(
        "Thanks!",
        "We paid $1,200 for the Acme license.",
        "I really love how calm mornings feel here.",
        "Where is the invoice?",
    )
    rules = RulesGenerator()
    full = await rules.extract(chunk)
    detail = await rules.extract(chunk, focus="detail")
    assert [item.lines for item in full] == [[1], [2]]
    assert [item.lines for item in detail] == [[1]]  # only the line with concrete values
    assert detail[0].importance > full[0].importance
    assert all(3 <= len(item.questions) <= 5 for item in full)


def test_make_generator_follows_configuration():
    assert make_generator(ModelSettings()).name == "rules"
    with pytest.raises(ValueError, match="openai_base_url"):
        make_generator(ModelSettings(generator="openai"))
    openai = make_generator(
        ModelSettings(generator="openai", openai_base_url="http://127.0.0.1:9/v1", openai_model="m")
    )
    assert isinstance(openai, LLMGenerator) and openai.name == "openai"
    options = generator_options(ModelSettings())
    assert options["ray_actor_options"]["num_gpus"] == 0
    assert options["autoscaling_config"]["min_replicas"] == 1


def build_tiny_causal_lm(path: Path) -> Path:
    """A randomly initialised 1-layer GPT-2 and a byte-level BPE tokenizer, built offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<eos>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(['user: {"memories": []} assistant: ok'] * 20, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    config = GPT2Config(
        vocab_size=len(fast), n_positions=4096, n_embd=32, n_layer=1, n_head=2,
        bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"))


async def test_transformers_backend_generates_and_its_nonsense_is_malformed(tiny_lm):
    chat = TransformersChat(str(tiny_lm), device="cpu", threads=1)
    texts = chat.complete_batch(
        [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "hello again"}]],
        max_tokens=6,
    )
    assert len(texts) == 2 and all(isinstance(text, str) and text for text in texts)
    generator = LLMGenerator(chat, max_tokens=8)
    with pytest.raises(MalformedAnswer):  # random weights cannot write the JSON asked for
        await generator.extract(chunk_of("Use pnpm, not npm."))


def test_shared_prefix_leaves_every_row_a_token_of_its_own():
    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 9]]) == 2
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2
    assert shared_prefix_length([[5, 1], [6, 1]]) == 0
    assert shared_prefix_length([[1, 2, 3, 4]]) == 3
    assert shared_prefix_length([]) == 0


def twin_chats(tiny_lm: Path) -> tuple[TransformersChat, TransformersChat]:
    """The tiny LM twice, with and without the prompt cache, with the same less uniform weights.

    Random initial weights answer every prompt with the same few tokens; a
    seeded perturbation makes answers depend on the prompt, so a wrong reuse of
    states would show.
    """
    import torch

    cached = TransformersChat(str(tiny_lm), device="cpu", threads=1, prompt_cache_entries=4)
    plain = TransformersChat(str(tiny_lm), device="cpu", threads=1, prompt_cache_entries=0)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for a, b in zip(cached._model.parameters(), plain._model.parameters(), strict=True):
            noise = torch.randn(a.shape, generator=generator) * 0.5
            a.add_(noise)
            b.add_(noise)
    return cached, plain


def test_prompt_cache_answers_as_without_it_and_skips_shared_tokens(tiny_lm):
    cached, plain = twin_chats(tiny_lm)
    chunks = [
        chunk_of("Use pnpm, not npm.", "We deployed v2.3 yesterday."),
        chunk_of("My sister Ana lives in Lisbon and works as a nurse."),
    ]
    batches = [
        [extract_prompt(chunks[0], "full"), extract_prompt(chunks[1], "full")],  # system prompt
        [extract_prompt(chunks[0], "detail")],  # the transcript of the first chunk again
        [extract_prompt(chunks[1], "detail"), extract_prompt(chunks[1], "full")],
    ]
    computed = []
    for batch in batches:
        before = cached.prompt_cache.computed_tokens
        assert cached.complete_batch(batch, max_tokens=6) == plain.complete_batch(
            batch, max_tokens=6
        )
        computed.append(cached.prompt_cache.computed_tokens - before)
    stats = cached.prompt_cache
    assert stats.prompt_tokens == plain.prompt_cache.prompt_tokens
    assert stats.computed_tokens < stats.prompt_tokens / 2
    assert plain.prompt_cache.computed_tokens == plain.prompt_cache.prompt_tokens
    # The detail pass over a chunk whose full pass ran before computes only its task line.
    detail_alone = len(cached._tokenizer(cached._prompt(batches[1][0]))["input_ids"])
    assert computed[1] < detail_alone / 4


def test_prompt_cache_keeps_the_latest_prefixes(tiny_lm):
    import torch

    chat = TransformersChat(str(tiny_lm), device="cpu", threads=1)
    model = chat._model

    def states_of(ids: list[int]):
        with torch.inference_mode():
            return model(input_ids=torch.tensor([ids]), use_cache=True).past_key_values

    cache = PromptCache(entries=2)
    first, second, third = ([n] * 40 for n in (3, 4, 5))
    for ids in (first, second):
        cache.keep(ids, states_of(ids))
    assert cache.lookup([*first, 9])[0] == 40
    cache.keep(third, states_of(third))  # the least recently used one, second, goes
    assert cache.lookup([*second, 9]) == (0, None)
    longer = first + [6] * 20
    cache.keep(longer, states_of(longer))  # holds all of first: first's entry goes
    assert len(cache) == 2
    length, states = cache.lookup([*first, 7, 7, 7, 7, 7])
    assert length == 40 and states.get_seq_length() == 40  # cut to what is shared
    assert cache.lookup([3] * 10) == (0, None)  # too short a match to be worth it


@pytest.fixture
def private_ray():
    """A private local Ray for one Serve test (reused if the session already started one)."""
    import ray
    from ray import serve

    started = not ray.is_initialized()
    if started:
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=100 * 2**20,
            log_to_driver=False,
        )
    yield serve
    serve.delete("raymem-generator-test")
    if started:
        serve.shutdown()
        ray.shutdown()


def test_generator_pool_serves_batched_completions(tiny_lm, private_ray):
    serve = private_ray
    models = ModelSettings(
        generator="transformers", generator_model=str(tiny_lm), generator_threads=1
    )
    app = GeneratorPool.options(**generator_options(models)).bind(models)
    handle = serve.run(app, name="raymem-generator-test", route_prefix=None)
    generator = pool_generator(handle, models)

    async def ask_all() -> list[str]:
        prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(3)]
        answers = await asyncio.gather(
            *(generator._chat.complete(p, max_tokens=4) for p in prompts)
        )
        with pytest.raises(MalformedAnswer):
            await generator.extract(chunk_of("Use pnpm, not npm."))
        return answers

    answers = asyncio.run(ask_all())
    assert len(answers) == 3 and all(isinstance(a, str) and a for a in answers)


def test_rules_never_call_texts_with_different_values_duplicates():
    from raymem.pipelines.generators import decide_by_rules

    near = [
        Neighbour(id="m1", content="Locker number 14 is mine.", similarity=0.97, topic_key=None)
    ]
    assert decide_by_rules("Locker number 15 is mine.", near).action == "add"
    assert decide_by_rules("Locker number 14 is mine!", near).action == "duplicate"


def test_generator_pool_keeps_a_profile_on_one_replica(tiny_lm, private_ray):
    serve = private_ray
    models = ModelSettings(
        generator="transformers",
        generator_model=str(tiny_lm),
        generator_threads=1,
        generator_min_replicas=2,
        generator_max_replicas=2,
    )
    options = generator_options(models)
    options["ray_actor_options"]["num_cpus"] = 0  # two replicas beside the session's apps
    app = GeneratorPool.options(**options).bind(models)
    handle = serve.run(app, name="raymem-generator-test", route_prefix=None)
    chat = TransformersChat(str(tiny_lm), device="cpu", threads=1)
    chats = [extract_prompt(chunk_of(f"Line {i} says something new."), "full") for i in range(6)]
    sent = sum(len(chat._tokenizer(chat._prompt(c))["input_ids"]) for c in chats)
    generator = pool_generator(handle, models, profile="acme/alice")
    stats_of_alice = handle.options(multiplexed_model_id="acme/alice").prompt_cache_stats

    async def ask() -> tuple[dict, dict]:
        await generator._chat.complete(chats[0], max_tokens=2)  # alice gets a replica
        await asyncio.sleep(2)  # the replica reports what it holds to the routers
        before = await stats_of_alice.remote()
        for messages in chats[1:]:
            await generator._chat.complete(messages, max_tokens=2)
        return before, await stats_of_alice.remote()

    before, after = asyncio.run(ask())
    assert before["replica"] == after["replica"]
    first = len(chat._tokenizer(chat._prompt(chats[0]))["input_ids"])
    # Every later call landed on alice's replica, and most of each prompt came from its cache.
    assert after["prompt_tokens"] - before["prompt_tokens"] == sent - first
    assert after["computed_tokens"] - before["computed_tokens"] < (sent - first) / 2
