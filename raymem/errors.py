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
