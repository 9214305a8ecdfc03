-- Procedural memory: what an agent did and what came of it. {dim} is the embedding dimension.
-- Times are UTC ISO 8601 text (to_db_time), which sorts in time order.

-- One row: whether the profile captures actions and injects patterns (off by default).
CREATE TABLE procedural_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    enabled    INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);

-- Captured actions: one tool call, mutation or query of an agent, and its outcome.
CREATE TABLE actions (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,          -- client-supplied or content-derived
    session_id   TEXT NOT NULL,
    agent_id     TEXT,
    action_type  TEXT NOT NULL,
    target_type  TEXT NOT NULL,
    target_ids   TEXT NOT NULL DEFAULT '[]',    -- JSON list
    outcome      TEXT NOT NULL CHECK (outcome IN ('success', 'failure', 'dead_end')),
    error_code   TEXT,
    duration_ms  REAL,
    intent       TEXT NOT NULL DEFAULT '',
    at           TEXT NOT NULL,                 -- when it happened
    captured_at  TEXT NOT NULL,                 -- when raymem stored it
    sequence_id  TEXT                           -- set when its sequence closes
);
CREATE INDEX actions_open ON actions (session_id, at) WHERE sequence_id IS NULL;
CREATE INDEX actions_by_time ON actions (at, seq);
CREATE INDEX actions_by_sequence ON actions (sequence_id);

