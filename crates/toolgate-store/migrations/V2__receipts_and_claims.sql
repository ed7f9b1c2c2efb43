-- Receipts and claims of writes, in the same database as the toolsets' data so that a write and
-- its receipt commit in one transaction (crates/toolgate-core/src/idempotency.rs). The columns
-- are those of the SQLite stores' tables; times are unix seconds.
CREATE TABLE tool_receipts (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    undo TEXT,
    created_at BIGINT NOT NULL
);
CREATE TABLE tool_claims (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    what_to_check TEXT NOT NULL,
    claimed_at BIGINT NOT NULL
);
