-- 2025-11-25 MCP sessions any instance can continue (crates/toolgate-mcp/src/http/shared_sessions.rs):
-- the parameters of the session's `initialize` (rmcp replays them to restore the session at an
-- instance that does not hold it) and the principal the session belongs to. A session older than
-- a day is not restored.
CREATE TABLE mcp_sessions (
    id TEXT PRIMARY KEY,
    state TEXT,
    owner_tenant TEXT,
    owner_id TEXT,
    opened_at BIGINT NOT NULL
);
CREATE INDEX mcp_sessions_by_age ON mcp_sessions (opened_at);
