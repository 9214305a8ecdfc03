"""Rendering the context's sections as text: markdown or plain, deterministic to the byte.

The same items give the same bytes: nothing here reads a clock or depends on
anything but its arguments. A section's text is its heading line and its items,
each ending with a newline; core blocks group their entries under the block's name,
separated by the block separator exactly as the block's size counts them.
Recalled items (memories, episodes) are shown on one line each.
"""

from collections.abc import Sequence
from datetime import datetime

from raymem.store.blocks import ENTRY_SEPARATOR
from raymem.types_context import (
    ContextFormat,
    ContextItem,
    Episode,
    MemoryLine,
    SectionName,
    WorkItem,
)

HEADINGS: dict[SectionName, str] = {
    "core": "Core memory",
    "working_memory": "Working memory",
    "memories": "Relevant memories",
    "episodes": "Relevant episodes",
    "recent_turns": "Recent turns",
}


def heading(name: SectionName, fmt: ContextFormat) -> str:
    title = HEADINGS[name]
    return f"## {title}\n" if fmt == "markdown" else f"{title.upper()}\n"


def _block_heading(block: str, fmt: ContextFormat) -> str:
    return f"### {block}\n" if fmt == "markdown" else f"[{block}]\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _day(moment: datetime | None) -> str:
    return moment.date().isoformat() if moment is not None else ""


def render_section(name: SectionName, items: Sequence[ContextItem], fmt: ContextFormat) -> str:
    """A section's text: empty when it has no items."""
    if not items:
        return ""
    if name != "core":
        return heading(name, fmt) + "".join(f"{item.content}\n" for item in items)
    parts = [heading(name, fmt)]
    block = None
    for item in items:
        if item.type != block:
            block = item.type
            parts.append(_block_heading(block or "", fmt))
        else:
            parts.append(ENTRY_SEPARATOR.lstrip("\n"))  # the previous entry ended its line
        parts.append(f"{item.content}\n")
    return "".join(parts)


def render_context(
    sections: Sequence[tuple[SectionName, Sequence[ContextItem]]], fmt: ContextFormat
) -> str:
    """The whole text: non-empty sections in the order given, a blank line between them."""
    texts = [render_section(name, items, fmt) for name, items in sections]
    return "\n".join(text for text in texts if text)


# ------------------------------------------------------------------ items


def work_item_text(item: WorkItem) -> str:
    """A work item on a few lines: objective, then what is set of target, limits and plan."""
    lines = [f"- Work item: {_one_line(item.objective)}"]
    if item.delivery_target:
        lines.append(f"  Deliver: {_one_line(item.delivery_target)}")
    if item.constraints:
        lines.append("  Constraints: " + "; ".join(_one_line(c) for c in item.constraints))
    if item.scope:
        lines.append("  Scope: " + "; ".join(_one_line(s) for s in item.scope))
    if item.todos:
        marks = (f"[{'x' if todo.done else ' '}] {_one_line(todo.content)}" for todo in item.todos)
        lines.append("  Plan: " + "; ".join(marks))
    open_followups = [f.content for f in item.followups if not f.done]
    if open_followups:
        lines.append("  Follow up: " + "; ".join(_one_line(f) for f in open_followups))
    open_waits = [w.content for w in item.waits if not w.done]
    if open_waits:
        lines.append("  Waiting on: " + "; ".join(_one_line(w) for w in open_waits))
    return "\n".join(lines)


def memory_line_text(line: MemoryLine) -> str:
    return f"- {line.type.capitalize()}: {_one_line(line.content)}"


def recalled_memory_text(memory_type: str, content: str, when: str | None) -> str:
    """A recalled memory or turn: ``- [type, date] content`` (date for events and turns)."""
    label = f"{memory_type}, {when}" if when else memory_type
    return f"- [{label}] {_one_line(content)}"


def episode_text(episode: Episode) -> str:
    parts = [f"- {_one_line(episode.title)} (ended {_day(episode.ended_at)}): "]
    parts.append(_one_line(episode.summary))
    for label, values in (
        ("Decisions", episode.decisions),
        ("Verified", episode.verification),
        ("Carried forward", episode.followups),
    ):
        if values:
            parts.append(f" {label}: " + "; ".join(_one_line(v) for v in values) + ".")
    return "".join(parts)


def turn_text(role: str, content: str) -> str:
    return f"{role}: {content.strip()}"
