//! A call and the calls made from inside it (a `code_execution` call's tool calls, a tool's
//! nested calls, and the calls a toolgate server behind a gateway dispatched for it), assembled
//! from rows: each row hangs under the row of its run whose call id is its `parent_call_id`,
//! or, when that names another process's call by reference (`RUN/CALL/NONCE`,
//! [`super::upstream::parent_reference`]), under the row whose own upstream leg sent exactly
//! that reference ([`UpstreamEntry::reference`]).
//!
//! Guarantees: every row given appears at most once; a row whose parent is not in the tree is
//! left out (the caller reads only descendants); a call id reused by another run is never
//! taken for the parent; a row recorded by reference hangs only under the call (same run, same
//! recording instance) whose leg recorded that reference, never under one whose run and call
//! id the reference merely spells, so a client that guesses a run and call id (or sends the
//! right form with a wrong nonce) hangs nothing under another principal's call; a cycle in
//! malformed rows cannot loop.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::row::AuditEntry;
use super::upstream::UpstreamEntry;

/// Where a row hangs: a local parent by run and call id; one named by reference by the
/// reference alone (claimed by the leg that sent it).
type ParentKey = (Option<String>, String);

/// A call as its legs name it: instance, run id, call id.
type LegKey = (String, String, String);

fn parent_key(entry: &AuditEntry) -> Option<ParentKey> {
    let parent = entry.parent_call_id.clone()?;
    Some(if parent.contains('/') {
        (None, parent)
    } else {
        (Some(entry.run_id.clone()), parent)
    })
}

/// A call and its nested calls, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallTree {
    pub entry: AuditEntry,
    pub children: Vec<CallTree>,
}

impl CallTree {
    /// The tree under `root` from `descendants` (rows of its run, and of other runs naming
    /// calls by reference, in any order) and `legs` (the upstream legs the tree's calls sent:
    /// the only source of which reference belongs to which call).
    pub fn assemble(
        root: AuditEntry,
        descendants: Vec<AuditEntry>,
        legs: &[UpstreamEntry],
    ) -> CallTree {
        let mut by_parent: HashMap<ParentKey, Vec<AuditEntry>> = HashMap::new();
        for entry in descendants {
            if let Some(key) = parent_key(&entry) {
                by_parent.entry(key).or_default().push(entry);
            }
        }
        for siblings in by_parent.values_mut() {
            siblings.sort_by_key(|e| (e.time_unix_ms, e.id));
        }
        let mut sent: HashMap<LegKey, Vec<String>> = HashMap::new();
        for leg in legs {
            if let (Some(run), Some(call), Some(reference)) =
                (&leg.run_id, &leg.call_id, &leg.reference)
            {
                sent.entry((leg.instance.clone(), run.clone(), call.clone()))
                    .or_default()
                    .push(reference.clone());
            }
        }
        let mut seen = HashSet::from([root.id]);
        grow(root, &mut by_parent, &sent, &mut seen)
    }

    /// How many calls the tree holds, itself included.
    pub fn len(&self) -> usize {
        1 + self.children.iter().map(CallTree::len).sum::<usize>()
    }

    /// Never empty: a tree holds at least its root.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Every entry, depth first (the root, then each child's subtree in order).
    pub fn entries(&self) -> Vec<&AuditEntry> {
        let mut out = vec![&self.entry];
        for child in &self.children {
            out.extend(child.entries());
        }
        out
    }
}

