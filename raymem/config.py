"""Settings: built-in defaults < a TOML file < ``RAYMEM_*`` environment variables.

Read once by the process that starts the service and passed explicitly to
everything else (the Serve app, profile actors, model pools); nothing reads
the environment at import time.
"""

import hashlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from raymem.types import NAME_PATTERN


class Section(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """A block of the TOML file; unknown keys are a configuration error."""


class ServerSettings(Section, frozen=True):
    host: str = "127.0.0.1"
    port: int = 8000
    # Ray's Prometheus endpoint on each node started by `raymem serve`: /metrics here.
    metrics_port: int = 8080
    ingress_replicas: int = 1
    max_concurrent_per_key: int = 64  # 429 beyond this many requests in flight per key


class ApiKey(Section, frozen=True):
    tenant: Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]  # a directory name
    key_sha256: str
    profiles: list[str] = msgspec.field(default_factory=lambda: ["*"])
    read_only: bool = False


class AuthSettings(Section, frozen=True):
    keys: list[ApiKey] = []


class ObjectStoreSettings(Section, frozen=True):
    bucket: str = ""
    prefix: str = "raymem"
    endpoint_url: str = ""
    region: str = ""
    # Empty: the usual AWS sources (environment, shared files, instance roles).
    access_key_id: str = ""
    secret_access_key: str = ""


class DurabilitySettings(Section, frozen=True):
    mode: Literal["local", "shipped", "replicated"] = "shipped"
    snapshot_interval_s: float = 300.0
    snapshot_retention: int = 3  # snapshots kept per profile
    ship_interval_s: float = 1.0  # shipped mode: ledger uploaded within about this long


class ProfileSettings(Section, frozen=True):
    idle_timeout_s: float = 600.0
    # Open profiles per node, shared by its hosts; 0: as many as memory_fraction of the
    # node's memory holds at open_profile_mb each, after what the node used at start.
    max_live: int = 0
    memory_fraction: float = 0.8
    open_profile_mb: float = 4.0  # an open small profile (measured: benchmarks/scale.py)
    # Memory in use on the node (all processes, as Ray's memory monitor counts it, which
    # kills at 0.95) beyond which hosts hibernate their least recently used profiles.
    pressure_fraction: float = 0.85
    # Profile hosts per node: each is one process (one core's worth of recall) holding
    # many open profiles. 0: one per CPU Ray counts on the node.
    hosts_per_node: int = 0
    # Hosts on demand (for an autoscaling cluster): 0 keeps the hosts per node above. N > 0:
    # between min_hosts and N hosts, each requesting one raymem_profile_hosts resource
    # wherever Ray places it; one more is started when every host is full (a new node when
    # the cluster has no room: the autoscaler's cue), and a host beyond min_hosts that has
    # held no profile for host_idle_s exits, so an idle node can be removed.
    max_hosts: int = 0
    min_hosts: int = 1
    host_idle_s: float = 300.0
    # A host whose event loop does not answer a ping this long is busy: it keeps its
    # open profiles (never two writers) but gets no new ones until it answers again.
    host_answer_timeout_s: float = 10.0
    retention_days: float = 90.0  # raw turns older than this are purged; 0 keeps them forever
    retention_check_s: float = 3600.0


