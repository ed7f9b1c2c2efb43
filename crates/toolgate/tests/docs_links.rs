//! The documentation has no dead internal link: every relative link, image and `{{#include}}` in
//! the README, the design, the contributors' guide, `evals/README.md` and the book under `docs/`
//! names a file that exists, every `#anchor` names a heading of its target (as mdBook and GitHub
//! spell heading ids), every book page is listed in `docs/SUMMARY.md`, every page the summary
//! lists exists, and every committed run folder is indexed in `evals/README.md`.
//! External links (`http:`, `https:`, `mailto:`) are not fetched: no network in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files whose links are checked, relative to the repository's root.
fn documentation_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "CONTRIBUTING.md",
        "evals/README.md",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| root.join(p).exists())
    .collect();
    let mut book: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| PathBuf::from("docs").join(p.file_name().unwrap()))
        .collect();
    book.sort();
    files.extend(book);
    files
}

/// A heading's id as mdBook and GitHub make it: lower case, spaces to hyphens, other
/// punctuation dropped (letters, digits, `-` and `_` kept).
fn heading_id(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The ids of `markdown`'s headings, with the included files' headings (an `{{#include}}` puts
/// them on the page), numbered on repeats as mdBook does (`x`, `x-1`, ...).
fn heading_ids(markdown: &str, dir: &Path) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let add = |id: String, ids: &mut BTreeSet<String>| {
        let mut candidate = id.clone();
        let mut n = 1;
        while ids.contains(&candidate) {
            candidate = format!("{id}-{n}");
            n += 1;
        }
        ids.insert(candidate);
    };
    let mut text: Option<String> = None;
    for event in Parser::new_ext(markdown, Options::all()) {
        match event {
            Event::Start(Tag::Heading { .. }) => text = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(buf) = text.as_mut() {
                    buf.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(buf) = text.take() {
                    add(heading_id(&buf), &mut ids);
                }
            }
            _ => {}
        }
    }
    for include in includes(markdown) {
        if let Ok(body) = std::fs::read_to_string(dir.join(&include)) {
            for id in heading_ids(&body, dir.join(&include).parent().unwrap_or(dir)) {
                add(id, &mut ids);
            }
        }
    }
    ids
}

/// The paths of `{{#include PATH}}` directives (mdBook's), outside code blocks or inside them.
fn includes(markdown: &str) -> Vec<String> {
    markdown
        .match_indices("{{#include ")
        .filter_map(|(at, _)| {
            let rest = &markdown[at + "{{#include ".len()..];
            let end = rest.find("}}")?;
            Some(rest[..end].trim().split(':').next()?.to_string())
        })
        .collect()
}

/// Every link and image destination of `markdown`, in order.
fn destinations(markdown: &str) -> Vec<String> {
    Parser::new_ext(markdown, Options::all())
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect()
}

fn is_external(destination: &str) -> bool {
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| destination.starts_with(scheme))
}

/// What is wrong with one link of the file `from` (a path relative to `root`), if anything.
fn dead_link(root: &Path, from: &Path, destination: &str) -> Option<String> {
    if is_external(destination) {
        return None;
    }
    let (path, anchor) = match destination.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (destination, None),
    };
    let dir = root.join(from).parent().unwrap().to_path_buf();
    let target = if path.is_empty() {
        root.join(from)
    } else {
        dir.join(path)
    };
    if !target.exists() {
        return Some(format!("{destination}: no file {}", target.display()));
    }
    if let Some(anchor) = anchor
        && target.extension().is_some_and(|e| e == "md")
    {
        let body = std::fs::read_to_string(&target).unwrap();
        let ids = heading_ids(&body, target.parent().unwrap());
        if !ids.contains(anchor) {
            return Some(format!(
                "{destination}: {} has no heading with the id {anchor:?}",
                target.display()
            ));
        }
    }
    None
}

