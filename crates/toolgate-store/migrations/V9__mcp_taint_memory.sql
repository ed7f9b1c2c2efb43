-- What each MCP session (or stateless principal) was shown, for every instance
-- (crates/toolgate-mcp/src/shared_memory.rs): the taint sources a later call is checked against
-- wherever it lands. `entry` is a trusted result's JSON, or an untrusted text's source and
-- normalized text; the newest 64 of each kind per key are kept, for a day.
CREATE TABLE mcp_taint_memory (
    id BIGSERIAL PRIMARY KEY,
    memory_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    entry TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX mcp_taint_memory_by_key ON mcp_taint_memory (memory_key, kind, id);
CREATE INDEX mcp_taint_memory_by_age ON mcp_taint_memory (at);