fn grow(
    entry: AuditEntry,
    by_parent: &mut HashMap<ParentKey, Vec<AuditEntry>>,
    sent: &HashMap<LegKey, Vec<String>>,
    seen: &mut HashSet<i64>,
) -> CallTree {
    let mut kids = by_parent
        .remove(&(Some(entry.run_id.clone()), entry.call_id.clone()))
        .unwrap_or_default();
    let own = (
        entry.instance.clone(),
        entry.run_id.clone(),
        entry.call_id.clone(),
    );
    // Only the references this call's own legs sent; each is claimed once.
    for reference in sent.get(&own).into_iter().flatten() {
        if let Some(more) = by_parent.remove(&(None, reference.clone())) {
            kids.extend(more);
        }
    }
    kids.sort_by_key(|e| (e.time_unix_ms, e.id));
    let mut children = Vec::with_capacity(kids.len());
    for kid in kids {
        if seen.insert(kid.id) {
            children.push(grow(kid, by_parent, sent, seen));
        }
    }
    CallTree { entry, children }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64, call: &str, parent: Option<&str>) -> AuditEntry {
        AuditEntry {
            id,
            time_unix_ms: id,
            instance: "i".into(),
            call_id: call.into(),
            parent_call_id: parent.map(str::to_owned),
            run_id: "r".into(),
            tenant: String::new(),
            principal: "p".into(),
            tool: "t".into(),
            origin: "loop".into(),
            outcome: "ok".into(),
            approval: "not_needed".into(),
            denial: None,
            decided_by: None,
            record: serde_json::Value::Null,
        }
    }

    fn in_run(id: i64, call: &str, parent: Option<&str>, run: &str) -> AuditEntry {
        AuditEntry {
            run_id: run.into(),
            ..entry(id, call, parent)
        }
    }

    fn shape(tree: &CallTree) -> String {
        if tree.children.is_empty() {
            return tree.entry.call_id.clone();
        }
        let kids: Vec<String> = tree.children.iter().map(shape).collect();
        format!("{}[{}]", tree.entry.call_id, kids.join(","))
    }

    #[test]
    fn rows_hang_under_their_parent_in_time_order() {
        let cases: Vec<(Vec<AuditEntry>, &str)> = vec![
            (vec![], "c"),
            (
                vec![entry(3, "c.2", Some("c")), entry(2, "c.1", Some("c"))],
                "c[c.1,c.2]",
            ),
            (
                vec![
                    entry(2, "c.1", Some("c")),
                    entry(4, "c.1.1", Some("c.1")),
                    entry(3, "c.2", Some("c")),
                ],
                "c[c.1[c.1.1],c.2]",
            ),
            // Not under the root: left out.
            (vec![entry(5, "x.1", Some("x"))], "c"),
            // A malformed cycle (a row naming its own call as parent) cannot loop.
            (
                vec![entry(2, "c.1", Some("c")), entry(3, "c.1", Some("c.1"))],
                "c[c.1[c.1]]",
            ),
            // A call of another run naming `c` by its bare id is not taken for `c`'s child.
            (vec![in_run(6, "x", Some("c"), "r3")], "c"),
        ];
        for (rows, expected) in cases {
            let tree = CallTree::assemble(entry(1, "c", None), rows, &[]);
            assert_eq!(shape(&tree), expected);
            assert_eq!(tree.len(), tree.entries().len());
        }
    }

    /// A leg `instance` recorded from inside call `call` of run `run`, having sent `reference`.
    fn leg(
        id: i64,
        instance: &str,
        run: &str,
        call: &str,
        reference: Option<&str>,
    ) -> UpstreamEntry {
        UpstreamEntry {
            id,
            time_unix_ms: id,
            instance: instance.into(),
            call_id: Some(call.into()),
            run_id: Some(run.into()),
            server: "up".into(),
            tool: "t".into(),
            outcome: "ok".into(),
            duration_ms: 1,
            reference: reference.map(str::to_owned),
        }
    }

    #[test]
    fn a_call_naming_another_runs_call_without_its_legs_reference_is_not_hung_under_it() {
        const REAL: &str = "r/c/0123456789abcdef0123456789abcdef";
        const WRONG_NONCE: &str = "r/c/ffffffffffffffffffffffffffffffff";
        let sent = || vec![leg(1, "i", "r", "c", Some(REAL))];
        let cases: Vec<(&str, Vec<AuditEntry>, Vec<UpstreamEntry>, &str)> = vec![
            (
                "the real one: the upstream's call (with its own nested call) hangs under the \
                 call whose leg sent the reference, in time order with local children",
                vec![
                    in_run(4, "u1", Some(REAL), "r2"),
                    in_run(5, "u1.1", Some("u1"), "r2"),
                    entry(2, "c.1", Some("c")),
                ],
                sent(),
                "c[c.1,u1[u1.1]]",
            ),
            (
                "a guessed RUN/CALL without a nonce",
                vec![in_run(4, "f", Some("r/c"), "r3")],
                sent(),
                "c",
            ),
            (
                "the right form with a wrong nonce",
                vec![in_run(4, "f", Some(WRONG_NONCE), "r3")],
                sent(),
                "c",
            ),
            (
                "the real one beside a forged one: only the real one hangs",
                vec![
                    in_run(4, "u1", Some(REAL), "r2"),
                    in_run(5, "f", Some(WRONG_NONCE), "r3"),
                    in_run(6, "g", Some("r/c"), "r3"),
                ],
                sent(),
                "c[u1]",
            ),
            (
                "a reference no leg of the call recorded (the call sent none)",
                vec![in_run(4, "u1", Some(REAL), "r2")],
                vec![],
                "c",
            ),
            (
                "a leg recorded before references carried a nonce claims nothing",
                vec![in_run(4, "u1", Some("r/c"), "r2")],
                vec![leg(1, "i", "r", "c", None)],
                "c",
            ),
            (
                "another instance's leg under the same run and call id lends its reference to \
                 no one here",
                vec![in_run(4, "u1", Some(REAL), "r2")],
                vec![leg(1, "other", "r", "c", Some(REAL))],
                "c",
            ),
            (
                "a nested call's leg claims for the nested call, not for the root",
                vec![
                    entry(2, "c.1", Some("c")),
                    in_run(4, "u1", Some(REAL), "r2"),
                ],
                vec![leg(1, "i", "r", "c.1", Some(REAL))],
                "c[c.1[u1]]",
            ),
        ];
        for (name, rows, legs, expected) in cases {
            let tree = CallTree::assemble(entry(1, "c", None), rows, &legs);
            assert_eq!(shape(&tree), expected, "{name}");
        }
    }
}
