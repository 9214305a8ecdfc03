"""``raymem context …``: the agent's context on a running server.

Assemble a context, edit core blocks, open and close work items, list episodes,
fetch a record by reference, flush turns before compaction. Every command takes
``--url`` and ``--token``, prints readable text (or JSON with ``--json``), and
exits 0 on success, 1 on a server or connection error, 2 on a usage error.
"""

from pathlib import Path

import click

from raymem.cli_common import (
    client_options,
    echo_json,
    json_option,
    open_client,
    profile_option,
    read_turns,
    server_errors,
)
from raymem.types_context import Block, WorkItem


def _show_block(block: Block) -> None:
    click.echo(f"[{block.name}] {block.size}/{block.limit} characters")
    for entry, ref in zip(block.entries, block.entry_refs, strict=True):
        click.echo(f"  - {entry}  ({ref})")


def _show_item(item: WorkItem) -> None:
    click.echo(f"{item.id} [{item.status}] {item.objective}")
    for todo in item.todos:
        click.echo(f"  [{'x' if todo.done else ' '}] {todo.content}")
    for kind, entries in (("follow-up", item.followups), ("waiting on", item.waits)):
        for entry in entries:
            click.echo(f"  {kind}: {entry.content}{' (done)' if entry.done else ''}")


@click.group()
def context() -> None:
    """The agent's context: assembly, core blocks, work items, episodes, references."""


@context.command()
@click.argument("query", default="")
@profile_option
@click.option("--session", "-s", default=None, help="Session: its recent turns and work items.")
@click.option("--budget", "budget_chars", type=int, default=None, help="Budget in characters.")
@click.option("--tokens", "budget_tokens", type=int, default=None, help="Budget in tokens.")
@click.option("--format", "fmt", type=click.Choice(["markdown", "text"]), default="markdown")
@json_option
@client_options
def show(
    query: str,
    profile: str,
    session: str | None,
    budget_chars: int | None,
    budget_tokens: int | None,
    fmt: str,
    as_json: bool,
    url: str,
    token: str | None,
) -> None:
    """Print the context PROFILE assembles for QUERY (default: the session's last user turn)."""
    with open_client(url, token) as client, server_errors():
        result = client.get_profile(profile).context(
            query,
            session_id=session,
            budget_chars=budget_chars,
            budget_tokens=budget_tokens,
            format="text" if fmt == "text" else "markdown",
        )
    if as_json:
        echo_json(result)
        return
    click.echo(result.text)
    cut = sum(len(refs) for refs in result.dropped.values())
    click.echo(
        f"-- {len(result.text)}/{result.budget_chars} characters; {cut} items cut;"
        f" {result.latency_ms.get('total', 0.0):.1f} ms",
        err=True,
    )


@context.command()
@profile_option
@json_option
@client_options
def blocks(profile: str, as_json: bool, url: str, token: str | None) -> None:
    """List PROFILE's core blocks with their entries."""
    with open_client(url, token) as client, server_errors():
        listing = client.get_profile(profile).blocks()
    if as_json:
        echo_json(listing)
        return
    for block in listing.blocks:
        _show_block(block)


@context.command("set-limit")
@click.argument("block")
@click.argument("limit", type=int)
@profile_option
@client_options
def set_limit(block: str, limit: int, profile: str, url: str, token: str | None) -> None:
    """Create BLOCK with LIMIT characters, or change its limit."""
    with open_client(url, token) as client, server_errors():
        _show_block(client.get_profile(profile).set_block(block, limit=limit))


@context.command()
@click.argument("block")
@click.argument("content")
@profile_option
@client_options
def add(block: str, content: str, profile: str, url: str, token: str | None) -> None:
    """Add CONTENT to BLOCK (refused when the block would pass its limit)."""
    with open_client(url, token) as client, server_errors():
        written = client.get_profile(profile).add_block_entry(block, content)
    if written.duplicate:
        click.echo("already there (same text, case and spacing aside)")
    _show_block(written.block)


@context.command()
@click.argument("block")
@click.argument("old")
@click.argument("new")
@profile_option
@client_options
def replace(block: str, old: str, new: str, profile: str, url: str, token: str | None) -> None:
    """Rewrite BLOCK's entry whose whole text is OLD as NEW."""
    with open_client(url, token) as client, server_errors():
        written = client.get_profile(profile).replace_block_entry(block, old=old, new=new)
    _show_block(written.block)


