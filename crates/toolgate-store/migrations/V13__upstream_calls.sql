-- A gateway call's requests to its imported MCP servers in the audit
-- (crates/toolgate-store/src/audit/upstream.rs): which server, the server's own tool name, how
-- the request ended and how long it took, tied to the call that sent it. The same columns as a
-- SQLite audit file's `upstream_calls`; `record` holds the trace event whole. A toolgate
-- server behind the gateway records the gateway's call (`RUN/CALL`) as the parent_call_id of
-- the calls it dispatches, so the index on decisions' parent_call_id finds them.
CREATE TABLE upstream_calls (
    id BIGSERIAL PRIMARY KEY,
    time_unix_ms BIGINT NOT NULL,
    instance TEXT NOT NULL,
    call_id TEXT,
    run_id TEXT,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    duration_ms BIGINT NOT NULL,
    record JSONB NOT NULL
);
CREATE INDEX upstream_by_call ON upstream_calls (run_id, call_id) WHERE call_id IS NOT NULL;
CREATE INDEX decisions_by_parent_reference ON decisions (parent_call_id)
    WHERE parent_call_id IS NOT NULL;
