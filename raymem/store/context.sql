-- The agent's context: core memory blocks, work items, episodes. {dim}: the embedding dimension.

-- Blocks a caller created or resized. The default blocks (user, project) exist
-- without a row, with the configured limits, until a caller sets their limit.
CREATE TABLE context_blocks (
    name        TEXT PRIMARY KEY,
    char_limit  INTEGER NOT NULL,              -- characters of the rendered block
    created_at  TEXT NOT NULL
);

-- Entries of the core blocks; seq is their order, and a replaced entry keeps its place.
CREATE TABLE block_entries (
    seq         INTEGER PRIMARY KEY,
    block       TEXT NOT NULL,
    content     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX block_entries_by_block ON block_entries (block, seq);

-- Explicit work items: what the agent is doing, towards what, within which limits.
CREATE TABLE work_items (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    session_id       TEXT,
    objective        TEXT NOT NULL,
    delivery_target  TEXT,
    constraints      TEXT NOT NULL DEFAULT '[]',  -- JSON list
    scope            TEXT NOT NULL DEFAULT '[]',  -- JSON list
    status           TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    outcome          TEXT,
    opened_at        TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    closed_at        TEXT
);
CREATE INDEX work_items_open ON work_items (seq) WHERE status = 'open';

-- A work item's todos (its plan), follow-ups and wait conditions, in order.
CREATE TABLE work_entries (
    seq         INTEGER PRIMARY KEY,
    item_id     TEXT NOT NULL,
    type        TEXT NOT NULL CHECK (type IN ('todo', 'followup', 'wait')),
    content     TEXT NOT NULL,
    done        INTEGER NOT NULL DEFAULT 0,       -- checked, or resolved
    created_at  TEXT NOT NULL,
    done_at     TEXT
);
CREATE INDEX work_entries_by_item ON work_entries (item_id, seq);

-- Episodes: immutable records of finished work (a closed work item, an ended session).
CREATE TABLE episodes (
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    trigger             TEXT NOT NULL CHECK (trigger IN ('work_item', 'session')),
    work_item_id        TEXT,
    session_id          TEXT,
    title               TEXT NOT NULL,
    delivery_target     TEXT,
    summary             TEXT NOT NULL,
    scope               TEXT NOT NULL DEFAULT '[]',  -- JSON lists, as the names say
    resources           TEXT NOT NULL DEFAULT '[]',
    decisions           TEXT NOT NULL DEFAULT '[]',
    verification        TEXT NOT NULL DEFAULT '[]',
    followups           TEXT NOT NULL DEFAULT '[]',
    source_message_ids  TEXT NOT NULL DEFAULT '[]',
    source_memory_ids   TEXT NOT NULL DEFAULT '[]',
    started_at          TEXT,
    ended_at            TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    builder             TEXT NOT NULL,
    vectorised          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX episodes_by_session ON episodes (session_id, seq);
CREATE INDEX episodes_pending_vectors ON episodes (seq) WHERE vectorised = 0;

-- The JSON lists are indexed as they are: the tokenizer skips their brackets and quotes.
CREATE VIRTUAL TABLE episodes_fts USING fts5 (
    title, summary, resources, decisions, verification,
    content = 'episodes', content_rowid = 'seq', tokenize = 'porter unicode61'
);
CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
    INSERT INTO episodes_fts (rowid, title, summary, resources, decisions, verification)
    VALUES (new.seq, new.title, new.summary, new.resources, new.decisions, new.verification);
END;
CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
    INSERT INTO episodes_fts (episodes_fts, rowid, title, summary, resources, decisions, verification)
    VALUES ('delete', old.seq, old.title, old.summary, old.resources, old.decisions, old.verification);
END;

CREATE VIRTUAL TABLE episode_vectors USING vec0 (embedding float[{dim}] distance_metric=cosine);

-- Working memory lists the newest current tasks and instructions: without this index
-- that read walks every memory (tens of ms at 100K memories).
CREATE INDEX memories_current_by_type ON memories (type, seq)
    WHERE superseded_by IS NULL AND forgotten_at IS NULL;
-- The memories drawn from a turn (its first source, the turn recall folds them into):
-- whether a recalled turn is stale, and what a session's episode draws on.
CREATE INDEX memories_by_first_source ON memories (json_extract(source_message_ids, '$[0]'));
