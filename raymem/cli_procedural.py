"""``raymem procedural …``: procedural memory of a profile on a running server.

Every command takes ``--profile``, ``--url`` and ``--token``, prints a readable table
(or JSON with ``--json``), and exits 0 on success, 1 on a server or connection
error, 2 on a usage error.
"""

import contextlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from raymem.cli_common import client_options, echo_json, open_client, server_errors
from raymem.client_procedural import ProceduralClient
from raymem.types_procedural import ActionPage, PatternList, SkillList

CAPTURE_BATCH = 500  # actions per request, inside the server's default limit of 1,000
OUTCOMES = click.Choice(["success", "failure", "dead_end"])
WHEN = click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"])


def _options(command: Any) -> Any:
    command = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(
        command
    )
    command = click.option("--profile", "-p", required=True, help="Profile name.")(command)
    return client_options(command)


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


@contextlib.contextmanager
def _procedural(url: str, token: str | None, profile: str) -> Iterator[ProceduralClient]:
    """The profile's procedural memory, with server errors turned into CLI errors."""
    with open_client(url, token) as client, server_errors():
        yield client.get_profile(profile).procedural


@click.group()
def procedural() -> None:
    """Procedural memory: what agents did, the patterns learned, metrics and skills."""


@procedural.command()
@_options
def status(profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Whether procedural memory is on for PROFILE, and what it holds."""
    with _procedural(url, token, profile) as memory:
        state = memory.state()
    if as_json:
        echo_json(state)
        return
    counts = state.counts
    click.echo(
        f"procedural memory {'on' if state.enabled else 'off'} (since {_when(state.updated_at)}):"
        f" {counts.actions} actions ({counts.open_actions} open), {counts.sequences} sequences,"
        f" {counts.patterns} patterns, {counts.skills} skills"
    )


@procedural.command()
@_options
def enable(profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Turn procedural memory on for PROFILE."""
    with _procedural(url, token, profile) as memory:
        state = memory.enable()
    if as_json:
        echo_json(state)
    else:
        click.echo(f"procedural memory on for {profile}")


@procedural.command()
@_options
def disable(profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Stop capture and injection for PROFILE (everything stays readable)."""
    with _procedural(url, token, profile) as memory:
        state = memory.disable()
    if as_json:
        echo_json(state)
    else:
        click.echo(f"procedural memory off for {profile}")


def read_actions(path: Path) -> list[dict[str, Any]]:
    """Actions from a JSON list, a JSON object with ``actions``, or JSON Lines."""
    text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"{path} is neither JSON nor JSON Lines: {exc}") from None
    if isinstance(data, dict):
        data = data.get("actions")
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise click.ClickException(
            f'{path} must hold a list of actions like {{"session_id": "s1", "action_type": …}}'
        )
    return data


@procedural.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_options
def capture(file: Path, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Store the actions in FILE (JSON or JSON Lines), in batches."""
    actions = read_actions(file)
    totals = {"stored": 0, "duplicates": 0, "ignored": 0}
    with _procedural(url, token, profile) as memory:
        for start in range(0, len(actions), CAPTURE_BATCH):
            result = memory.capture(actions[start : start + CAPTURE_BATCH])
            totals["stored"] += result.stored
            totals["duplicates"] += result.duplicates
            totals["ignored"] += result.ignored
    if as_json:
        echo_json(totals)
        return
    click.echo(
        f"actions: {totals['stored']} stored, {totals['duplicates']} duplicates,"
        f" {totals['ignored']} ignored (procedural memory off)"
    )


@procedural.command()
@click.option("--session", "-s", default=None, help="Only this session's actions.")
@click.option("--agent", default=None, help="Only this agent's actions.")
@click.option("--type", "action_type", default=None, help="Only this action type.")
@click.option("--outcome", type=OUTCOMES, default=None)
@click.option("--since", type=WHEN, default=None, help="From this time (UTC unless zoned).")
@click.option("--until", type=WHEN, default=None, help="Before this time.")
@click.option("--limit", "-n", default=50, show_default=True)
@_options
def actions(
    session: str | None,
    agent: str | None,
    action_type: str | None,
    outcome: Any,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    profile: str,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """The timeline of PROFILE's actions, newest first."""
    with _procedural(url, token, profile) as memory:
        page = memory.actions(
            session_id=session,
            agent_id=agent,
            action_type=action_type,
            outcome=outcome,
            since=since,
            until=until,
            limit=limit,
        )
    _show_actions(page, as_json)


def _show_actions(page: ActionPage, as_json: bool) -> None:
    if as_json:
        echo_json(page)
        return
    click.echo(f"{'AT':<19} {'SESSION':<16} {'ACTION':<20} {'TARGET':<16} {'OUTCOME':<9} ERROR")
    for a in page.actions:
        click.echo(
            f"{_when(a.at):<19} {a.session_id[:16]:<16} {a.action_type[:20]:<20}"
            f" {a.target_type[:16]:<16} {a.outcome:<9} {a.error_code or ''}"
        )


@procedural.command()
@click.option("--type", "action_type", default=None, help="Only this action type.")
@click.option("--target-type", default=None, help="Only this target type.")
@click.option("--outcome", type=click.Choice(["failure", "dead_end"]), default=None)
@click.option("--since", type=WHEN, default=None, help="Last seen from this time.")
@click.option("--until", type=WHEN, default=None, help="Last seen before this time.")
@click.option("--all", "everything", is_flag=True, help="Superseded and deleted ones too.")
@_options
def patterns(
    action_type: str | None,
    target_type: str | None,
    outcome: Any,
    since: datetime | None,
    until: datetime | None,
    everything: bool,
    profile: str,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """PROFILE's patterns by confidence, with their recommendations."""
    with _procedural(url, token, profile) as memory:
        found = memory.patterns(
            action_type=action_type,
            target_type=target_type,
            outcome=outcome,
            since=since,
            until=until,
            include_inactive=everything,
        )
    _show_patterns(found, as_json)


def _show_patterns(found: PatternList, as_json: bool) -> None:
    if as_json:
        echo_json(found)
        return
    for p in found.patterns:
        marks = [
            m for m, on in (("suppressed", p.suppressed), ("superseded", p.superseded_by)) if on
        ]
        marked = f" [{', '.join(marks)}]" if marks else ""
        click.echo(f"{p.id}  {p.confidence:.2f} of {p.samples}{marked}  {p.recommendation}")
        if p.annotation:
            click.echo(f"    note: {p.annotation}")


@procedural.command()
@click.argument("pattern_id")
@click.option(
    "--note", default=None, help="Text injected with the pattern, whatever its confidence."
)
@click.option("--clear", is_flag=True, help="Remove the note.")
@_options
def annotate(
    pattern_id: str,
    note: str | None,
    clear: bool,
    profile: str,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Set (--note) or remove (--clear) the operator's note on PATTERN_ID."""
    if (note is None) == (not clear):
        raise click.UsageError("Pass --note TEXT, or --clear")
    with _procedural(url, token, profile) as memory:
        pattern = memory.annotate(pattern_id, None if clear else note)
    if as_json:
        echo_json(pattern)
    else:
        click.echo(f"{pattern_id}: note {pattern.annotation!r}")


@procedural.command()
@click.argument("pattern_id")
@click.option("--undo", is_flag=True, help="Inject it again.")
@_options
def suppress(
    pattern_id: str, undo: bool, profile: str, as_json: bool, url: str, token: str | None
) -> None:
    """Never inject PATTERN_ID (it stays listed, marked), or inject it again with --undo."""
    with _procedural(url, token, profile) as memory:
        pattern = memory.suppress(pattern_id, not undo)
    state = "suppressed" if pattern.suppressed else "injected again"
    if as_json:
        echo_json(pattern)
    else:
        click.echo(f"{pattern_id}: {state}")


@procedural.command()
@click.option("--type", "action_type", required=True, help="The action about to be taken.")
@click.option("--target-type", required=True)
@click.option("--target", "targets", multiple=True, help="A target id (repeatable).")
@_options
def inject(
    action_type: str,
    target_type: str,
    targets: tuple[str, ...],
    profile: str,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Print the "past experience" block an agent gets before an action."""
    with _procedural(url, token, profile) as memory:
        block = memory.inject(action_type=action_type, target_type=target_type, target_ids=targets)
    if as_json:
        echo_json(block)
    else:
        click.echo(block.text or "(nothing to inject)")


@procedural.command()
@click.option("--now", type=WHEN, default=None, help="The passes' clock (default: now).")
@_options
def evaluate(
    now: datetime | None, profile: str, as_json: bool, url: str, token: str | None
) -> None:
    """Run the sequence, pattern and metric passes of PROFILE now."""
    with _procedural(url, token, profile) as memory:
        result = memory.evaluate(now=now)
    if as_json:
        echo_json(result)
        return
    changes = result.patterns
    click.echo(
        f"{result.sequences_closed} sequences closed; patterns: {changes.promoted} promoted,"
        f" {changes.reinforced} reinforced, {changes.superseded} superseded,"
        f" {changes.decayed} decayed, {changes.deleted} deleted; {result.benchmarks} metric"
        f" rows; {result.skills_proposed} skills proposed"
        f" ({result.latency_ms.get('total', 0.0):.0f} ms)"
    )


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


@procedural.command()
@click.argument("metric_id", required=False)
@_options
def metrics(
    metric_id: str | None, profile: str, as_json: bool, url: str, token: str | None
) -> None:
    """List PROFILE's metrics, or METRIC_ID's benchmark rows over time."""
    with _procedural(url, token, profile) as memory:
        if metric_id is None:
            listing = memory.metrics()
            if as_json:
                echo_json(listing)
                return
            for m in listing.metrics:
                kind = "built-in" if m.builtin else "custom"
                state = "active" if m.active else "inactive"
                click.echo(f"{m.id:<24} {kind:<8} {state:<8} {m.aggregation:<7} {m.description}")
            return
        bench = memory.benchmark(metric_id)
    if as_json:
        echo_json(bench)
        return
    click.echo(f"{'AT':<19} {'VALUE':>8} {'SAMPLES':>8} {'BASELINE':>9} {'DELTA':>8}")
    for row in bench.rows:
        click.echo(
            f"{_when(row.at):<19} {_value(row.value):>8} {row.samples:>8}"
            f" {_value(row.baseline):>9} {_value(row.delta_vs_baseline):>8}"
        )


@procedural.command()
@click.option("--query", "-q", default=None, help="The active skills that fit this best.")
@click.option(
    "--status",
    type=click.Choice(["active", "candidate", "discarded", "all"]),
    default="active",
    show_default=True,
)
@_options
def skills(
    query: str | None, status: Any, profile: str, as_json: bool, url: str, token: str | None
) -> None:
    """List PROFILE's skills (candidates are proposed from routines that keep succeeding)."""
    with _procedural(url, token, profile) as memory:
        found = memory.skills(query=query, status=status)
    _show_skills(found, as_json)


def _show_skills(found: SkillList, as_json: bool) -> None:
    if as_json:
        echo_json(found)
        return
    for skill in found.skills:
        click.echo(f"{skill.id}  [{skill.status}] {skill.name}: {skill.when_to_use}")
        for number, step in enumerate(skill.steps, 1):
            click.echo(f"    {number}. {step}")


@procedural.command()
@click.argument("skill_id")
@click.option("--discard", is_flag=True, help="Discard the candidate instead of adopting it.")
@_options
def review(
    skill_id: str, discard: bool, profile: str, as_json: bool, url: str, token: str | None
) -> None:
    """Adopt the proposed skill SKILL_ID (it becomes active), or --discard it."""
    with _procedural(url, token, profile) as memory:
        skill = memory.discard_skill(skill_id) if discard else memory.adopt_skill(skill_id)
    if as_json:
        echo_json(skill)
    else:
        click.echo(f"{skill_id}: {skill.status}")
