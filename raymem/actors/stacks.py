"""What a process is doing now: each thread's stack and where each asyncio task waits.

For a host that stops answering: its ``stacks`` method runs on a thread and event loop
of its own (a Ray concurrency group), so it answers even while the host's main event
loop is blocked, and this text says by what.
"""

import asyncio
import collections
import sys
import threading
import traceback
from collections.abc import Iterator
from types import FrameType
from typing import Any

STACK_DEPTH = 12  # innermost frames shown per thread or task
READ_ATTEMPTS = 5  # the task set may change while another thread reads it
MAX_AWAIT_DEPTH = 100  # a chain of awaits longer than this is cut


def describe(loop: asyncio.AbstractEventLoop | None) -> str:
    """Every thread's innermost frames, then the tasks of ``loop`` grouped by where they
    wait (identical waits are counted once)."""
    lines = []
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident is not None else None
        if frame is not None:
            lines.append(f"thread {thread.name}:")
            lines.extend(_format(traceback.extract_stack(frame)[-STACK_DEPTH:]))
    if loop is not None:
        waits = collections.Counter(_wait_of(task) for task in _tasks(loop))
        lines.append(f"{sum(waits.values())} tasks on the main event loop")
        for wait, count in waits.most_common():
            lines.append(f"{count} task(s) waiting at:")
            lines.extend(f"  {frame}" for frame in wait)
    return "\n".join(lines)


def _format(summary: list[traceback.FrameSummary]) -> list[str]:
    return [f"  {frame.filename}:{frame.lineno} in {frame.name}" for frame in summary]


def _tasks(loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
    for _ in range(READ_ATTEMPTS):
        try:
            return asyncio.all_tasks(loop)
        except RuntimeError:  # the set changed while it was read: read again
            continue
    return set()


def _wait_of(task: asyncio.Task[Any]) -> tuple[str, ...]:
    """The task's chain of awaits, innermost last: each coroutine's current line."""
    return tuple(
        f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        for frame in list(_await_chain(task.get_coro()))[-STACK_DEPTH:]
    )


def _await_chain(awaitable: Any) -> Iterator[FrameType]:
    """The frames of a coroutine and of what it awaits, outermost first."""
    for _ in range(MAX_AWAIT_DEPTH):
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is None:
            return  # a future, or a finished coroutine: the chain ends here
        yield frame
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)
