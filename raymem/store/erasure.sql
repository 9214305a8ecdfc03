-- Erasure: an erased memory stays in its version chain as a tombstone, its text emptied.
ALTER TABLE memories ADD COLUMN erased_at TEXT;
