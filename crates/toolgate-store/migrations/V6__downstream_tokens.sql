-- Each user's own OAuth tokens for the upstream MCP servers a gateway calls on their behalf
-- (crates/toolgate-mcp-client/src/vault.rs): one row per (holder, issuer, resource), the token
-- sealed (ChaCha20-Poly1305) under the key `key_id` names, with the row's place as associated
-- data. Nothing here is a token in clear. The same statement makes the table in a SQLite vault
-- (toolgate_store::schema::DOWNSTREAM_TOKENS), hence IF NOT EXISTS.
CREATE TABLE IF NOT EXISTS downstream_tokens (
    holder TEXT NOT NULL,
    issuer TEXT NOT NULL,
    resource TEXT NOT NULL,
    key_id TEXT NOT NULL,
    sealed TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (holder, issuer, resource)
);
