"""``raymem memory …``: operator commands against a running server.

Every command takes ``--url`` and ``--token``, prints readable tables (or JSON
with ``--json``), asks before destroying anything unless ``--yes``, and exits
0 on success, 1 on a server or connection error (or a declined confirmation),
2 on a usage error.
"""

from collections.abc import Iterator
from typing import Any

import click

from raymem.cli_common import client_options, echo_json, json_option, open_client, server_errors
from raymem.client import Profile
from raymem.types import Memory, ProfileList, SessionList

PAGE_SIZE = 100  # memories per request: the server's largest page by default


def _when(moment: Any) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M")


def _session_memories(profile: Profile, session_id: str) -> Iterator[Memory]:
    cursor = None
    while True:
        page = profile.list(
            session_id=session_id, include_superseded=True, limit=PAGE_SIZE, cursor=cursor
        )
        yield from page.memories
        cursor = page.next_cursor
        if cursor is None:
            return


@click.group()
def memory() -> None:
    """Inspect and manage profiles, sessions and memories on a running server."""


@memory.command("ls")
@click.option("--profile", "-p", default=None, help="List this profile's sessions instead.")
@json_option
@client_options
def ls(profile: str | None, as_json: bool, url: str, token: str | None) -> None:
    """List profiles, or a profile's sessions with --profile."""
    with open_client(url, token) as client, server_errors():
        if profile is None:
            _show_profiles(client.profiles(), as_json)
        else:
            _show_sessions(client.get_profile(profile).sessions(), as_json)


def _show_profiles(listing: ProfileList, as_json: bool) -> None:
    if as_json:
        echo_json(listing)
        return
    click.echo(f"{'PROFILE':<32} {'MESSAGES':>9} {'MEMORIES':>9} {'SESSIONS':>9}")
    for info in listing.profiles:
        click.echo(f"{info.name:<32} {info.messages:>9} {info.memories:>9} {info.sessions:>9}")


def _show_sessions(listing: SessionList, as_json: bool) -> None:
    if as_json:
        echo_json(listing)
        return
    click.echo(f"{'SESSION':<32} {'STARTED':<17} {'ENDED':<17} {'MESSAGES':>9}")
    for session in listing.sessions:
        click.echo(
            f"{session.id:<32} {_when(session.started_at):<17} {_when(session.ended_at):<17}"
            f" {session.message_count:>9}"
        )


@memory.command()
@click.argument("session")
@click.option("--profile", "-p", required=True)
@json_option
@client_options
def show(session: str, profile: str, as_json: bool, url: str, token: str | None) -> None:
    """Show SESSION's conversation and the memories derived from it."""
    with open_client(url, token) as client, server_errors():
        target = client.get_profile(profile)
        messages = target.session(session).last().messages
        memories = list(_session_memories(target, session))
    if as_json:
        echo_json({"session_id": session, "messages": messages, "memories": memories})
        return
    click.echo(f"session {session} ({len(messages)} turns)")
    for message in messages:
        click.echo(f"  {_when(message.created_at)}  {message.role:>9}: {message.content}")
    click.echo(f"memories ({len(memories)})")
    for item in memories:
        state = (
            " (superseded)" if item.superseded_by else " (forgotten)" if item.forgotten_at else ""
        )
        click.echo(f"  [{item.type}] {item.content}{state}  {item.id}")


@memory.command()
@click.argument("query")
@click.option("--profile", "-p", required=True)
@click.option("--limit", "-n", default=10, show_default=True)
@json_option
@client_options
def search(
    query: str, profile: str, limit: int, as_json: bool, url: str, token: str | None
) -> None:
    """Rank PROFILE's memories for QUERY, with scores, method and latency."""
    with open_client(url, token) as client, server_errors():
        result = client.get_profile(profile).recall(query, limit=limit)
    if as_json:
        echo_json(result)
        return
    click.echo(f"{'#':>3} {'SCORE':>8} {'TYPE':<12} {'CHANNELS':<40} CONTENT")
    for rank, hit in enumerate(result.memories, 1):
        click.echo(
            f"{rank:>3} {hit.score:>8.4f} {hit.type:<12} {','.join(hit.channels):<40} {hit.content}"
        )
    total = result.latency_ms.get("total", 0.0)
    click.echo(f"method {result.method}; {total:.1f} ms; answer: {result.answer}")


@memory.command()
@click.argument("session")
@click.option("--profile", "-p", required=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@client_options
def end(session: str, profile: str, yes: bool, as_json: bool, url: str, token: str | None) -> None:
    """End SESSION and consolidate it into long-term memories."""
    if not yes:
        click.confirm(f"End session {session!r} of profile {profile!r}?", abort=True)
    with open_client(url, token) as client, server_errors():
        ended = client.get_profile(profile).session(session).end()
    if as_json:
        echo_json(ended)
        return
    counts = ended.memories
    click.echo(
        f"ended {session}: {counts.added} memories added, {counts.superseded} superseded,"
        f" {counts.duplicates} duplicates"
    )


@memory.command()
@click.argument("session", required=False)
@click.option("--profile", "-p", required=True)
@click.option("--all", "everything", is_flag=True, help="Delete the whole profile.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@client_options
def rm(
    session: str | None,
    profile: str,
    everything: bool,
    yes: bool,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Erase SESSION (its turns, its memories and those drawn from its turns), or the
    profile with --all."""
    if everything and session is not None:
        raise click.UsageError("Name a SESSION or pass --all, not both")
    if not everything and session is None:
        raise click.UsageError("Name a SESSION, or pass --all to delete the whole profile")
    what = (
        f"profile {profile!r} and all its data"
        if everything
        else f"session {session!r} of {profile!r}"
    )
    if not yes:
        click.confirm(f"Delete {what}?", abort=True)
    with open_client(url, token) as client, server_errors():
        target = client.get_profile(profile)
        if everything:
            target.delete()
            result: Any = {"profile": profile, "deleted": True}
        else:
            assert session is not None
            result = target.session(session).delete()
    if as_json:
        echo_json(result)
    elif everything:
        click.echo(f"deleted profile {profile}")
    else:
        click.echo(
            f"deleted session {session}: {result.messages_deleted} turns deleted,"
            f" {result.memories_forgotten} memories forgotten, {result.memories_erased} erased"
        )


@memory.command()
@click.argument("memory_id")
@click.option("--profile", "-p", required=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@client_options
def erase(
    memory_id: str, profile: str, yes: bool, as_json: bool, url: str, token: str | None
) -> None:
    """Erase MEMORY_ID: its text, the turns it was drawn from and the memories drawn from
    those, from every copy (the file, its ledger, object storage)."""
    if not yes:
        click.confirm(
            f"Erase memory {memory_id!r} of {profile!r}, its turns and the memories drawn from"
            " them?",
            abort=True,
        )
    with open_client(url, token) as client, server_errors():
        erased = client.get_profile(profile).erase(memory_id)
    if as_json:
        echo_json(erased)
        return
    click.echo(
        f"erased memory {memory_id}: {erased.memories_erased} memories and"
        f" {erased.messages_erased} turns erased"
    )
