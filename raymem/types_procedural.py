"""The wire schema of procedural memory: actions, sequences, patterns, metrics and skills.

Inbound bodies forbid unknown fields; a stored row is returned as the Struct of
its table (every column but the row's seq), so what a client reads is what the
profile's file holds.
"""

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from raymem.types import Name, Request, Schema

Outcome = Literal["success", "failure", "dead_end"]
FailureOutcome = Literal["failure", "dead_end"]
Aggregation = Literal["rate", "average", "p95"]
MetricValue = Literal["action_count", "duration_ms"]
SkillStatus = Literal["active", "candidate", "discarded"]

# Action and target types and error codes are an agent's own vocabulary (tool names,
# exception names): any printable text, short enough to read in a list.
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
TargetId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
ShortText = Annotated[str, msgspec.Meta(max_length=500)]  # an intent, a recommendation
LongText = Annotated[str, msgspec.Meta(min_length=1, max_length=4_000)]  # a skill's text
WindowDays = Annotated[float, msgspec.Meta(gt=0, le=3_650)]

#: Target ids one action may name, and steps or inputs one skill may hold.
MAX_TARGET_IDS = 64
MAX_SKILL_ITEMS = 50

# ------------------------------------------------------------------ actions


class ActionIn(Request, kw_only=True):
    """One action as an agent reports it; ``at`` defaults to when it is stored."""

    session_id: Name
    action_type: Label
    target_type: Label
    outcome: Outcome
    target_ids: Annotated[list[TargetId], msgspec.Meta(max_length=MAX_TARGET_IDS)] = msgspec.field(
        default_factory=list
    )
    error_code: Label | None = None
    duration_ms: Annotated[float, msgspec.Meta(ge=0)] | None = None
    intent: ShortText = ""
    at: datetime | None = None
    id: Name | None = None  # None: derived from the content, so a resend is a duplicate
    agent_id: Name | None = None


class CaptureRequest(Request, kw_only=True):
    actions: Annotated[list[ActionIn], msgspec.Meta(min_length=1)]


class CaptureResult(Schema, kw_only=True):
    stored: int
    duplicates: int
    ignored: int = 0  # procedural memory is disabled: nothing was stored
    ids: list[str] = msgspec.field(default_factory=list)  # every action's id, in the order sent


class Action(Schema, kw_only=True):
    id: str
    session_id: str
    agent_id: str | None
    action_type: str
    target_type: str
    target_ids: list[str]
    outcome: Outcome
    error_code: str | None
    duration_ms: float | None
    intent: str
    at: datetime
    captured_at: datetime
    sequence_id: str | None


class ActionPage(Schema, kw_only=True):
    actions: list[Action]
    next_cursor: str | None = None


# ---------------------------------------------------------------- sequences


class StepFailure(Schema, kw_only=True):
    outcome: FailureOutcome
    error_code: str | None
    at: datetime  # the first time it went this way in the sequence
    target_ids: list[str] = msgspec.field(default_factory=list)


class Step(Schema, kw_only=True):
    """What one (action type, target type) met within a sequence."""

    action_type: str
    target_type: str
    attempts: int
    successes: int
    failures: list[StepFailure] = msgspec.field(
        default_factory=list
    )  # each distinct way it went wrong
    # Action types that ran with success on the same target before an attempt:
    # action type -> [attempts after it, successes among them].
    after: dict[str, tuple[int, int]] = msgspec.field(default_factory=dict)


class ActionSequence(Schema, kw_only=True):
    id: str
    session_id: str
    agent_id: str | None
    started_at: datetime
    ended_at: datetime
    closed_at: datetime
    closed_by: Literal["quiet", "session_end"]
    outcome: Outcome
    action_count: int
    failure_count: int
    duration_ms: float
    intent: str
    summarised_by: str
    steps: list[Step]
    warned: list[str]
    avoided: bool | None


class SequencePage(Schema, kw_only=True):
    sequences: list[ActionSequence]
    next_cursor: str | None = None


# ----------------------------------------------------------------- patterns


class Pattern(Schema, kw_only=True):
    id: str
    action_type: str
    target_type: str
    error_code: str | None
    outcome: FailureOutcome
    confidence: float
    samples: int
    hits: int
    precondition: str | None
    target_ids: list[str]
    recommendation: str
    first_seen: datetime
    last_seen: datetime
    reinforced_at: datetime
    decay_steps: int
    evidence_through: datetime
    created_at: datetime
    updated_at: datetime
    superseded_by: str | None
    deleted_at: datetime | None
    suppressed: bool
    annotation: str | None


class PatternList(Schema, kw_only=True):
    patterns: list[Pattern]


class PatternWithHistory(Pattern, kw_only=True):
    history: list[Pattern] = msgspec.field(
        default_factory=list
    )  # the supersession chain, oldest first, this one included


class AnnotateRequest(Request, kw_only=True):
    """Absent fields stay as they are; a null or empty annotation removes it."""

    annotation: ShortText | msgspec.UnsetType | None = msgspec.UNSET
    suppressed: bool | msgspec.UnsetType = msgspec.UNSET


