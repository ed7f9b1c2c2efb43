-- The decision records of every instance, as a queryable audit table: one row per call the
-- dispatcher decided (crates/toolgate-core/src/call.rs, DecisionRecord). The JSONL trace stays
-- beside it; `record` holds the record whole, the columns what is asked of it most.
CREATE TABLE decisions (
    id BIGSERIAL PRIMARY KEY,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    time_unix_ms BIGINT NOT NULL,
    instance TEXT NOT NULL,
    call_id TEXT NOT NULL,
    parent_call_id TEXT,
    run_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    principal TEXT NOT NULL,
    tool TEXT NOT NULL,
    tool_version BIGINT,
    origin TEXT NOT NULL,
    risk TEXT,
    stage TEXT NOT NULL,
    outcome TEXT NOT NULL,
    approval TEXT NOT NULL,
    idempotency_key TEXT,
    duplicate BOOLEAN NOT NULL,
    record JSONB NOT NULL
);
CREATE INDEX decisions_by_principal ON decisions (tenant, principal, time_unix_ms);
CREATE INDEX decisions_by_tool ON decisions (tool, time_unix_ms);
CREATE INDEX decisions_by_call ON decisions (call_id);
