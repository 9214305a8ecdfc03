"""Options and error handling shared by the client commands of the CLI."""

import contextlib
from collections.abc import Iterator
from typing import Any

import click
import httpx

from raymem.client import DEFAULT_URL, Client, RaymemHTTPError
from raymem.config import ObjectStoreSettings


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
