-- One profile's store, schema version 1. {dim} is the embedding dimension.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- Raw conversation turns: the durable evidence every memory can be re-derived from.
CREATE TABLE messages (
    seq          INTEGER PRIMARY KEY,         -- insertion order; rowid of the indexes
    id           TEXT NOT NULL UNIQUE,        -- sha256(session_id, role, content)[:128 bits]
    session_id   TEXT NOT NULL,
    role         TEXT NOT NULL,
    content      TEXT NOT NULL,
    created_at   TEXT NOT NULL,               -- message time, UTC ISO 8601
    ingested_at  TEXT NOT NULL,
    extracted    INTEGER NOT NULL DEFAULT 0,  -- memories have been extracted from it
    vectorised   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_by_session ON messages (session_id, created_at, seq);
CREATE INDEX messages_by_ingested ON messages (ingested_at);  -- retention
CREATE INDEX messages_pending_vectors ON messages (seq) WHERE vectorised = 0;

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'seq', tokenize = 'porter unicode61'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.seq, old.content);
END;

CREATE TABLE memories (
    seq                INTEGER PRIMARY KEY,
    id                 TEXT NOT NULL UNIQUE,
    type               TEXT NOT NULL CHECK (type IN ('fact', 'event', 'instruction', 'task')),
    content            TEXT NOT NULL,
    content_hash       TEXT NOT NULL,         -- of the normalised content, for duplicates
    topic_key          TEXT,
    event_time         TEXT,
    importance         REAL NOT NULL,
    confidence         REAL NOT NULL,
    session_id         TEXT,
    source_message_ids TEXT NOT NULL DEFAULT '[]',  -- JSON list
    source_spans       TEXT NOT NULL DEFAULT '[]',  -- JSON list of [first_line, last_line]
    search_queries     TEXT NOT NULL DEFAULT '',    -- newline separated
    created_at         TEXT NOT NULL,
    superseded_by      TEXT,                  -- forward pointer of the version chain
    forgotten_at       TEXT,
    vectorised         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memories_current_topic ON memories (topic_key)
    WHERE superseded_by IS NULL AND forgotten_at IS NULL;
CREATE INDEX memories_by_hash ON memories (content_hash);
CREATE INDEX memories_by_superseded ON memories (superseded_by);
CREATE INDEX memories_pending_vectors ON memories (seq) WHERE vectorised = 0;

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, search_queries, content = 'memories', content_rowid = 'seq',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content, search_queries)
    VALUES (new.seq, new.content, new.search_queries);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, search_queries)
    VALUES ('delete', old.seq, old.content, old.search_queries);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, search_queries ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, search_queries)
    VALUES ('delete', old.seq, old.content, old.search_queries);
    INSERT INTO memories_fts (rowid, content, search_queries)
    VALUES (new.seq, new.content, new.search_queries);
END;

-- Cosine vector indexes; rowid = seq of the memory or message.
CREATE VIRTUAL TABLE memory_vectors USING vec0 (embedding float[{dim}] distance_metric=cosine);
CREATE VIRTUAL TABLE message_vectors USING vec0 (embedding float[{dim}] distance_metric=cosine);

-- Append-only log of every mutation, for snapshots, shipping and audit.
CREATE TABLE ledger (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    at      TEXT NOT NULL,
    op      TEXT NOT NULL,
    payload TEXT NOT NULL                      -- JSON
);

CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    started_at      TEXT NOT NULL,
    ended_at        TEXT,
    consolidated_at TEXT
);
