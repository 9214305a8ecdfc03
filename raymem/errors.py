"""Errors that carry their HTTP status and machine-readable code.

Ray pickles an exception by calling ``cls(*self.args)``, so every constructor
keeps ``args`` equal to its parameters and formats the message in ``__str__``.
"""


class RaymemError(Exception):
    status: int = 500
    code: str = "internal"

    def __init__(self, message: str = "Internal error") -> None:
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.code


class InvalidRequest(RaymemError):
    status = 400
    code = "invalid_request"


class Unauthorized(RaymemError):
    status = 401
    code = "unauthorized"


class Forbidden(RaymemError):
    status = 403
    code = "forbidden"


class NotFound(RaymemError):
    status = 404
    code = "not_found"


class ProfileNotFound(NotFound):
    code = "profile_not_found"

    def __init__(self, profile: str) -> None:
        super().__init__(profile)
        self.profile = profile

    def __str__(self) -> str:
        return f"Profile {self.profile!r} does not exist"


class MemoryNotFound(NotFound):
    code = "memory_not_found"

    def __init__(self, memory_id: str) -> None:
        super().__init__(memory_id)
        self.memory_id = memory_id

    def __str__(self) -> str:
        return f"Memory {self.memory_id!r} does not exist"


class MessageNotFound(NotFound):
    code = "message_not_found"

    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self.message_id = message_id

    def __str__(self) -> str:
        return f"Message {self.message_id!r} does not exist"


class SessionNotFound(NotFound):
    code = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id

    def __str__(self) -> str:
        return f"Session {self.session_id!r} does not exist"


class Gone(RaymemError):
    status = 410
    code = "gone"


class MemoryErased(Gone):
    """The memory existed and was erased: only a tombstone without text is left."""

    code = "memory_erased"

    def __init__(self, memory_id: str) -> None:
        super().__init__(memory_id)
        self.memory_id = memory_id

    def __str__(self) -> str:
        return f"Memory {self.memory_id!r} was erased"


class Conflict(RaymemError):
    status = 409
    code = "conflict"


class PayloadTooLarge(RaymemError):
    status = 413
    code = "payload_too_large"


class TooManyRequests(RaymemError):
    status = 429
    code = "too_many_requests"


class ProfileClosing(RaymemError):
    """Raised by a profile actor that is hibernating; the caller re-activates and retries."""

    status = 503
    code = "profile_closing"

    def __init__(self, profile: str) -> None:
        super().__init__(profile)
        self.profile = profile

    def __str__(self) -> str:
        return f"Profile {self.profile!r} is hibernating; retry"


# ------------------------------------------------------------- the agent's context


class BlockNotFound(NotFound):
    code = "block_not_found"

    def __init__(self, block: str) -> None:
        super().__init__(block)
        self.block = block

    def __str__(self) -> str:
        return f"Block {self.block!r} does not exist; create it with PUT …/blocks/{self.block}"


class BlockFull(Conflict):
    """A write would take a core block past its limit; nothing was written."""

    code = "block_full"

    def __init__(self, block: str, size: int, size_after: int, limit: int) -> None:
        Exception.__init__(self, block, size, size_after, limit)  # args: what pickle passes
        self.block, self.size, self.size_after, self.limit = block, size, size_after, limit

    def __str__(self) -> str:
        return (
            f"Block {self.block!r} would hold {self.size_after:,} characters, past its limit of"
            f" {self.limit:,} (it holds {self.size:,} now): rewrite or remove entries first"
        )


class EntryNotFound(NotFound):
    """No entry (of a block, or a todo, follow-up or wait of a work item) has this text."""

    code = "entry_not_found"

    def __init__(self, where: str, content: str) -> None:
        Exception.__init__(self, where, content)
        self.where, self.content = where, content

    def __str__(self) -> str:
        shown = self.content if len(self.content) <= 80 else self.content[:77] + "..."
        return f"No entry of {self.where} reads {shown!r} (whole text, case and spacing aside)"


class WorkItemNotFound(NotFound):
    code = "work_item_not_found"

    def __init__(self, item_id: str) -> None:
        super().__init__(item_id)
        self.item_id = item_id

    def __str__(self) -> str:
        return f"Work item {self.item_id!r} does not exist"


class WorkItemClosed(Conflict):
    code = "work_item_closed"

    def __init__(self, item_id: str) -> None:
        super().__init__(item_id)
        self.item_id = item_id

    def __str__(self) -> str:
        return f"Work item {self.item_id!r} is closed; open a new one"


class EpisodeNotFound(NotFound):
    code = "episode_not_found"

    def __init__(self, episode_id: str) -> None:
        super().__init__(episode_id)
        self.episode_id = episode_id

    def __str__(self) -> str:
        return f"Episode {self.episode_id!r} does not exist"


class RefNotFound(NotFound):
    code = "ref_not_found"

    def __init__(self, ref: str) -> None:
        super().__init__(ref)
        self.ref = ref

    def __str__(self) -> str:
        return f"Nothing in this profile has the reference {self.ref!r}"


class InvalidRef(InvalidRequest):
    code = "invalid_ref"

    def __init__(self, ref: str) -> None:
        super().__init__(ref)
        self.ref = ref

    def __str__(self) -> str:
        return (
            f"{self.ref!r} is not a reference: expected mem_<id>, msg_<id>, epi_<id>,"
            " wrk_<id> or blk_<block>_<key>"
        )


