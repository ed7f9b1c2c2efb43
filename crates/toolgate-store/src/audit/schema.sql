-- The audit table of a SQLite audit file: the same columns as PostgreSQL's `decisions`
-- (migrations V4, V7, V11) and the same indexes, each ending in (time_unix_ms, id) for
-- newest-first keyset pages.
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    time_unix_ms INTEGER NOT NULL,
    instance TEXT NOT NULL,
    call_id TEXT NOT NULL,
    parent_call_id TEXT,
    run_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    principal TEXT NOT NULL,
    tool TEXT NOT NULL,
    tool_version INTEGER,
    origin TEXT NOT NULL,
    risk TEXT,
    stage TEXT NOT NULL,
    outcome TEXT NOT NULL,
    approval TEXT NOT NULL,
    denial TEXT,
    decided_by TEXT,
    idempotency_key TEXT,
    duplicate INTEGER NOT NULL,
    catalogue_digest TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_by_time ON decisions (time_unix_ms, id);
CREATE INDEX IF NOT EXISTS decisions_by_principal ON decisions (tenant, principal, time_unix_ms);
CREATE INDEX IF NOT EXISTS decisions_by_principal_time ON decisions (principal, time_unix_ms, id);
CREATE INDEX IF NOT EXISTS decisions_by_tool_time ON decisions (tool, time_unix_ms, id);
CREATE INDEX IF NOT EXISTS decisions_by_outcome_time ON decisions (outcome, time_unix_ms, id);
CREATE INDEX IF NOT EXISTS decisions_by_approval_time ON decisions (approval, time_unix_ms, id);
CREATE INDEX IF NOT EXISTS decisions_by_decider_time ON decisions (decided_by, time_unix_ms, id)
    WHERE decided_by IS NOT NULL;
CREATE INDEX IF NOT EXISTS decisions_by_call ON decisions (call_id);
CREATE INDEX IF NOT EXISTS decisions_by_parent ON decisions (run_id, parent_call_id)
    WHERE parent_call_id IS NOT NULL;

-- The egress exit's decisions (allowed or blocked), each tied to the call whose handler made
-- the request when one did: PostgreSQL's `egress_decisions` (migration V12), same columns.
CREATE TABLE IF NOT EXISTS egress_decisions (
    id INTEGER PRIMARY KEY,
    time_unix_ms INTEGER NOT NULL,
    instance TEXT NOT NULL,
    call_id TEXT,
    run_id TEXT,
    decision TEXT NOT NULL,
    method TEXT,
    scheme TEXT,
    host TEXT,
    port INTEGER,
    url TEXT,
    status INTEGER,
    rule TEXT,
    reason TEXT,
    error TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS egress_by_call ON egress_decisions (call_id, run_id)
    WHERE call_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS egress_by_time ON egress_decisions (time_unix_ms, id);

-- A gateway call's requests to its imported MCP server (which server, its tool, how it ended,
-- how long), each tied to the call that sent it: PostgreSQL's `upstream_calls` (migration V13).
CREATE TABLE IF NOT EXISTS upstream_calls (
    id INTEGER PRIMARY KEY,
    time_unix_ms INTEGER NOT NULL,
    instance TEXT NOT NULL,
    call_id TEXT,
    run_id TEXT,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS upstream_by_call ON upstream_calls (run_id, call_id)
    WHERE call_id IS NOT NULL;
