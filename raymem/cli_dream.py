"""``raymem dream …`` and ``raymem review …``: a profile's dreams and its review queue.

A dream re-organises a copy of a profile into a candidate; ``diff`` shows what it
would change, ``adopt`` applies it, ``discard`` drops it. In ``review`` mode,
low-confidence supersessions and merges wait as proposals to approve or reject.
Like ``raymem memory``: ``--url``/``--token``, ``--json`` for scripts, exit 1 on a
server error.
"""

from typing import Literal

import click

from raymem.cli_common import (
    client_options,
    echo_json,
    json_option,
    open_client,
    profile_option,
    server_errors,
)
from raymem.types import DreamDiff, DreamStatus, Proposal, ProposalState

WAIT_TIMEOUT_S = 3600.0  # how long ``dream start --wait`` waits for a dream at most


def _show_dream(dream: DreamStatus, as_json: bool) -> None:
    if as_json:
        echo_json(dream)
        return
    progress = dream.progress
    counts = ", ".join(f"{name} {count}" for name, count in sorted(dream.counts.items()))
    click.echo(
        f"dream {dream.id}: {dream.state}, step {progress.step} ({progress.done}/{progress.total})"
    )
    if counts:
        click.echo(f"  {counts}")
    if dream.error:
        click.echo(f"  error: {dream.error}")


def _show_diff(diff: DreamDiff) -> None:
    click.echo(f"dream {diff.id} ({diff.state}): {len(diff.changes)} changes")
    for change in diff.changes:
        click.echo(f"  {change.action:<8} {change.content}")
        click.echo(f"           {change.reason}; memories {', '.join(change.memory_ids)}")


@click.group()
def dream() -> None:
    """Re-organise a profile into a candidate, review its diff, adopt or discard it."""


@dream.command()
@profile_option
@click.option("--instructions", "-i", default="", help="What to focus on, in plain text.")
@click.option("--max-sessions", type=int, default=None, help="Recent sessions to read.")
@click.option("--wait", is_flag=True, help="Wait until the dream is ready (or failed).")
@json_option
@client_options
def start(
    profile: str,
    instructions: str,
    max_sessions: int | None,
    wait: bool,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Start a dream of PROFILE; it runs on the server in the background."""
    with open_client(url, token) as client, server_errors():
        target = client.get_profile(profile)
        started = target.start_dream(instructions=instructions, max_sessions=max_sessions)
        if wait:
            started = target.wait_dream(started.id, timeout_s=WAIT_TIMEOUT_S)
    _show_dream(started, as_json)


@dream.command("ls")
@profile_option
@json_option
@client_options
def list_dreams(profile: str, as_json: bool, url: str, token: str | None) -> None:
    """List PROFILE's latest dreams, newest first."""
    with open_client(url, token) as client, server_errors():
        listing = client.get_profile(profile).dreams()
    if as_json:
        echo_json(listing)
        return
    click.echo(f"{'DREAM':<32} {'STATE':<10} {'STEP':<15} STARTED")
    for item in listing.dreams:
        click.echo(f"{item.id:<32} {item.state:<10} {item.progress.step:<15} {item.started_at}")


@dream.command()
@click.argument("dream_id")
@profile_option
@json_option
@client_options
def status(dream_id: str, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Show DREAM_ID's state, progress and counts."""
    with open_client(url, token) as client, server_errors():
        found = client.get_profile(profile).dream_status(dream_id)
    _show_dream(found, as_json)


@dream.command()
@click.argument("dream_id")
@profile_option
@json_option
@client_options
def diff(dream_id: str, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """List every change DREAM_ID makes, with its reason and the memories it touches."""
    with open_client(url, token) as client, server_errors():
        changes = client.get_profile(profile).dream_diff(dream_id)
    if as_json:
        echo_json(changes)
    else:
        _show_diff(changes)


@dream.command()
@click.argument("dream_id")
@profile_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@client_options
def adopt(
    dream_id: str, profile: str, yes: bool, as_json: bool, url: str, token: str | None
) -> None:
    """Apply DREAM_ID's changes to PROFILE (the old memories stay in their history)."""
    if not yes:
        click.confirm(f"Adopt dream {dream_id} into profile {profile!r}?", abort=True)
    with open_client(url, token) as client, server_errors():
        adopted = client.get_profile(profile).adopt_dream(dream_id)
    if as_json:
        echo_json(adopted)
        return
    click.echo(f"adopted {dream_id}: {adopted.applied} changes applied")
    for skipped in adopted.skipped:
        click.echo(f"  skipped {skipped.change.action} {skipped.change.content}: {skipped.reason}")


@dream.command()
@click.argument("dream_id")
@profile_option
@json_option
@client_options
def discard(dream_id: str, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Delete a ready DREAM_ID's candidate; the profile stays as it is."""
    with open_client(url, token) as client, server_errors():
        _show_dream(client.get_profile(profile).discard_dream(dream_id), as_json)


@dream.command()
@click.argument("dream_id")
@profile_option
@json_option
@client_options
def cancel(dream_id: str, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Stop a running DREAM_ID and delete its candidate."""
    with open_client(url, token) as client, server_errors():
        _show_dream(client.get_profile(profile).cancel_dream(dream_id), as_json)


# ------------------------------------------------------------------ review


def _show_proposal(proposal: Proposal) -> None:
    click.echo(
        f"{proposal.id}  {proposal.state:<8} {proposal.action:<9} {proposal.memory_id}"
        f" -> {proposal.target_id}  ({proposal.reason})"
    )


def _show_decided(proposal: Proposal, as_json: bool) -> None:
    if as_json:
        echo_json(proposal)
    else:
        _show_proposal(proposal)


@click.group()
def review() -> None:
    """A profile's review queue: low-confidence supersessions and merges wait for a person."""


@review.command()
@click.argument("mode", type=click.Choice(["apply", "review"]), required=False)
@profile_option
@click.option("--below", type=click.FloatRange(0.0, 1.0), default=None, help="Threshold.")
@json_option
@client_options
def mode(
    mode: Literal["apply", "review"] | None,
    profile: str,
    below: float | None,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Show PROFILE's review mode, or set it to MODE (review: changes under --below wait)."""
    with open_client(url, token) as client, server_errors():
        target = client.get_profile(profile)
        found = target.review_mode() if mode is None else target.set_review_mode(mode, below=below)
    if as_json:
        echo_json(found)
    else:
        click.echo(f"{found.mode} (below {found.below})")


@review.command("ls")
@profile_option
@click.option("--state", type=click.Choice(["pending", "approved", "rejected"]), default="pending")
@json_option
@client_options
def list_proposals(
    profile: str, state: ProposalState, as_json: bool, url: str, token: str | None
) -> None:
    """List PROFILE's proposals (pending ones by default), oldest first."""
    with open_client(url, token) as client, server_errors():
        listing = client.get_profile(profile).proposals(state=state)
    if as_json:
        echo_json(listing)
        return
    for proposal in listing.proposals:
        _show_proposal(proposal)


@review.command()
@click.argument("proposal_id")
@profile_option
@json_option
@client_options
def approve(proposal_id: str, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Make the change PROPOSAL_ID holds."""
    with open_client(url, token) as client, server_errors():
        decided = client.get_profile(profile).approve_proposal(proposal_id)
    _show_decided(decided, as_json)


@review.command()
@click.argument("proposal_id")
@profile_option
@json_option
@client_options
def reject(proposal_id: str, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Leave both memories of PROPOSAL_ID as they are."""
    with open_client(url, token) as client, server_errors():
        decided = client.get_profile(profile).reject_proposal(proposal_id)
    _show_decided(decided, as_json)