class ModelSettings(Section, frozen=True):
    embedder: str = "sentence-transformers/all-MiniLM-L6-v2"
    generator: Literal["rules", "openai", "transformers"] = "rules"
    num_gpus: float = 0.0  # per model replica; 0 on a CPU machine
    embedder_replicas: int = 1
    embedder_threads: int = 0  # model threads per embedder replica; 0: half the cores
    embedder_batch_size: int = 64  # texts per forward pass
    embedder_background_chunk: int = 16  # texts per model call for background vectorising
    # Background vectorising waits until no query or ingest has asked for vectors for
    # embedder_background_after_s, so the cores go to the requests being answered; a
    # burst holds it back embedder_background_max_delay_s at most.
    embedder_background_after_s: float = 0.25
    embedder_background_max_delay_s: float = 60.0
    # A call to the embedder pool with no answer this long is sent once more through a
    # new handle, then fails with 503 model_unavailable: no request waits forever on a
    # pool. A background call may wait embedder_background_max_delay_s longer.
    embedder_timeout_s: float = 30.0
    # auto: float16 on a GPU, bfloat16 on a CPU with native bfloat16 (AMX, AVX512-BF16;
    # 3-4x float32, cosine to float32 > 0.999), else float32. int8: dynamic int8 on
    # CPU (about 1.4x, cosine about 0.985). The store records the precision in the
    # embedder name, since vectors made at different precisions differ slightly.
    embedder_precision: Literal["auto", "float32", "bfloat16", "float16", "int8"] = "auto"
    embedder_max_seq_length: int = 0  # tokens embedded per text; 0: the model's own (256)
    # auto: ONNX Runtime where torch would run float32 on a CPU (the same vectors; one
    # query in a third of the time, short texts up to 1.4x the texts/s), torch elsewhere.
    embedder_backend: Literal["auto", "torch", "onnx"] = "auto"
    embedder_cache_dir: str = ""  # ONNX exports; empty: ~/.cache/raymem/onnx
    openai_base_url: str = ""
    openai_model: str = ""
    openai_api_key_env: str = "OPENAI_API_KEY"  # the variable that holds the key, not the key
    openai_json_mode: bool = True
    generator_model: str = ""  # transformers: a hub id or a local directory
    generator_timeout_s: float = 60.0
    generator_attempts: int = 3
    generator_max_tokens: int = 1024
    generator_threads: int = 0
    generator_min_replicas: int = 1
    generator_max_replicas: int = 1
    generator_target_ongoing_requests: int = 4
    # transformers: prompt prefixes whose key/value states a replica keeps for reuse;
    # with more than 0, a profile's calls go to one replica (Serve model multiplexing).
    generator_prompt_cache_entries: int = 8
    # Compare new memories with their nearest stored neighbours by embedding before
    # writing them (near-duplicates, paraphrased updates), and tell events from facts
    # by embedding where no pattern does. Off: only exact duplicates and topic keys
    # reconcile, patterns alone give types, and ingest skips an embedding round trip.
    reconcile_by_similarity: bool = True


class LimitSettings(Section, frozen=True):
    max_body_bytes: int = 16 * 2**20
    max_content_chars: int = 100_000
    max_messages_per_ingest: int = 1_000
    max_query_chars: int = 2_000
    max_limit: int = 100
    max_import_bytes: int = 256 * 2**20


class RecallSettings(Section, frozen=True):
    """Weights of the channels in reciprocal rank fusion; topic keys highest.

    The defaults were chosen on LoCoMo and a LongMemEval sample (benchmarks/):
    a small ``rrf_k`` lets a channel's first hits count far more than its tail,
    and raw turns weigh as much as memories because they are the evidence.
    After fusion, found turns near other found turns of their session are lifted
    (``context_*``), and so are turns said by the person the query names
    (``speaker_share``).
    """

    rrf_k: float = 5.0
    topic_key_weight: float = 2.0
    memory_fts_weight: float = 1.0
    memory_vector_weight: float = 1.0
    message_fts_weight: float = 1.0
    message_vector_weight: float = 1.0
    message_time_weight: float = 0.6  # turns inside a date range the query names
    memory_time_weight: float = 0.6  # events and tasks dated inside a range the query names
    # The rules-written HyDE statement lowered recall at every weight tried, so it is
    # off: 0 skips its embedding and searches. A model-written one may earn a weight.
    hyde_memory_vector_weight: float = 0.0
    hyde_message_vector_weight: float = 0.0
    model_hyde_weight: float = 0.5  # a model-written HyDE statement, when a model is configured
    model_timeout_s: float = 5.0  # a model stage of recall slower than this falls back to rules
    neighbour_top: int = 3  # the strongest turns whose neighbours join the result
    neighbour_window: int = 2  # how many turns either side of a strong turn join it
    neighbour_share: float = 0.35  # a neighbour's score, as a share of its strong turn's
    reply_share: float = 0.6  # the turn after a question: its likely answer
    context_window: int = 2  # found turns this close in a session lift each other
    context_share: float = 0.3
    speaker_share: float = 0.5  # a turn said by the person the query names: lifted by this share
    recent_share: float = 0.3  # "now", "latest": the newest evidence found is lifted by this share
    candidates_per_channel: int = 50
    # Rows acknowledged but not yet embedded (an ingest's turns get their vectors in
    # the background) that a recall embeds first, newest first, with the query: what
    # was just written is found by the vector channels too. 0: leave them to FTS.
    catch_up_vectors: int = 64
    # A full-text channel leaves out the query's commonest terms once the rows they
    # match add up to more than this: such terms barely move BM25, yet they cost a
    # score per matching row (70 ms at 100K rows for two words found in every row).
    fts_postings_budget: int = 5000
    # Episodes (records of finished work), by full text and by vector: each of the two
    # channels weighs as much as a memory channel.
    episode_weight: float = 1.0
    # A prior from what a memory is, applied after fusion (pipelines/prior.py): a memory's
    # score is scaled by 1 + the sum of weight * (signal - 0.5) over its importance,
    # confidence, recency (halving every prior_half_life_days since it was said or last
    # recalled) and use (recalls, on a log scale up to prior_use_saturation). 0 turns a
    # signal off; see benchmarks/dream.py and the README for what each measured.
    prior_importance_weight: float = 0.0
    prior_confidence_weight: float = 0.0
    prior_recency_weight: float = 0.0
    prior_use_weight: float = 0.0
    prior_half_life_days: float = 180.0
    prior_use_saturation: int = 20


