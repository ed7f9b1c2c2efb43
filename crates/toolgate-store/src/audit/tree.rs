//! A call and the calls made from inside it (a `code_execution` call's tool calls, a tool's
//! nested calls), assembled from rows: each row hangs under the row whose call id is its
//! `parent_call_id`.
//!
//! Guarantees: every row given appears at most once; a row whose parent is not in the tree is
//! left out (the caller reads only descendants); a cycle in malformed rows cannot loop.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::row::AuditEntry;

/// A call and its nested calls, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallTree {
    pub entry: AuditEntry,
    pub children: Vec<CallTree>,
}

impl CallTree {
    /// The tree under `root` from `descendants` (rows of the same run, in any order).
    pub fn assemble(root: AuditEntry, descendants: Vec<AuditEntry>) -> CallTree {
        let mut by_parent: HashMap<String, Vec<AuditEntry>> = HashMap::new();
        for entry in descendants {
            if let Some(parent) = entry.parent_call_id.clone() {
                by_parent.entry(parent).or_default().push(entry);
            }
        }
        for siblings in by_parent.values_mut() {
            siblings.sort_by_key(|e| (e.time_unix_ms, e.id));
        }
        let mut seen = HashSet::from([root.id]);
        grow(root, &mut by_parent, &mut seen)
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
    by_parent: &mut HashMap<String, Vec<AuditEntry>>,
    seen: &mut HashSet<i64>,
) -> CallTree {
    let kids = by_parent.remove(&entry.call_id).unwrap_or_default();
    let mut children = Vec::with_capacity(kids.len());
    for kid in kids {
        if seen.insert(kid.id) {
            children.push(grow(kid, by_parent, seen));
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
        ];
        for (rows, expected) in cases {
            let tree = CallTree::assemble(entry(1, "c", None), rows);
            assert_eq!(shape(&tree), expected);
            assert_eq!(tree.len(), tree.entries().len());
        }
    }
}