#[test]
fn no_documentation_file_has_a_dead_internal_link() {
    let root = repo_root();
    let files = documentation_files(&root);
    assert!(files.len() > 5, "found the documentation: {files:?}");
    let mut dead = Vec::new();
    for file in &files {
        let body = std::fs::read_to_string(root.join(file)).unwrap();
        for destination in destinations(&body) {
            if let Some(problem) = dead_link(&root, file, &destination) {
                dead.push(format!("{}: {problem}", file.display()));
            }
        }
        for include in includes(&body) {
            let target = root.join(file).parent().unwrap().join(&include);
            if !target.exists() {
                dead.push(format!(
                    "{}: include {include} does not exist",
                    file.display()
                ));
            }
        }
    }
    assert!(dead.is_empty(), "dead internal links:\n{}", dead.join("\n"));
}

#[test]
fn every_book_page_is_in_the_summary_and_every_listed_page_exists() {
    let root = repo_root();
    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = destinations(&summary).into_iter().collect();
    for page in &listed {
        assert!(
            root.join("docs").join(page).exists(),
            "SUMMARY.md lists {page}, which does not exist"
        );
    }
    for file in documentation_files(&root) {
        let Ok(in_book) = file.strip_prefix("docs") else {
            continue;
        };
        let name = in_book.to_string_lossy().to_string();
        if name == "SUMMARY.md" {
            continue;
        }
        assert!(
            listed.contains(&name),
            "docs/{name} is not in docs/SUMMARY.md, so the book would not show it"
        );
    }
}

#[test]
fn every_committed_run_folder_is_indexed_in_the_evals_readme() {
    let root = repo_root();
    let index = std::fs::read_to_string(root.join("evals/README.md")).unwrap();
    let mut unlisted = Vec::new();
    for entry in std::fs::read_dir(root.join("evals/runs")).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_string();
        if !index.contains(&format!("`{name}`")) {
            unlisted.push(name);
        }
    }
    assert!(
        unlisted.is_empty(),
        "evals/runs folders not in evals/README.md's table (say what each measured and where \
         it is discussed): {unlisted:?}"
    );
}

#[test]
fn heading_ids_are_spelled_as_the_book_spells_them() {
    let table = [
        ("The demo", "the-demo"),
        ("Security: `toolgate check`", "security-toolgate-check"),
        (
            "Tools from other MCP servers, under our policy",
            "tools-from-other-mcp-servers-under-our-policy",
        ),
        (
            "Raising the embedded model's success (issue 32)",
            "raising-the-embedded-models-success-issue-32",
        ),
        ("snake_case and hyphen-ated", "snake_case-and-hyphen-ated"),
    ];
    for (heading, id) in table {
        assert_eq!(heading_id(heading), id, "{heading}");
    }
}

#[test]
fn a_dead_link_or_a_missing_anchor_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.md"), "# Page A\n\n## The part\n\ntext\n").unwrap();
    std::fs::write(dir.path().join("b.md"), "# Page B\n").unwrap();
    let from = Path::new("b.md");
    let cases = [
        ("a.md", None),
        ("a.md#the-part", None),
        ("a.md#page-a", None),
        ("https://example.org/x.md", None),
        ("missing.md", Some("no file")),
        ("a.md#no-such-part", Some("no heading")),
        ("#page-b", None),
        ("#nowhere", Some("no heading")),
    ];
    for (destination, problem) in cases {
        let found = dead_link(dir.path(), from, destination);
        match problem {
            None => assert_eq!(found, None, "{destination}"),
            Some(words) => assert!(
                found.as_deref().is_some_and(|f| f.contains(words)),
                "{destination}: {found:?}"
            ),
        }
    }
    // A repeated heading gets a numbered id, as in the rendered book.
    let ids = heading_ids("# X\n\n## X\n", dir.path());
    assert!(ids.contains("x") && ids.contains("x-1"), "{ids:?}");
}