@context.command()
@click.argument("block")
@click.argument("content")
@profile_option
@client_options
def remove(block: str, content: str, profile: str, url: str, token: str | None) -> None:
    """Remove BLOCK's entry whose whole text is CONTENT."""
    with open_client(url, token) as client, server_errors():
        _show_block(client.get_profile(profile).remove_block_entry(block, content))


@context.command("open")
@click.argument("objective")
@profile_option
@click.option("--session", "-s", default=None, help="The session the work belongs to.")
@click.option("--target", default=None, help="Delivery target.")
@click.option("--todo", "todos", multiple=True, help="A step of the plan (repeatable).")
@client_options
def open_item(
    objective: str,
    profile: str,
    session: str | None,
    target: str | None,
    todos: tuple[str, ...],
    url: str,
    token: str | None,
) -> None:
    """Open a work item for OBJECTIVE."""
    with open_client(url, token) as client, server_errors():
        item = client.get_profile(profile).open_work_item(
            objective, session_id=session, delivery_target=target, todos=todos
        )
    _show_item(item)


@context.command()
@click.argument("item_id")
@profile_option
@click.option("--outcome", default=None, help="How the work ended.")
@json_option
@client_options
def close(
    item_id: str, profile: str, outcome: str | None, as_json: bool, url: str, token: str | None
) -> None:
    """Close work item ITEM_ID and print the episode finalised from it."""
    with open_client(url, token) as client, server_errors():
        closed = client.get_profile(profile).close_work_item(item_id, outcome=outcome)
    if as_json:
        echo_json(closed)
        return
    episode = closed.episode
    click.echo(f"episode {episode.id}: {episode.title}\n{episode.summary}")


@context.command()
@profile_option
@click.option("--session", "-s", default=None, help="One session's work items only.")
@json_option
@client_options
def work(profile: str, session: str | None, as_json: bool, url: str, token: str | None) -> None:
    """Print PROFILE's working memory: open work items, tasks and instructions."""
    with open_client(url, token) as client, server_errors():
        memory = client.get_profile(profile).working_memory(session_id=session)
    if as_json:
        echo_json(memory)
        return
    for item in memory.work_items:
        _show_item(item)
    for line in [*memory.instructions, *memory.tasks]:
        click.echo(f"[{line.type}] {line.content}")


@context.command()
@profile_option
@click.option("--session", "-s", default=None, help="One session's episodes only.")
@click.option("--limit", "-n", default=20, show_default=True)
@json_option
@client_options
def episodes(
    profile: str, session: str | None, limit: int, as_json: bool, url: str, token: str | None
) -> None:
    """List PROFILE's episodes, newest first."""
    with open_client(url, token) as client, server_errors():
        page = client.get_profile(profile).episodes(session_id=session, limit=limit)
    if as_json:
        echo_json(page)
        return
    for episode in page.episodes:
        click.echo(f"{episode.ended_at:%Y-%m-%d %H:%M} {episode.source_ref}  {episode.title}")


@context.command()
@click.argument("source_ref")
@profile_option
@client_options
def ref(source_ref: str, profile: str, url: str, token: str | None) -> None:
    """Print the record SOURCE_REF names (JSON, with its kind)."""
    with open_client(url, token) as client, server_errors():
        echo_json(client.get_profile(profile).resolve(source_ref))


@context.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@profile_option
@click.option("--session", "-s", required=True, help="Session id of the turns.")
@json_option
@client_options
def flush(
    file: Path, profile: str, session: str, as_json: bool, url: str, token: str | None
) -> None:
    """Store what is durable in the turns of FILE (JSON or JSON Lines), best effort."""
    with open_client(url, token) as client, server_errors():
        result = client.get_profile(profile).flush(read_turns(file), session_id=session)
    if as_json:
        echo_json(result)
        return
    click.echo(
        f"messages: {result.messages.stored} stored; memories: {result.memories.added} added,"
        f" {result.known} already in core blocks"
    )
    if result.error:
        click.echo(f"partly failed: {result.error}", err=True)