-- A session's actions, closed once the session went quiet or was ended.
CREATE TABLE action_sequences (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    session_id    TEXT NOT NULL,
    agent_id      TEXT,
    started_at    TEXT NOT NULL,                -- its first action's time
    ended_at      TEXT NOT NULL,                -- its last action's time
    closed_at     TEXT NOT NULL,                -- when the sequence pass closed it
    closed_by     TEXT NOT NULL CHECK (closed_by IN ('quiet', 'session_end')),
    outcome       TEXT NOT NULL CHECK (outcome IN ('success', 'failure', 'dead_end')),
    action_count  INTEGER NOT NULL,
    failure_count INTEGER NOT NULL,             -- actions that did not succeed
    duration_ms   REAL NOT NULL,                -- the actions' durations added up
    intent        TEXT NOT NULL,                -- the intent summary
    summarised_by TEXT NOT NULL,                -- 'rules' or the model's name
    steps         TEXT NOT NULL DEFAULT '[]',   -- JSON: what each (action, target type) met
    warned        TEXT NOT NULL DEFAULT '[]',   -- JSON: ids of patterns injected during it
    avoided       INTEGER,                      -- warned: none of the warned failures happened
    vectorised    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX action_sequences_by_end ON action_sequences (ended_at);
CREATE INDEX action_sequences_by_session ON action_sequences (session_id);
CREATE INDEX action_sequences_by_intent ON action_sequences (lower(intent), outcome);
CREATE INDEX action_sequences_pending_vectors ON action_sequences (seq) WHERE vectorised = 0;

CREATE VIRTUAL TABLE action_sequences_fts USING fts5 (
    intent, content = 'action_sequences', content_rowid = 'seq', tokenize = 'porter unicode61'
);
CREATE TRIGGER action_sequences_fts_insert AFTER INSERT ON action_sequences BEGIN
    INSERT INTO action_sequences_fts (rowid, intent) VALUES (new.seq, new.intent);
END;
CREATE TRIGGER action_sequences_fts_delete AFTER DELETE ON action_sequences BEGIN
    INSERT INTO action_sequences_fts (action_sequences_fts, rowid, intent)
    VALUES ('delete', old.seq, old.intent);
END;
CREATE VIRTUAL TABLE action_sequence_vectors USING vec0 (
    embedding float[{dim}] distance_metric=cosine
);

-- What tends to go wrong: (action type, target type, error code) over recent sequences.
CREATE TABLE patterns (
    seq               INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    action_type       TEXT NOT NULL,
    target_type       TEXT NOT NULL,
    error_code        TEXT,
    outcome           TEXT NOT NULL CHECK (outcome IN ('failure', 'dead_end')),
    confidence        REAL NOT NULL,
    samples           INTEGER NOT NULL,         -- sequences that did the action on the target type
    hits              INTEGER NOT NULL,         -- of those, sequences where it went this way
    precondition      TEXT,                     -- an action type after which it tends to succeed
    target_ids        TEXT NOT NULL DEFAULT '[]',  -- JSON: targets it went wrong on, capped
    recommendation    TEXT NOT NULL,
    first_seen        TEXT NOT NULL,            -- the first action that went this way
    last_seen         TEXT NOT NULL,            -- the latest one
    reinforced_at     TEXT NOT NULL,            -- decay counts from here
    decay_steps       INTEGER NOT NULL DEFAULT 0,  -- weekly decays applied since then
    evidence_through  TEXT NOT NULL,            -- closed_at of the newest sequence counted
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    superseded_by     TEXT,                     -- forward pointer of the version chain
    deleted_at        TEXT,                     -- soft delete: confidence fell below the floor
    suppressed        INTEGER NOT NULL DEFAULT 0,  -- operator: never injected
    annotation        TEXT                      -- operator: injected whatever the confidence
);
CREATE INDEX patterns_current ON patterns (target_type, action_type)
    WHERE superseded_by IS NULL AND deleted_at IS NULL;
CREATE INDEX patterns_by_superseded ON patterns (superseded_by);

-- Patterns shown to an agent before it acted in a session, for the utilisation metric.
CREATE TABLE pattern_injections (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    session_id  TEXT NOT NULL,
    agent_id    TEXT,
    pattern_id  TEXT NOT NULL,
    at          TEXT NOT NULL,
    sequence_id TEXT                            -- set when the session's sequence closes
);
CREATE INDEX pattern_injections_open ON pattern_injections (session_id, at)
    WHERE sequence_id IS NULL;

-- Built-in and custom metrics over sequences, and their values over time.
CREATE TABLE metrics (
    seq               INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    builtin           INTEGER NOT NULL DEFAULT 0,  -- built-ins are deactivated, never deleted
    active            INTEGER NOT NULL DEFAULT 1,
    description       TEXT NOT NULL DEFAULT '',
    action_types      TEXT NOT NULL DEFAULT '[]',  -- JSON: event filter (empty: any)
    target_types      TEXT NOT NULL DEFAULT '[]',
    success_condition TEXT NOT NULL DEFAULT '',
    aggregation       TEXT NOT NULL CHECK (aggregation IN ('rate', 'average', 'p95')),
    value             TEXT NOT NULL DEFAULT 'action_count',
    window_days       REAL NOT NULL,
    baseline          REAL,                     -- over the first sequences it measures
    baseline_samples  INTEGER NOT NULL DEFAULT 0,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

CREATE TABLE metric_benchmarks (
    seq               INTEGER PRIMARY KEY,
    metric_id         TEXT NOT NULL,
    at                TEXT NOT NULL,            -- the evaluation's time
    value             REAL,                     -- NULL: no sequence in the window
    samples           INTEGER NOT NULL,
    baseline          REAL,
    delta_vs_baseline REAL,
    UNIQUE (metric_id, at)
);

-- Named procedures an agent fetches on demand; proposed ones wait for review.
CREATE TABLE skills (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    when_to_use   TEXT NOT NULL,
    steps         TEXT NOT NULL DEFAULT '[]',   -- JSON list of strings
    inputs        TEXT NOT NULL DEFAULT '[]',   -- JSON list of {"name", "description"}
    status        TEXT NOT NULL CHECK (status IN ('active', 'candidate', 'discarded')),
    source        TEXT NOT NULL CHECK (source IN ('operator', 'proposed')),
    source_intent TEXT,                         -- proposed: the intent that kept succeeding
    evidence      TEXT NOT NULL DEFAULT '{}',   -- proposed: JSON, what the proposal rests on
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    vectorised    INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX skills_by_name ON skills (name) WHERE status != 'discarded';
CREATE INDEX skills_pending_vectors ON skills (seq) WHERE vectorised = 0;

CREATE VIRTUAL TABLE skills_fts USING fts5 (
    name, when_to_use, steps, content = 'skills', content_rowid = 'seq',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER skills_fts_insert AFTER INSERT ON skills BEGIN
    INSERT INTO skills_fts (rowid, name, when_to_use, steps)
    VALUES (new.seq, new.name, new.when_to_use, new.steps);
END;
CREATE TRIGGER skills_fts_delete AFTER DELETE ON skills BEGIN
    INSERT INTO skills_fts (skills_fts, rowid, name, when_to_use, steps)
    VALUES ('delete', old.seq, old.name, old.when_to_use, old.steps);
END;
CREATE TRIGGER skills_fts_update AFTER UPDATE OF name, when_to_use, steps ON skills BEGIN
    INSERT INTO skills_fts (skills_fts, rowid, name, when_to_use, steps)
    VALUES ('delete', old.seq, old.name, old.when_to_use, old.steps);
    INSERT INTO skills_fts (rowid, name, when_to_use, steps)
    VALUES (new.seq, new.name, new.when_to_use, new.steps);
END;
CREATE VIRTUAL TABLE skill_vectors USING vec0 (embedding float[{dim}] distance_metric=cosine);
