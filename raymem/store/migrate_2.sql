-- Version 2: which memories each turn gave, so recall can tell a turn whose
-- memories were all superseded (stale) or forgotten from a current one.
CREATE TABLE memory_sources (
    message_id TEXT NOT NULL,
    memory_seq INTEGER NOT NULL,
    PRIMARY KEY (message_id, memory_seq)
) WITHOUT ROWID;
CREATE INDEX memory_sources_by_memory ON memory_sources (memory_seq);

INSERT OR IGNORE INTO memory_sources (message_id, memory_seq)
    SELECT j.value, m.seq FROM memories m, json_each(m.source_message_ids) j;

CREATE TRIGGER memory_sources_insert AFTER INSERT ON memories BEGIN
    INSERT OR IGNORE INTO memory_sources (message_id, memory_seq)
        SELECT value, new.seq FROM json_each(new.source_message_ids);
END;
CREATE TRIGGER memory_sources_update AFTER UPDATE OF source_message_ids ON memories BEGIN
    DELETE FROM memory_sources WHERE memory_seq = old.seq;
    INSERT OR IGNORE INTO memory_sources (message_id, memory_seq)
        SELECT value, new.seq FROM json_each(new.source_message_ids);
END;
CREATE TRIGGER memory_sources_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_sources WHERE memory_seq = old.seq;
END;

-- Events and tasks by the day they happen or are due, for questions that name a period.
CREATE INDEX memories_by_event_time ON memories (event_time) WHERE event_time IS NOT NULL;
