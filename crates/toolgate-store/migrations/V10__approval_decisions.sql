-- The approval inbox: a person's decision on a ticket (who, approve or decline, why, when),
-- recorded once, before the ticket expires or is used. Times are unix seconds, as in the SQLite
-- ledger, so both ledgers decide with the same pure function (toolgate_core::decidable).
ALTER TABLE approval_tickets
    ADD COLUMN decided_by TEXT,
    ADD COLUMN approved BOOLEAN,
    ADD COLUMN decision_reason TEXT,
    ADD COLUMN decided_at BIGINT;
-- The inbox lists the open tickets newest first.
CREATE INDEX approval_tickets_inbox ON approval_tickets (issued_at DESC)
    WHERE used_at IS NULL AND decided_by IS NULL;
