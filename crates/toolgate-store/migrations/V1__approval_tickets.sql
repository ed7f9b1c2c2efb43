-- Approval tickets shared by every instance: issued for one binding and one holder (the
-- principal's tenant and id), expiring, redeemed at most once. Times are unix seconds, as in
-- the SQLite ledger, so both ledgers decide with the same pure function.
CREATE TABLE approval_tickets (
    token TEXT PRIMARY KEY,
    binding TEXT NOT NULL,
    holder TEXT NOT NULL,
    tool TEXT NOT NULL,
    request JSONB NOT NULL,
    issued_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE INDEX approval_tickets_open ON approval_tickets (expires_at) WHERE used_at IS NULL;