class ContextSettings(Section, frozen=True):
    """The agent's context: core blocks, working memory, episodes and context assembly.

    The default blocks ``user`` and ``project`` exist in every profile with these
    limits (characters of the rendered block) until a caller sets another. Context
    assembly gives the slow-changing sections (core, working memory) at most their
    share of the budget, computed from the budget alone so that their text, the
    prefix a prompt cache keys on, does not move with the query; what they leave
    goes to memories, episodes and recent turns, by their shares first and then in
    that order.
    """

    user_block_limit: int = 1_375
    project_block_limit: int = 2_200
    max_block_limit: int = 20_000  # the largest limit a caller may set on a block
    max_blocks: int = 32  # blocks per profile, the defaults included
    default_budget_chars: int = 8_000
    max_budget_chars: int = 200_000
    # Budgets in tokens are converted with this many characters per token: a
    # tokenizer-free estimate (English prose runs at about 4 with common tokenizers).
    chars_per_token: float = 4.0
    core_share: float = 0.5
    working_memory_share: float = 0.25
    memories_share: float = 0.5  # of what core and working memory leave
    episodes_share: float = 0.2
    recent_turns_share: float = 0.3
    memories: int = 20  # recall hits considered for the memories section
    # Candidates per recall channel when assembling (recall's own: 50; never fewer than
    # the hits asked for, memories + episodes). Recall here runs without model stages
    # and with these smaller pools: on the LongMemEval sample every question kept its
    # outcome, and at 100K memories its fusion took half the time (9 ms p50, from 15-20)
    # and its CPU time fell from 18 to 12-15 ms p50 (benchmarks/context.py, docs/).
    recall_candidates: int = 25
    episodes: int = 5  # episodes considered for the episodes section
    recent_turns: int = 12  # a session's latest turns considered for the last section
    working_memory_tasks: int = 20  # the newest current tasks shown in working memory
    working_memory_instructions: int = 20  # the newest current instructions shown
    episode_summary_chars: int = 600  # a rules-built episode's summary, at most


class DreamSettings(Section, frozen=True):
    """Dreaming: re-organising a whole profile into a candidate (pipelines/dream).

    Similarities are cosines between memory vectors; see benchmarks/dream.py for
    what the gates measured on LoCoMo.
    """

    merge_similarity: float = 0.9  # at least this similar, same values: one statement
    contradiction_similarity: float = 0.85  # this similar, other values: the newest holds
    max_sessions: int = 100  # the most recent sessions a dream reads: default and bound
    # Decay: a memory's strength is its importance halving every stale_half_life_days
    # since raymem learned it or last recalled it; below stale_below a dream retires it.
    # With the defaults a memory of importance 0.5 retires after about 300 idle days.
    stale_half_life_days: float = 90.0
    stale_below: float = 0.05
    # A statement that names no one and no value ("That sounds amazing!") says
    # nothing about anyone: a dream retires it (its turn still answers recall).
    retire_no_fact: bool = True
    model_prompt_chars: int = 24_000  # memories a model reads for insights, at most
    max_insights: int = 10


