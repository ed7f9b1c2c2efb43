//! The floors hold: every workspace crate's toolgate dependencies are among those its row of the
//! floor table in `docs/architecture.md` allows, and every crate has a row. A new arrow pointing
//! up or sideways (say the MCP server importing a toolset) fails here until the design and its
//! table say otherwise; the table can never drift from the crates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a row allows: any floor below (the CLI), or these crates.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    EveryFloorBelow,
    Crates(BTreeSet<String>),
}

/// The floor table's rows: crate name -> what it may import. Short names in the table
/// (`core`, `mcp-client`) are the crates' names without `toolgate-`; a parenthesised remark
/// (`egress (notes)`) is dropped.
fn floor_table(markdown: &str) -> BTreeMap<String, Allowed> {
    let section = markdown
        .split("## The floors today")
        .nth(1)
        .expect("docs/architecture.md has a section `## The floors today`");
    let mut rows = BTreeMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | floor | crate | may import | rule |  -> ["", floor, crate, imports, rule, ""]
        if cells.len() < 5 || !cells[2].contains('`') {
            continue;
        }
        let allowed = match cells[3] {
            "every floor below" => Allowed::EveryFloorBelow,
            "none" => Allowed::Crates(BTreeSet::new()),
            list => Allowed::Crates(
                list.split(',')
                    .map(|name| {
                        let name = name.split('(').next().unwrap().trim();
                        format!("toolgate-{name}")
                    })
                    .collect(),
            ),
        };
        // The crate names are the cell's back-quoted words: "`toolgate` (CLI)".
        for name in cells[2].split('`').skip(1).step_by(2) {
            rows.insert(name.to_string(), allowed.clone());
        }
    }
    rows
}

/// Every workspace crate's toolgate dependencies (normal dependencies: a test may use a crate
/// above, as the client's tests start our own server).
fn crate_dependencies(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut crates = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let parsed: toml::Table = text.parse().unwrap();
        let name = parsed["package"]["name"].as_str().unwrap().to_string();
        let deps = parsed
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .map(|t| {
                t.keys()
                    .filter(|k| k.starts_with("toolgate"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        crates.insert(name, deps);
    }
    crates
}

/// What breaks the floors: crates without a row, and dependencies a row does not allow.
fn floor_violations(
    table: &BTreeMap<String, Allowed>,
    crates: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, deps) in crates {
        match table.get(name) {
            None if name == "toolgate-mcp-bench" || name == "toolgate-otlp-receiver" => {}
            None => problems.push(format!("{name} has no row in the floor table")),
            Some(Allowed::EveryFloorBelow) => {}
            Some(Allowed::Crates(allowed)) => {
                for dep in deps.difference(allowed) {
                    problems.push(format!(
                        "{name} imports {dep}, which its row of the floor table does not allow"
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn every_crate_imports_only_what_its_floor_allows() {
    let root = repo_root();
    let markdown = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let table = floor_table(&markdown);
    assert!(table.len() >= 14, "the floor table was not read: {table:?}");
    let crates = crate_dependencies(&root);
    assert!(crates.contains_key("toolgate-core") && crates.contains_key("toolgate-mcp"));
    let problems = floor_violations(&table, &crates);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn an_upward_or_unlisted_arrow_is_found() {
    let table = floor_table(
        "## The floors today\n\n| floor | crate | may import | rule |\n| --- | --- | --- | --- |\n\
         | front | `toolgate` (CLI) | every floor below | x |\n\
         | protocol | `toolgate-mcp` | wiring, egress (http), core | x |\n\
         | toolsets | `toolgate-notes`, `toolgate-books` | core | x |\n\
         | contract | `toolgate-core` | none | x |\n\n## Next\n| a | `toolgate-x` | none | y |\n",
    );
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    let cases = [
        (
            "toolgate-mcp",
            set(&["toolgate-wiring", "toolgate-egress"]),
            0,
        ),
        ("toolgate-mcp", set(&["toolgate-notes"]), 1),
        ("toolgate-books", set(&["toolgate-core"]), 0),
        ("toolgate-core", set(&["toolgate-store"]), 1),
        ("toolgate", set(&["toolgate-mcp", "toolgate-core"]), 0),
        ("toolgate-unlisted", set(&[]), 1),
        ("toolgate-x", set(&[]), 1),
    ];
    for (name, deps, expected) in cases {
        let crates = BTreeMap::from([(name.to_string(), deps)]);
        assert_eq!(
            floor_violations(&table, &crates).len(),
            expected,
            "{name}: {:?}",
            floor_violations(&table, &crates)
        );
    }
}
