"""What the session app's profile hosts were doing when a test that used it failed.

A request that never returns shows up in a test only as a client timeout; these lines
say which host holds it and where it waits: whether each host's main event loop still
answers, the innermost frames of the thread that runs it, and where its tasks wait (the
innermost raymem frame and the innermost frame, with a count). Printed at the end of
the run for the first failures.
"""

import asyncio
import time
from typing import Any

import ray

from raymem.actors.calls import run_blocking
from raymem.actors.catalog import CatalogClient
from raymem.actors.host import STACKS_TIMEOUT_S
from raymem.actors.stacks import Stacks
from raymem.config import Settings

PING_TIMEOUT_S = 5.0
REPORT_TIMEOUT_S = 30.0
LOOP_THREAD = "AsyncIO Thread: default"  # Ray runs an async actor's loop there
LOOP_THREAD_FRAMES = 3
WAITS_SHOWN = 8


def hosts_report(settings: Settings) -> str:
    try:
        return run_blocking(asyncio.wait_for(_report(settings), REPORT_TIMEOUT_S))
    except Exception as exc:  # the report must never hide the failure it describes
        return f"  (no report: {type(exc).__name__}: {exc})"


async def _report(settings: Settings) -> str:
    lines = []
    for name, handle in await CatalogClient(settings).hosts():
        lines.append(f"  host {name}: main loop {await _ping(handle)}")
        lines.extend(f"    {line}" for line in await _summary(handle))
    return "\n".join(lines)


async def _ping(handle: Any) -> str:
    started = time.monotonic()
    try:
        await asyncio.wait_for(handle.ping.remote(), PING_TIMEOUT_S)
    except TimeoutError:
        return f"does not answer within {PING_TIMEOUT_S:g} s"
    except ray.exceptions.RayActorError:
        return "is dead"
    return f"answers ({(time.monotonic() - started) * 1000:.0f} ms)"


async def _summary(handle: Any) -> list[str]:
    """The loop thread's innermost frames and, for each task wait, its innermost frames."""
    try:
        stacks: Stacks = await asyncio.wait_for(handle.stacks.remote(), STACKS_TIMEOUT_S)
    except (TimeoutError, ray.exceptions.RayActorError) as exc:
        return [f"no stacks: {type(exc).__name__}"]
    loop_thread = [_short(frame) for frame in stacks.threads.get(LOOP_THREAD, [])]
    lines = [f"loop thread at: {' <- '.join(reversed(loop_thread[-LOOP_THREAD_FRAMES:]))}"]
    lines.append(f"{stacks.tasks} tasks on the main event loop")
    for wait in stacks.waits[:WAITS_SHOWN]:
        frames = [_short(frame) for frame in wait.frames]
        ours = [frame for frame in frames if frame.startswith("raymem/")]
        where = " <- ".join(dict.fromkeys([frames[-1], *ours[-1:]]))
        lines.append(f"{wait.count} task(s) waiting at {where}")
    return lines


def _short(frame: str) -> str:
    """A frame's path from the package it is in (raymem, a dependency, the stdlib)."""
    if "/site-packages/" in frame:
        return frame.split("/site-packages/", 1)[1]
    if "/raymem/" in frame:
        return frame[frame.rindex("/raymem/") + 1 :]
    if "/lib/" in frame:
        return frame.split("/lib/", 1)[1]
    return frame