class InjectRequest(Request, kw_only=True):
    """The action an agent is about to take; with a session, the injection is recorded."""

    action_type: Label
    target_type: Label
    target_ids: Annotated[list[TargetId], msgspec.Meta(max_length=MAX_TARGET_IDS)] = msgspec.field(
        default_factory=list
    )
    session_id: Name | None = None
    agent_id: Name | None = None


class Injection(Schema, kw_only=True):
    text: str  # the "past experience" block; empty when nothing applies
    patterns: list[Pattern]


# ------------------------------------------------------------------- state


class ProceduralToggle(Request, kw_only=True):
    enabled: bool


class ProceduralCounts(Schema, kw_only=True):
    actions: int
    open_actions: int  # not yet in a sequence
    sequences: int
    patterns: int  # current ones
    skills: int  # active ones


class ProceduralState(Schema, kw_only=True):
    enabled: bool
    updated_at: datetime | None
    counts: ProceduralCounts


class EvaluateRequest(Request, kw_only=True):
    now: datetime | None = None  # the clock the passes use (tests, replays); default: now


class PatternChanges(Schema, kw_only=True):
    promoted: int = 0
    reinforced: int = 0
    superseded: int = 0
    decayed: int = 0
    deleted: int = 0


class EvaluateResult(Schema, kw_only=True):
    now: datetime
    sequences_closed: int
    patterns: PatternChanges
    benchmarks: int  # metric rows written
    skills_proposed: int
    latency_ms: dict[str, float] = msgspec.field(default_factory=dict)


# ------------------------------------------------------------------ metrics


class EventFilter(Request, kw_only=True):
    """Which sequences a metric measures: those with an action of these types (empty: any)."""

    action_types: list[Label] = msgspec.field(default_factory=list)
    target_types: list[Label] = msgspec.field(default_factory=list)


class MetricIn(Request, kw_only=True):
    """A custom metric. ``success_condition`` uses the grammar of ``pipelines.procedural.condition``.

    ``rate`` is the share of measured sequences that meet the condition; ``average``
    and ``p95`` aggregate ``value`` over those that meet it (all, when it is empty).
    """

    id: Name
    aggregation: Aggregation
    success_condition: Annotated[str, msgspec.Meta(max_length=500)] = ""
    event_filter: EventFilter = msgspec.field(default_factory=EventFilter)
    value: MetricValue = "action_count"
    window_days: WindowDays = 7.0
    description: ShortText = ""
    active: bool = True


class MetricUpdate(Request, kw_only=True):
    active: bool


class Metric(Schema, kw_only=True):
    id: str
    builtin: bool  # built-ins are deactivated, never deleted
    active: bool
    description: str
    action_types: list[str]
    target_types: list[str]
    success_condition: str
    aggregation: Aggregation
    value: MetricValue
    window_days: float
    baseline: float | None
    baseline_samples: int
    created_at: datetime
    updated_at: datetime


class MetricList(Schema, kw_only=True):
    metrics: list[Metric]


class MetricValueAt(Schema, kw_only=True):
    """A metric's value over a window; one benchmark row when the metric pass stores it."""

    metric_id: str
    at: datetime  # the end of the window
    value: float | None  # None: no sequence to measure
    samples: int
    baseline: float | None
    delta_vs_baseline: float | None


class MetricBenchmark(Schema, kw_only=True):
    metric: Metric
    rows: list[MetricValueAt]  # oldest first


class MetricWindow(Request, kw_only=True):
    metric_id: Name
    start: datetime
    end: datetime


class CompareRequest(Request, kw_only=True):
    """Two metrics over one window, or one metric over two windows."""

    a: MetricWindow
    b: MetricWindow


class Measured(Schema, kw_only=True):
    metric_id: str
    start: datetime
    end: datetime
    value: float | None
    samples: int


class MetricComparison(Schema, kw_only=True):
    a: Measured
    b: Measured
    difference: float | None  # b - a


# ------------------------------------------------------------------- skills


class SkillInput(Request, kw_only=True):
    name: Label
    description: ShortText = ""


class SkillIn(Request, kw_only=True):
    name: Label
    when_to_use: LongText
    steps: Annotated[list[LongText], msgspec.Meta(min_length=1, max_length=MAX_SKILL_ITEMS)]
    inputs: Annotated[list[SkillInput], msgspec.Meta(max_length=MAX_SKILL_ITEMS)] = msgspec.field(
        default_factory=list
    )


class Skill(Schema, kw_only=True):
    id: str
    name: str
    when_to_use: str
    steps: list[str]
    inputs: list[SkillInput]
    status: SkillStatus
    source: Literal["operator", "proposed"]
    source_intent: str | None
    evidence: dict[str, float]
    created_at: datetime
    updated_at: datetime


class SkillHit(Skill, kw_only=True):
    score: float = 0.0


class SkillList(Schema, kw_only=True):
    skills: list[SkillHit]
