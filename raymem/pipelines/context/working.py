"""Working memory: a deterministic snapshot of where the work stands.

Derived from records only: the open work items (the explicit work-item API) and
the current tasks and instructions in memory. Everything is ordered by when it
was stored (oldest first) and shown with stored times only, so the same records
give the same snapshot, byte for byte, at any hour.
"""

from raymem.config import ContextSettings
from raymem.store import ProfileStore
from raymem.store import work as work_store
from raymem.types_context import WorkingMemory

#: Open work items a snapshot shows at most, the oldest: more is a to-do list, not a focus.
OPEN_ITEMS_SHOWN = 50


def snapshot(
    store: ProfileStore, settings: ContextSettings, session_id: str | None
) -> WorkingMemory:
    """The profile's working memory, or a session's (its items and the profile-wide ones).

    Args:
        store: the profile's store.
        settings: how many tasks and instructions to show.
        session_id: a session, or None for every open work item.
    """
    return WorkingMemory(
        session_id=session_id,
        work_items=work_store.open_items(store.quick, session_id, limit=OPEN_ITEMS_SHOWN),
        tasks=work_store.memory_lines(store.quick, "task", limit=settings.working_memory_tasks),
        instructions=work_store.memory_lines(
            store.quick, "instruction", limit=settings.working_memory_instructions
        ),
    )