class ProfileMoved(RaymemError):
    """Raised by a profile host asked for a profile whose lease another host holds;
    the caller asks the catalog where it lives now and retries."""

    status = 503
    code = "profile_moved"

    def __init__(self, profile: str, host: str) -> None:
        Exception.__init__(self, profile, host)  # args as given: it unpickles intact
        self.profile, self.host = profile, host

    def __str__(self) -> str:
        return f"Profile {self.profile!r} is not open on host {self.host!r}; retry"


class DreamNotFound(NotFound):
    code = "dream_not_found"

    def __init__(self, dream_id: str) -> None:
        super().__init__(dream_id)
        self.dream_id = dream_id

    def __str__(self) -> str:
        return f"Dream {self.dream_id!r} does not exist"


class DreamStateConflict(Conflict):
    """A dream operation that its state does not allow (adopting a running dream, ...)."""

    code = "dream_state_conflict"

    def __init__(self, dream_id: str, state: str, action: str) -> None:
        Exception.__init__(self, dream_id, state, action)  # Ray rebuilds it as cls(*args)
        self.dream_id, self.state, self.action = dream_id, state, action

    def __str__(self) -> str:
        return f"Dream {self.dream_id!r} is {self.state}: it cannot be {self.action}"


class DreamAlreadyOpen(Conflict):
    """One dream per profile at a time: another is running or waits for review."""

    code = "dream_already_open"

    def __init__(self, dream_id: str, state: str) -> None:
        Exception.__init__(self, dream_id, state)  # Ray rebuilds it as cls(*args)
        self.dream_id, self.state = dream_id, state

    def __str__(self) -> str:
        if self.state == "ready":
            return f"Dream {self.dream_id!r} is ready for review: adopt or discard it first"
        return f"Dream {self.dream_id!r} is still running: wait for it or cancel it"


class ProposalNotFound(NotFound):
    code = "proposal_not_found"

    def __init__(self, proposal_id: str) -> None:
        super().__init__(proposal_id)
        self.proposal_id = proposal_id

    def __str__(self) -> str:
        return f"Proposal {self.proposal_id!r} does not exist"


class ProposalDecided(Conflict):
    """A proposal that was already approved or rejected, or whose memories changed since."""

    code = "proposal_decided"

    def __init__(self, proposal_id: str, reason: str) -> None:
        Exception.__init__(self, proposal_id, reason)  # Ray rebuilds it as cls(*args)
        self.proposal_id, self.reason = proposal_id, reason

    def __str__(self) -> str:
        return f"Proposal {self.proposal_id!r} cannot be decided: {self.reason}"


class PatternNotFound(NotFound):
    code = "pattern_not_found"

    def __init__(self, pattern_id: str) -> None:
        super().__init__(pattern_id)
        self.pattern_id = pattern_id

    def __str__(self) -> str:
        return f"Pattern {self.pattern_id!r} does not exist"


class MetricNotFound(NotFound):
    code = "metric_not_found"

    def __init__(self, metric_id: str) -> None:
        super().__init__(metric_id)
        self.metric_id = metric_id

    def __str__(self) -> str:
        return f"Metric {self.metric_id!r} does not exist"


class SkillNotFound(NotFound):
    code = "skill_not_found"

    def __init__(self, skill_id: str) -> None:
        super().__init__(skill_id)
        self.skill_id = skill_id

    def __str__(self) -> str:
        return f"Skill {self.skill_id!r} does not exist"


class SequenceNotFound(NotFound):
    code = "sequence_not_found"

    def __init__(self, sequence_id: str) -> None:
        super().__init__(sequence_id)
        self.sequence_id = sequence_id

    def __str__(self) -> str:
        return f"Action sequence {self.sequence_id!r} does not exist"


class ErasureIncomplete(RaymemError):
    """An erasure committed in the profile's file, but older copies could not be removed yet.

    The text is gone from the file and the ledger; what is left (the file's
    write-ahead log, snapshots and ledger segments in object storage) is removed by
    retrying the same call, and in the background meanwhile.
    """

    status = 503
    code = "erasure_incomplete"

    def __init__(self, what: str, reason: str) -> None:
        Exception.__init__(self, what, reason)  # args as the constructor's, for pickling
        self.what, self.reason = what, reason

    def __str__(self) -> str:
        return (
            f"{self.what} was erased from the profile, but older copies remain ({self.reason});"
            " retry the call to finish"
        )


class ProfileUnavailable(RaymemError):
    """The profile's file is on a node that is not in the cluster now, and without
    object storage there is no other copy to open: it answers again once that node
    is back. Never answered by opening a new, empty profile elsewhere."""

    status = 503
    code = "profile_unavailable"

    def __init__(self, profile: str, reason: str) -> None:
        Exception.__init__(self, profile, reason)  # args as given: it unpickles intact
        self.profile, self.reason = profile, reason

    def __str__(self) -> str:
        return f"Profile {self.profile!r} is unavailable: {self.reason}"


class ModelUnavailable(RaymemError):
    """A model pool gave no answer in time, twice (the second time through a new
    handle): the request fails rather than wait forever; retrying later is safe."""

    status = 503
    code = "model_unavailable"

    def __init__(self, pool: str, timeout_s: float) -> None:
        Exception.__init__(self, pool, timeout_s)  # args as given: it unpickles intact
        self.pool, self.timeout_s = pool, timeout_s

    def __str__(self) -> str:
        return f"The {self.pool} model pool did not answer within {self.timeout_s:g} s; retry"
