-- The egress exit's decisions in the audit (crates/toolgate-store/src/audit/egress.rs): one row
-- per request that left, or tried to leave, on a tool's behalf, allowed or blocked, tied to the
-- call whose handler made it when one did (a notification or an import's session check at
-- start is made by none). The same columns as a SQLite audit file's `egress_decisions`; `record`
-- holds the exit's trace event whole.
CREATE TABLE egress_decisions (
    id BIGSERIAL PRIMARY KEY,
    time_unix_ms BIGINT NOT NULL,
    instance TEXT NOT NULL,
    call_id TEXT,
    run_id TEXT,
    decision TEXT NOT NULL,
    method TEXT,
    scheme TEXT,
    host TEXT,
    port BIGINT,
    url TEXT,
    status BIGINT,
    rule TEXT,
    reason TEXT,
    error TEXT,
    record JSONB NOT NULL
);
CREATE INDEX egress_by_call ON egress_decisions (call_id, run_id) WHERE call_id IS NOT NULL;
CREATE INDEX egress_by_time ON egress_decisions (time_unix_ms, id);
