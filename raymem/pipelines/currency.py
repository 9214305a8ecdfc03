"""Currency: recall answers with the truth as it stands now.

The channels find evidence, including turns whose facts were later replaced
("I live in Budapest" after the move to Vienna). Reconciliation already decided
what replaced what (topic keys, similarity): a memory superseded by a newer one
points at it. This step makes ranking honour those decisions:

- a raw turn whose memories were all superseded is stale: it stays in the
  result (history matters) but marked ``stale``, pointing at what replaced it,
  and it keeps only ``STALE_SHARE`` of its score;
- the current version of anything a found turn said ranks above that turn: it
  is lifted (or added, when no channel found it) to ``UPDATE_MARGIN`` times the
  turn's score, through an ``update`` part;
- a turn that gave a memory which was then forgotten stays out of recall
  altogether (it stays in its session's history).
"""

from collections.abc import Callable, Sequence

from raymem.pipelines.fusion import Scored
from raymem.store.search import MemoryState, Search
from raymem.types import Memory

#: The share of its score a stale turn keeps: it sinks below the current facts
#: without leaving the result, so the history stays visible.
STALE_SHARE = 0.5
#: The current version of a fact ranks at least this much above a turn it replaced.
UPDATE_MARGIN = 1.05

MemoryFilter = Callable[[Memory], bool]


def apply_currency(items: list[Scored], search: Search, wanted: MemoryFilter) -> list[Scored]:
    """Mark and demote stale turns, lift what replaced them, drop forgotten turns.

    Args:
        items: fused, grouped items (changed in place; the list returned may be
            shorter, for dropped turns, or longer, for current versions added).
        search: the store's quick reads.
        wanted: whether a memory passes the request's filters (type, session), so a
            current version is only added where the request would show it.
    """
    unchecked = [item for item in items if not item.currency_checked]
    shown_turns = {item.message.id: item for item in unchecked if item.message is not None}
    states = search.turn_memories(list(shown_turns))
    replaced = {
        state.id
        for turn_states in states.values()
        for state in turn_states
        if state.superseded_by is not None
    }
    heads = search.chain_heads(sorted(replaced))
    kept: list[Scored] = [item for item in items if item.currency_checked]
    lifts: list[tuple[float, list[str]]] = []  # (a turn's score before demotion, versions)
    for item in unchecked:
        item.currency_checked = True
        turn_states = states.get(item.message.id, []) if item.message is not None else []
        if any(state.forgotten for state in turn_states):
            continue  # what the turn said was forgotten: it no longer speaks for the user
        current_versions = _heads_of(turn_states, heads)
        if current_versions:
            lifts.append((item.score, current_versions))
        if turn_states and not any(state.current for state in turn_states):
            item.stale = True
            item.replaced_by = current_versions[0] if current_versions else None
            item.parts = {channel: value * STALE_SHARE for channel, value in item.parts.items()}
        kept.append(item)
    for score, versions in lifts:
        for head in versions:
            _rank_above(kept, head, score * UPDATE_MARGIN, search, wanted)
    return kept


def _heads_of(turn_states: Sequence[MemoryState], heads: dict[str, str]) -> list[str]:
    """The current versions of a turn's replaced memories, newest chain first, no repeats."""
    found = [heads[state.id] for state in turn_states if state.id in heads]
    return list(dict.fromkeys(reversed(found)))


def _rank_above(
    items: list[Scored], head_id: str, target: float, search: Search, wanted: MemoryFilter
) -> None:
    """Give the item holding memory ``head_id`` at least score ``target``, adding it if absent."""
    holder = next((item for item in items if item.memory and item.memory.id == head_id), None)
    if holder is None:
        loaded = search.memories_with_turns_by_id([head_id]).get(head_id)
        if loaded is None or not wanted(loaded[0]):
            return
        memory, turn_seq, turn_at = loaded
        # A slot already showing the turn the current version came from holds it too.
        holder = next(
            (
                item
                for item in items
                if item.message is not None and item.message.id in memory.source_message_ids
            ),
            None,
        )
        if holder is None:
            holder = Scored({}, memory=memory, message_seq=turn_seq, turn_at=turn_at)
            holder.currency_checked = True
            items.append(holder)
    if holder.score < target:
        holder.parts["update"] = holder.parts.get("update", 0.0) + target - holder.score
