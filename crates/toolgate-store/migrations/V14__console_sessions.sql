-- The approval console's sign-in sessions and its sign-ins under way, shared by every instance
-- on this database (crates/toolgate-console/src/shared_sessions.rs), so a callback or a signed-in
-- request that reaches another instance behind the load balancer finds them.
-- Only SHA-256 digests of the session id, the OAuth state and the login cookie's binder are
-- kept: a reader of this database cannot sign in as anyone or finish someone's sign-in. Expiry
-- is in Unix milliseconds by the instances' clocks; expired rows are purged as new ones come.
CREATE TABLE console_sessions (
    id_hash TEXT PRIMARY KEY,
    principal JSONB NOT NULL,
    csrf TEXT NOT NULL,
    expires_unix_ms BIGINT NOT NULL
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_unix_ms);
CREATE TABLE console_logins (
    state_hash TEXT PRIMARY KEY,
    verifier TEXT NOT NULL,
    binder_hash TEXT NOT NULL,
    expires_unix_ms BIGINT NOT NULL
);
CREATE INDEX console_logins_by_expiry ON console_logins (expires_unix_ms);
