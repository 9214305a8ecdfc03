"""The ``raymem`` command line: the server, and client commands against a running one."""

import sys
from pathlib import Path

import click
import msgspec

from raymem.cli_common import client_options, open_client, read_turns, server_errors
from raymem.cli_context import context
from raymem.cli_dream import dream, review
from raymem.cli_mcp import mcp
from raymem.cli_memory import memory
from raymem.cli_procedural import procedural
from raymem.config import ConfigError, Settings, load_settings

INGEST_BATCH = 500  # turns per request, well inside the server's default limit


def _settings(ctx: click.Context) -> Settings:
    try:
        return load_settings(ctx.obj["config_path"])
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c",
    "--config",
    "config_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML configuration file (default: $RAYMEM_CONFIG).",
)
@click.version_option(package_name="raymem")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """raymem: self-hosted memory for AI agents."""
    ctx.obj = {"config_path": config_path}


@cli.command()
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port to listen on (default 8000).")
@click.option(
    "--data-dir", default=None, type=click.Path(file_okay=False), help="Where profiles are stored."
)
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None, data_dir: str | None) -> None:
    """Start a local Ray and serve the HTTP API until Ctrl-C."""
    from raymem.serve.server import serve_forever

    settings = _settings(ctx)
    server = msgspec.structs.replace(
        settings.server,
        **{k: v for k, v in {"host": host, "port": port}.items() if v is not None},
    )
    settings = msgspec.structs.replace(settings, server=server)
    if data_dir is not None:
        settings = msgspec.structs.replace(settings, data_dir=str(Path(data_dir).resolve()))
    try:
        serve_forever(settings)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--profile", "-p", required=True, help="Profile name.")
@click.option("--session", "-s", required=True, help="Session id of the conversation.")
@client_options
def ingest(file: Path, profile: str, session: str, url: str, token: str | None) -> None:
    """Ingest a conversation from FILE (JSON or JSON Lines turns)."""
    turns = read_turns(file)
    totals = {"stored": 0, "duplicates": 0, "added": 0, "superseded": 0, "memory_duplicates": 0}
    with open_client(url, token) as client:
        target = client.get_profile(profile)
        for start in range(0, len(turns), INGEST_BATCH):
            with server_errors():
                result = target.ingest(turns[start : start + INGEST_BATCH], session_id=session)
            totals["stored"] += result.messages.stored
            totals["duplicates"] += result.messages.duplicates
            totals["added"] += result.memories.added
            totals["superseded"] += result.memories.superseded
            totals["memory_duplicates"] += result.memories.duplicates
    click.echo(
        f"messages: {totals['stored']} stored, {totals['duplicates']} duplicates; "
        f"memories: {totals['added']} added, {totals['superseded']} superseded, "
        f"{totals['memory_duplicates']} duplicates"
    )


@cli.command()
@click.argument("query")
@click.option("--profile", "-p", required=True, help="Profile name.")
@click.option("--limit", "-n", default=10, show_default=True, help="How many memories.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@client_options
def recall(
    query: str, profile: str, limit: int, as_json: bool, url: str, token: str | None
) -> None:
    """Recall what PROFILE knows about QUERY."""
    with open_client(url, token) as client, server_errors():
        result = client.get_profile(profile).recall(query, limit=limit)
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
        return
    click.echo(f"answer: {result.answer}")
    for rank, hit in enumerate(result.memories, 1):
        click.echo(
            f"{rank:>3}. [{hit.type}] {hit.content}  (score {hit.score:.4f}; {', '.join(hit.channels)})"
        )
    click.echo(f"{result.method}, {result.latency_ms.get('total', 0):.1f} ms")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@client_options
def profiles(as_json: bool, url: str, token: str | None) -> None:
    """List profiles with their counts."""
    with open_client(url, token) as client, server_errors():
        listing = client.profiles()
    if as_json:
        click.echo(msgspec.json.encode(listing).decode())
        return
    click.echo(f"{'profile':<32} {'messages':>9} {'memories':>9} {'sessions':>9}")
    for info in listing.profiles:
        click.echo(f"{info.name:<32} {info.messages:>9} {info.memories:>9} {info.sessions:>9}")


@cli.command()
@click.argument("profile")
@click.argument("destination")
@client_options
@click.pass_context
def export(ctx: click.Context, profile: str, destination: str, url: str, token: str | None) -> None:
    """Save PROFILE as JSON Lines to DESTINATION: a file (.gz compresses) or s3://bucket/key.

    An s3:// destination is reached as the configuration's [object_store] says."""
    from tqdm import tqdm

    object_store = _settings(ctx).object_store
    bar = tqdm(unit="B", unit_scale=True, desc=f"export {profile}", disable=None)
    with open_client(url, token, object_store) as client, server_errors(), bar:
        written = client.get_profile(profile).export(destination, progress=bar.update)
    click.echo(f"exported {profile} to {destination} ({written} bytes)")


@cli.command("import")
@click.argument("profile")
@click.argument("source")
@client_options
@click.pass_context
def import_(ctx: click.Context, profile: str, source: str, url: str, token: str | None) -> None:
    """Load an archive from SOURCE (a file or s3://bucket/key) into a new or empty PROFILE.

    An s3:// source is reached as the configuration's [object_store] says."""
    from tqdm import tqdm

    object_store = _settings(ctx).object_store
    bar = tqdm(total=1, desc=f"import {profile}", disable=None)
    with open_client(url, token, object_store) as client, server_errors(), bar:
        result = client.get_profile(profile).import_archive(source)
        bar.update(1)
    counts = result.counts
    click.echo(
        f"imported into {profile}: {counts.sessions} sessions, {counts.messages} messages,"
        f" {counts.memories} memories (ledger seq {result.ledger_seq})"
    )


@cli.command()
@click.argument("profile")
@client_options
def snapshot(profile: str, url: str, token: str | None) -> None:
    """Write a snapshot of PROFILE to the server's object storage."""
    with open_client(url, token) as client, server_errors():
        result = client.get_profile(profile).snapshot()
    click.echo(f"snapshot {result.key} at ledger seq {result.ledger_seq}")


cli.add_command(memory)
cli.add_command(context)
cli.add_command(dream)
cli.add_command(review)
cli.add_command(mcp)
cli.add_command(procedural)


def main() -> None:
    try:
        cli()
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
