"""Prometheus metrics, recorded through ``ray.util.metrics``.

Ray's metrics agent on every node serves what the processes of that node record,
at ``http://<node>:<server.metrics_port>/metrics``, each name prefixed ``ray_``
(``raymem_requests_total`` is scraped as ``ray_raymem_requests_total``). A process
without a running Ray (a CLI, a test of the store) records nothing: every metric
here is a no-op there, so modules that must not depend on Ray (``export``,
``models``) may record too. Ray is imported only where it is already loaded.

Labels stay few and bounded: route templates, never paths; never a profile name.
"""

import sys
from collections.abc import Mapping, Sequence
from typing import Any

# Milliseconds: a cached read (about 1 ms) to a slow model answer (tens of seconds).
LATENCY_MS_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000]
# Texts per embedder call: up to models.embedder_batch_size (default 64), and beyond.
BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]

RAY_PREFIX = "ray_"  # what Ray's exporter puts before every name


def _ray_metrics() -> Any:
    """``ray.util.metrics`` when this process runs in (or drives) a Ray cluster, else None."""
    if "ray" not in sys.modules:
        return None
    import ray

    if not ray.is_initialized():
        return None
    from ray.util import metrics

    return metrics


class _Metric:
    """One named series, made in Ray the first time it is recorded in a process."""

    def __init__(self, name: str, description: str, tags: Sequence[str] = ()) -> None:
        self.name, self.description, self.tags = name, description, tuple(tags)
        self._made: Any = None

    def _make(self, metrics: Any) -> Any:
        raise NotImplementedError

    def _ray(self) -> Any:
        if self._made is None:
            metrics = _ray_metrics()
            if metrics is not None:
                self._made = self._make(metrics)
        return self._made

    def _tags(self, tags: Mapping[str, str]) -> dict[str, str] | None:
        if set(tags) != set(self.tags):
            raise ValueError(f"{self.name} takes the labels {self.tags}, not {tuple(tags)}")
        return dict(tags) or None


class Counter(_Metric):
    def _make(self, metrics: Any) -> Any:
        return metrics.Counter(self.name, description=self.description, tag_keys=self.tags)

    def inc(self, value: float = 1.0, /, **tags: str) -> None:
        checked = self._tags(tags)
        if value > 0 and (made := self._ray()) is not None:
            made.inc(value, tags=checked)


class Gauge(_Metric):
    def _make(self, metrics: Any) -> Any:
        return metrics.Gauge(self.name, description=self.description, tag_keys=self.tags)

    def set(self, value: float, /, **tags: str) -> None:
        checked = self._tags(tags)
        if (made := self._ray()) is not None:
            made.set(value, tags=checked)


class Histogram(_Metric):
    def __init__(
        self, name: str, description: str, boundaries: Sequence[float], tags: Sequence[str] = ()
    ) -> None:
        super().__init__(name, description, tags)
        self.boundaries = [float(b) for b in boundaries]

    def _make(self, metrics: Any) -> Any:
        return metrics.Histogram(
            self.name, description=self.description, boundaries=self.boundaries, tag_keys=self.tags
        )

    def observe(self, value: float, /, **tags: str) -> None:
        checked = self._tags(tags)
        if (made := self._ray()) is not None:
            made.observe(value, tags=checked)


REQUESTS = Counter("raymem_requests_total", "HTTP requests answered", ("route", "method", "status"))
REQUEST_LATENCY = Histogram(
    "raymem_request_latency_ms",
    "Time to answer an HTTP request, in the ingress",
    LATENCY_MS_BUCKETS,
    ("route", "method", "status"),
)
STAGE_LATENCY = Histogram(
    "raymem_stage_latency_ms",
    "Time spent in each stage of recall, ingest and session consolidation",
    LATENCY_MS_BUCKETS,
    ("pipeline", "stage"),
)
MEMORIES_ADDED = Counter("raymem_memories_added_total", "Memories written", ("source",))
ACTIVATIONS = Counter("raymem_activations_total", "Profiles opened (activated)")
ACTIVATION_LATENCY = Histogram(
    "raymem_activation_latency_ms", "Time to open a profile's store", LATENCY_MS_BUCKETS
)
HIBERNATIONS = Counter("raymem_hibernations_total", "Profiles closed after idling or eviction")
PROFILES = Gauge("raymem_profiles", "Known profiles, live or hibernating", ("state",))
EMBEDDER_QUEUE = Gauge(
    "raymem_embedder_queue_depth", "Embedding requests waiting, per queue", ("queue",)
)
EMBEDDER_BATCH = Histogram(
    "raymem_embedder_batch_size", "Texts per embedding model call", BATCH_SIZE_BUCKETS
)
OBJECT_STORE_RETRIES = Counter(
    "raymem_object_store_retries_total", "Object store calls retried after a transient failure"
)

ALL: list[_Metric] = [
    REQUESTS,
    REQUEST_LATENCY,
    STAGE_LATENCY,
    MEMORIES_ADDED,
    ACTIVATIONS,
    ACTIVATION_LATENCY,
    HIBERNATIONS,
    PROFILES,
    EMBEDDER_QUEUE,
    EMBEDDER_BATCH,
    OBJECT_STORE_RETRIES,
]


def record_stages(pipeline: str, latency_ms: Mapping[str, float]) -> None:
    """Each stage's milliseconds, as a pipeline reports them in its result's ``latency_ms``."""
    for stage, milliseconds in latency_ms.items():
        STAGE_LATENCY.observe(milliseconds, pipeline=pipeline, stage=stage)
