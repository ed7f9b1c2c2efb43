-- The approval inbox: a person's decision on a ticket (who, approve or decline, why, when),
-- recorded once, before the ticket expires or is used. Times are unix seconds, as in the SQLite
-- ledger, so both ledgers decide with the same pure function (toolgate_core::decidable).
-- Only tickets opened for the inbox are listed and decided there (`inbox`); a ticket answered
-- through the host is not.
ALTER TABLE approval_tickets
    ADD COLUMN inbox BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN decided_by TEXT,
    ADD COLUMN approved BOOLEAN,
    ADD COLUMN decision_reason TEXT,
    ADD COLUMN decided_at BIGINT;
-- The inbox lists the open tickets newest first.
CREATE INDEX approval_tickets_inbox ON approval_tickets (issued_at DESC)
    WHERE inbox AND used_at IS NULL AND decided_by IS NULL;
