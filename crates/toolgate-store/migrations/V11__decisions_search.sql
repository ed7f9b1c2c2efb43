-- What the audit search asks of the decision records (crates/toolgate-store/src/audit): who
-- answered an approval and why a denied call was denied, in columns of their own, and an
-- index for every filter, each ending in (time_unix_ms, id) so that newest-first pages are read
-- straight from the index with a keyset bound (no OFFSET scans). Rows written before keep their
-- values: the two new columns are filled from the stored record.
ALTER TABLE decisions ADD COLUMN denial TEXT;
ALTER TABLE decisions ADD COLUMN decided_by TEXT;
UPDATE decisions
   SET denial = record->'approval'->'denial'->>'kind',
       decided_by = record->>'decided_by'
 WHERE approval = 'denied' OR record->>'decided_by' IS NOT NULL;
CREATE INDEX decisions_by_time ON decisions (time_unix_ms, id);
CREATE INDEX decisions_by_principal_time ON decisions (principal, time_unix_ms, id);
CREATE INDEX decisions_by_tool_time ON decisions (tool, time_unix_ms, id);
CREATE INDEX decisions_by_outcome_time ON decisions (outcome, time_unix_ms, id);
CREATE INDEX decisions_by_approval_time ON decisions (approval, time_unix_ms, id);
CREATE INDEX decisions_by_decider_time ON decisions (decided_by, time_unix_ms, id)
    WHERE decided_by IS NOT NULL;
CREATE INDEX decisions_by_parent ON decisions (run_id, parent_call_id)
    WHERE parent_call_id IS NOT NULL;
-- Superseded: the tool index above serves every query this one did, with the keyset's id.
DROP INDEX decisions_by_tool;
