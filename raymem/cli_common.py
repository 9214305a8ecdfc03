"""Options and error handling shared by the client commands of the CLI."""

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import httpx
import msgspec

from raymem.client import DEFAULT_URL, Client, RaymemHTTPError
from raymem.config import ObjectStoreSettings


def json_option(command: Any) -> Any:
    """``--json``: print JSON for scripts (the parameter ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(command)


def profile_option(command: Any) -> Any:
    """``--profile/-p``: the profile a command works on (required)."""
    return click.option("--profile", "-p", required=True, help="Profile name.")(command)


def echo_json(value: Any) -> None:
    """Print a result (a msgspec Struct, or plain data) as one line of JSON."""
    click.echo(msgspec.json.encode(value).decode())


def client_options(command: Any) -> Any:
    command = click.option(
        "--token", envvar="RAYMEM_TOKEN", default=None, help="API key ($RAYMEM_TOKEN)."
    )(command)
    command = click.option(
        "--url",
        envvar="RAYMEM_URL",
        default=DEFAULT_URL,
        show_default=True,
        help="Server URL ($RAYMEM_URL).",
    )(command)
    return command


def open_client(
    url: str, token: str | None, object_store: ObjectStoreSettings | None = None
) -> Client:
    return Client(url, token, object_store=object_store)


@contextlib.contextmanager
def server_errors() -> Iterator[None]:
    """Turn client failures into one-line CLI errors (exit status 1)."""
    try:
        yield
    except RaymemHTTPError as exc:
        raise click.ClickException(f"{exc.message} ({exc.status} {exc.code})") from None
    except (httpx.HTTPError, OSError) as exc:
        raise click.ClickException(f"Cannot reach the server: {exc}") from None


def read_turns(path: Path) -> list[dict[str, Any]]:
    """Turns from a JSON list, a JSON object with ``messages``, or JSON Lines."""
    text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"{path} is neither JSON nor JSON Lines: {exc}") from None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list) or not all(isinstance(turn, dict) for turn in data):
        raise click.ClickException(
            f'{path} must hold a list of turns like {{"role": "user", "content": "…"}}'
        )
    return data
