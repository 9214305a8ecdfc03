"""What a process is doing now: each thread's stack and where each asyncio task waits.

For a host that stops answering: its ``stacks`` method runs on a thread and event loop
of its own (a Ray concurrency group), so it answers even while the host's main event
loop is blocked, and says by what.
"""

import asyncio
import collections
import sys
import threading
import traceback
from collections.abc import Iterator
from types import FrameType
from typing import Any

import msgspec

STACK_DEPTH = 12  # innermost frames shown per thread or task
READ_ATTEMPTS = 5  # the task set may change while another thread reads it
MAX_AWAIT_DEPTH = 100  # a chain of awaits longer than this is cut


class TaskWait(msgspec.Struct, frozen=True, kw_only=True):
    """Tasks waiting at the same chain of awaits (``file:line in function``, outermost first)."""

    count: int
    frames: list[str]


class Stacks(msgspec.Struct, frozen=True, kw_only=True):
    """A process's threads and the tasks of its main event loop, as read at one moment."""

    threads: dict[str, list[str]]  # thread name -> its innermost frames, outermost first
    tasks: int  # on the main event loop (0 when the loop is not known yet)
    waits: list[TaskWait]  # where those tasks wait, the most common first


def read(loop: asyncio.AbstractEventLoop | None) -> Stacks:
    """Every thread's innermost frames, and the tasks of ``loop`` grouped by where they
    wait (identical waits are counted once)."""
    current = sys._current_frames()
    threads = {
        thread.name: [
            f"{frame.filename}:{frame.lineno} in {frame.name}"
            for frame in traceback.extract_stack(current[thread.ident])[-STACK_DEPTH:]
        ]
        for thread in threading.enumerate()
        if thread.ident in current
    }
    waits = collections.Counter(_wait_of(task) for task in (_tasks(loop) if loop else ()))
    return Stacks(
        threads=threads,
        tasks=waits.total(),
        waits=[TaskWait(count=count, frames=list(wait)) for wait, count in waits.most_common()],
    )


def format_stacks(stacks: Stacks) -> str:
    """``stacks`` as text: each thread, then each wait, with its frames indented."""
    lines = []
    for name, frames in stacks.threads.items():
        lines.append(f"thread {name}:")
        lines.extend(f"  {frame}" for frame in frames)
    lines.append(f"{stacks.tasks} tasks on the main event loop")
    for wait in stacks.waits:
        lines.append(f"{wait.count} task(s) waiting at:")
        lines.extend(f"  {frame}" for frame in wait.frames)
    return "\n".join(lines)


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
