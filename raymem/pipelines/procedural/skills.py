"""Skills: named procedures an agent fetches when it needs one, and proposals from experience.

An operator adds a skill (its steps, when to use it, its inputs); it is searchable by
text and by vector, and fetched by id on demand rather than always put in context.
The maintenance pass proposes a candidate from an intent whose sequences keep
succeeding (at least 5 successful sequences, 80% of all with that intent): its
steps are the action path the latest 50 successful ones took most often. A candidate is adopted
(it becomes active) or discarded by an operator; a discarded proposal is kept, so
the same intent is not proposed again.
"""

import secrets
from collections import Counter
from datetime import datetime

import msgspec

from raymem.errors import Conflict, SkillNotFound
from raymem.pipelines.procedural.search import (
    CANDIDATES_PER_CHANNEL,
    EmbedFn,
    fts_query,
    fuse,
    vector_ranking,
)
from raymem.store import ProfileStore
from raymem.store.procedural import skills as stored
from raymem.store.procedural.actions import action_paths, intent_counts
from raymem.store.procedural.rows import content_id
from raymem.types_procedural import Skill, SkillHit, SkillIn, SkillInput

PROPOSE_MIN_SUCCESSES = 5
PROPOSE_MIN_SHARE = 0.8
#: A proposal's steps are the path taken most often by the latest this many successes.
PATH_SAMPLE = 50
NAME_CHARS = 128


async def _check_name(store: ProfileStore, name: str, skill_id: str | None) -> None:
    holder = await stored.skill_named(store.reader, name)
    if holder is not None and holder.id != skill_id:
        raise Conflict(f"A skill named {name!r} exists already ({holder.id})")


async def _get(store: ProfileStore, skill_id: str) -> Skill:
    skill = await stored.get_skill(store.reader, skill_id)
    if skill is None:
        raise SkillNotFound(skill_id)
    return skill


async def add(store: ProfileStore, request: SkillIn, now: datetime) -> Skill:
    """Add an operator's skill (active at once).

    Raises:
        Conflict: a skill (not discarded) has this name.
    """
    skill = Skill(
        id=secrets.token_hex(16),
        name=request.name.strip(),
        when_to_use=request.when_to_use.strip(),
        steps=[step.strip() for step in request.steps],
        inputs=list(request.inputs),
        status="active",
        source="operator",
        source_intent=None,
        evidence={},
        created_at=now,
        updated_at=now,
    )
    await _check_name(store, skill.name, None)
    async with store.write() as writer:
        await stored.write_skills(writer, [skill])
    return skill


async def update(store: ProfileStore, skill_id: str, request: SkillIn, now: datetime) -> Skill:
    """Replace a skill's name, text, steps and inputs (its status and history stay).

    Raises:
        SkillNotFound: no skill has this id.
        Conflict: another skill (not discarded) has the new name.
    """
    skill = await _get(store, skill_id)
    await _check_name(store, request.name.strip(), skill_id)
    changed = msgspec.structs.replace(
        skill,
        name=request.name.strip(),
        when_to_use=request.when_to_use.strip(),
        steps=[step.strip() for step in request.steps],
        inputs=list(request.inputs),
        updated_at=now,
    )
    async with store.write() as writer:
        await stored.write_skills(writer, [changed])
    return changed


async def review(store: ProfileStore, skill_id: str, *, adopt: bool, now: datetime) -> Skill:
    """Adopt a candidate (it becomes active) or discard it.

    Raises:
        SkillNotFound: no skill has this id.
        Conflict: the skill is not a candidate.
    """
    skill = await _get(store, skill_id)
    if skill.status != "candidate":
        raise Conflict(f"Skill {skill_id!r} is {skill.status}, not a candidate waiting for review")
    status = "active" if adopt else "discarded"
    reviewed = msgspec.structs.replace(skill, status=status, updated_at=now)
    async with store.write() as writer:
        await stored.write_skills(writer, [reviewed])
    return reviewed


async def remove(store: ProfileStore, skill_id: str) -> None:
    """Delete a skill.

    Raises:
        SkillNotFound: no skill has this id.
    """
    async with store.write() as writer:
        if not await stored.delete_skill(writer, skill_id):
            raise SkillNotFound(skill_id)


async def get(store: ProfileStore, skill_id: str) -> Skill:
    """One skill, whatever its status.

    Raises:
        SkillNotFound: no skill has this id.
    """
    return await _get(store, skill_id)


async def search(
    store: ProfileStore, query: str, *, limit: int = 10, embed: EmbedFn | None = None
) -> list[SkillHit]:
    """Active skills for a query, best first: full text and (given ``embed``) vectors, fused."""
    words = fts_query(query)
    text = (
        await stored.skills_text(store.reader, words, limit=CANDIDATES_PER_CHANNEL) if words else []
    )
    near = await vector_ranking(store, "skill_vectors", query, embed)
    ranked = fuse([text, near])
    skills = await stored.skills_by_seq(store.reader, [seq for seq, _ in ranked])
    hits = [
        SkillHit(**msgspec.structs.asdict(skills[seq]), score=score)
        for seq, score in ranked
        if seq in skills and skills[seq].status == "active"
    ]
    return hits[:limit]


async def propose(store: ProfileStore, now: datetime) -> list[Skill]:
    """Propose a candidate skill for each intent that keeps succeeding and has none yet."""
    proposals = []
    for intent, total, successes in sorted(await intent_counts(store.reader)):
        if successes < PROPOSE_MIN_SUCCESSES or successes / total < PROPOSE_MIN_SHARE:
            continue
        skill_id = content_id("proposed-skill", intent)
        if await stored.get_skill(store.reader, skill_id) is not None:
            continue
        name = intent[:NAME_CHARS].strip()
        if await stored.skill_named(store.reader, name) is not None:
            continue
        found = await action_paths(store.reader, intent, outcome="success", limit=PATH_SAMPLE)
        paths = Counter(tuple(path) for path in found)
        path, _ = min(paths.items(), key=lambda item: (-item[1], len(item[0]), item[0]))
        proposals.append(
            Skill(
                id=skill_id,
                name=name,
                when_to_use=f"When the task is to {intent}.",
                steps=[f"{action_type} on the {target_type}" for action_type, target_type in path],
                inputs=[
                    SkillInput(name=target_type, description=f"the {target_type} to act on")
                    for target_type in dict.fromkeys(target for _, target in path)
                ],
                status="candidate",
                source="proposed",
                source_intent=intent,
                evidence={"sequences": float(total), "successes": float(successes)},
                created_at=now,
                updated_at=now,
            )
        )
    if proposals:
        async with store.write() as writer:
            await stored.write_skills(writer, proposals)
    return proposals
