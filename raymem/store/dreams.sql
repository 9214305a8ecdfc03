-- Memory that maintains itself: dream jobs and their changes, memory use, the review queue.

-- Dream jobs. The profile's own row says whether a dream is open; while one runs,
-- its step and counts are kept in the candidate file's copy of the row, so the
-- profile's file is not written until the dream ends.
CREATE TABLE dreams (
    id            TEXT PRIMARY KEY,
    state         TEXT NOT NULL
                  CHECK (state IN ('running', 'ready', 'adopted', 'discarded', 'failed', 'cancelled')),
    step          TEXT NOT NULL,              -- the last step completed
    instructions  TEXT NOT NULL DEFAULT '',
    max_sessions  INTEGER NOT NULL,
    base_seq      INTEGER NOT NULL,           -- the profile's ledger seq the dream read
    counts        TEXT NOT NULL DEFAULT '{}', -- JSON: what it read and changed
    started_at    TEXT NOT NULL,
    finished_at   TEXT,
    error         TEXT
);
CREATE INDEX dreams_open ON dreams (state) WHERE state IN ('running', 'ready');

-- What a dream changed, in order: the candidate's diff against the profile it read.
-- A candidate holds its own dream's changes; the profile gains them when it adopts.
CREATE TABLE dream_changes (
    dream_id  TEXT NOT NULL,
    number    INTEGER NOT NULL,
    change    TEXT NOT NULL,                  -- JSON: a store.dreams.Change
    PRIMARY KEY (dream_id, number)
) WITHOUT ROWID;

-- Memories a dream retired (stale, or their evidence lost). Like a forgotten memory
-- a retired one has forgotten_at set and leaves recall; unlike a forget, which the
-- person asked for, the turns it came from stay in recall (store.search.turn_memories).
CREATE TABLE retired_memories (
    memory_id  TEXT PRIMARY KEY,
    reason     TEXT NOT NULL
) WITHOUT ROWID;

-- How often recall returned a memory, and when it last did.
CREATE TABLE memory_use (
    memory_id         TEXT PRIMARY KEY,
    recalled_count    INTEGER NOT NULL,
    last_recalled_at  TEXT NOT NULL
) WITHOUT ROWID;

-- The review queue: whether low-confidence supersessions and merges wait for a person.
CREATE TABLE review_mode (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    mode        TEXT NOT NULL CHECK (mode IN ('apply', 'review')),
    below       REAL NOT NULL                 -- confidence under which a change is proposed
);

CREATE TABLE proposals (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    action      TEXT NOT NULL CHECK (action IN ('supersede', 'merge')),
    memory_id   TEXT NOT NULL,                -- the new memory
    target_id   TEXT NOT NULL,                -- the stored memory it would supersede or merge into
    confidence  REAL NOT NULL,
    reason      TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'rejected')),
    created_at  TEXT NOT NULL,
    decided_at  TEXT
);
CREATE INDEX proposals_pending ON proposals (seq) WHERE state = 'pending';