class ProceduralSettings(Section, frozen=True):
    """Procedural memory's passes (see ``raymem.pipelines.procedural``).

    Sequences and patterns are evaluated every ``evaluate_interval_s`` while a profile
    is live (and when it wakes); metrics and skill proposals once ``metrics_interval_s``
    has passed since they last ran, so a profile that sleeps overnight catches up
    when it wakes.
    """

    quiet_after_s: float = 300.0  # a session's actions form a sequence once it is this quiet
    evaluate_interval_s: float = 900.0
    metrics_interval_s: float = 86_400.0
    pattern_window_days: float = 30.0  # patterns are measured over sequences this recent
    max_actions_per_request: int = 1_000


class Settings(Section, frozen=True):
    data_dir: str = "./raymem-data"
    app_name: str = "raymem"
    namespace: str = "raymem"
    server: ServerSettings = ServerSettings()
    auth: AuthSettings = AuthSettings()
    object_store: ObjectStoreSettings = ObjectStoreSettings()
    durability: DurabilitySettings = DurabilitySettings()
    profiles: ProfileSettings = ProfileSettings()
    models: ModelSettings = ModelSettings()
    limits: LimitSettings = LimitSettings()
    recall: RecallSettings = RecallSettings()
    context: ContextSettings = ContextSettings()
    dreams: DreamSettings = DreamSettings()
    procedural: ProceduralSettings = ProceduralSettings()


class ConfigError(ValueError):
    """The TOML file or an environment variable does not describe valid settings."""


def hash_key(key: str) -> str:
    """The SHA-256 of an API key, as stored in configuration."""
    return hashlib.sha256(key.encode()).hexdigest()


def parse_api_keys(value: str) -> list[dict[str, Any]]:
    """Parse ``RAYMEM_API_KEYS="alice=KEY1,bob=KEY2"`` into hashed key entries."""
    keys = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        tenant, sep, key = item.partition("=")
        if not sep or not tenant.strip() or not key.strip():
            raise ConfigError(f"RAYMEM_API_KEYS entry {item!r} is not of the form tenant=key")
        keys.append({"tenant": tenant.strip(), "key_sha256": hash_key(key.strip())})
    return keys


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Collect ``RAYMEM_<SECTION>_<KEY>`` and ``RAYMEM_<KEY>`` into a nested dict of strings."""
    overrides: dict[str, Any] = {}
    sections = {
        name: field.type
        for name, field in ((f.name, f) for f in msgspec.structs.fields(Settings))
        if isinstance(field.type, type) and issubclass(field.type, Section)
    }
    if "RAYMEM_API_KEYS" in environ:
        overrides["auth"] = {"keys": parse_api_keys(environ["RAYMEM_API_KEYS"])}
    for field in msgspec.structs.fields(Settings):
        if field.name in sections:
            for sub in msgspec.structs.fields(sections[field.name]):
                env_name = f"RAYMEM_{field.name}_{sub.name}".upper()
                if env_name in environ and sub.name != "keys":
                    overrides.setdefault(field.name, {})[sub.name] = environ[env_name]
        else:
            env_name = f"RAYMEM_{field.name}".upper()
            if env_name in environ:
                overrides[field.name] = environ[env_name]
    return overrides


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_settings(
    config_path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Build the settings from defaults, the TOML file and the environment.

    Args:
        config_path: a TOML file; when None, ``RAYMEM_CONFIG`` names one if set.
        environ: the environment to read (``os.environ`` by default).

    Raises:
        ConfigError: the file is missing or malformed, or a value has the wrong type.
    """
    environ = os.environ if environ is None else environ
    config_path = config_path or environ.get("RAYMEM_CONFIG") or None
    data: dict[str, Any] = {}
    if config_path is not None:
        try:
            data = tomllib.loads(Path(config_path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(
                f"Cannot read configuration file {str(config_path)!r}: {exc}"
            ) from exc
    data = _merge(data, _env_overrides(environ))
    try:
        # strict=False lets environment strings become ints, floats and booleans.
        settings = msgspec.convert(data, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"Invalid configuration: {exc}") from exc
    hashes = [key.key_sha256.lower() for key in settings.auth.keys]
    if len(hashes) != len(set(hashes)):
        raise ConfigError("Invalid configuration: the same API key is given to more than one entry")
    # Actors run with another working directory: pin the data directory now.
    return msgspec.structs.replace(settings, data_dir=str(Path(settings.data_dir).resolve()))
