//! Action items in meeting notes: what `create_todos_from_meeting` turns into to-dos. Pure.
//!
//! The format. One action item per line; leading spaces are ignored. A line is an action item
//! when it is
//!
//! - an open Markdown checkbox: `- [ ] Send the summary to finance` (also `* [ ]`, `+ [ ]`);
//!   a checked box (`- [x]`) is already done and is not an item;
//! - or starts with `TODO:`, `Action:` or `Action item:` (any case), optionally after a
//!   bullet: `- Action: Marco books the usability lab`.
//!
//! The item is the rest of the line, trimmed. Its due date is the first `YYYY-MM-DD` date in it
//! (`… by 2025-12-09`); the text keeps the date. Lines inside fenced code blocks (```` ``` ````
//! or `~~~`) are never items. The same item twice (ignoring case and spacing) is one item.
//!
//! Guarantees: the parser never fails; it returns the items in the order written.

use toolgate_core::schema::is_iso_date;

/// One action item of a meeting note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionItem {
    /// The item as written, without its checkbox or marker.
    pub text: String,
    /// The first `YYYY-MM-DD` date in the text.
    pub due: Option<String>,
    /// The line it was on, counted from 1 at the top of the body.
    pub line: usize,
}

const MARKERS: [&str; 3] = ["action item:", "action:", "todo:"];

/// What identifies an item when looking for one already made: lower-case, single spaces.
pub fn item_key(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The first calendar date written `YYYY-MM-DD` in `text` that is not part of a longer run
/// of digits.
pub fn first_date(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(9)).find_map(|i| {
        let candidate = text.get(i..i + 10)?;
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_digit();
        let after_ok = bytes.get(i + 10).is_none_or(|b| !b.is_ascii_digit());
        (before_ok && after_ok && is_iso_date(candidate)).then(|| candidate.to_string())
    })
}

/// Strips a leading bullet (`-`, `*`, `+` and a space).
fn strip_bullet(line: &str) -> Option<&str> {
    ["- ", "* ", "+ "]
        .iter()
        .find_map(|b| line.strip_prefix(b))
        .map(str::trim_start)
}

/// The item text on `line` (already trimmed), if the line is an action item.
fn item_text(line: &str) -> Option<&str> {
    if let Some(rest) = strip_bullet(line) {
        if let Some(text) = rest.strip_prefix("[ ]") {
            return Some(text.trim());
        }
        if rest.starts_with("[x]") || rest.starts_with("[X]") {
            return None;
        }
        return marked(rest);
    }
    marked(line)
}

fn marked(text: &str) -> Option<&str> {
    let lower = text.to_ascii_lowercase();
    MARKERS
        .iter()
        .find(|m| lower.starts_with(*m))
        .and_then(|m| text.get(m.len()..))
        .map(str::trim)
}

/// The open action items of a meeting note's body; see the module documentation.
pub fn parse_action_items(body: &str) -> Vec<ActionItem> {
    let mut items: Vec<ActionItem> = Vec::new();
    let mut fence: Option<&str> = None;
    for (index, raw) in body.lines().enumerate() {
        let line = raw.trim();
        if let Some(open) = fence {
            if line.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if let Some(open) = ["```", "~~~"].into_iter().find(|f| line.starts_with(f)) {
            fence = Some(open);
            continue;
        }
        let Some(text) = item_text(line).filter(|t| !t.is_empty()) else {
            continue;
        };
        let key = item_key(text);
        if items.iter().any(|i| item_key(&i.text) == key) {
            continue;
        }
        items.push(ActionItem {
            text: text.to_string(),
            due: first_date(text),
            line: index + 1,
        });
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(body: &str) -> Vec<(String, Option<String>)> {
        parse_action_items(body)
            .into_iter()
            .map(|i| (i.text, i.due))
            .collect()
    }

    /// (case, meeting body, expected (item text, due date) pairs)
    type ItemCase = (
        &'static str,
        &'static str,
        Vec<(&'static str, Option<&'static str>)>,
    );

    #[test]
    fn action_item_table_finds_every_documented_form_and_nothing_else() {
        let cases: Vec<ItemCase> = vec![
            (
                "an open checkbox",
                "- [ ] Send deck",
                vec![("Send deck", None)],
            ),
            (
                "star and plus bullets, indented",
                "  * [ ] A\n\t+ [ ] B",
                vec![("A", None), ("B", None)],
            ),
            (
                "a checked box is done, not an item",
                "- [x] Done\n- [X] Also",
                vec![],
            ),
            (
                "TODO and Action markers in any case, with or without a bullet",
                "TODO: one\n- action: two\nAction item: three\ntodo:four",
                vec![
                    ("one", None),
                    ("two", None),
                    ("three", None),
                    ("four", None),
                ],
            ),
            (
                "the due date is the first ISO date in the item",
                "- [ ] Lena sends the summary by 2025-12-09 (not 2025-12-10)",
                vec![(
                    "Lena sends the summary by 2025-12-09 (not 2025-12-10)",
                    Some("2025-12-09"),
                )],
            ),
            (
                "an impossible or embedded date is not a due date",
                "- [ ] ship 2025-02-30\n- [ ] ref 12025-01-011",
                vec![("ship 2025-02-30", None), ("ref 12025-01-011", None)],
            ),
            (
                "plain bullets, prose mentioning todo, and empty items are not items",
                "- Budget settled\nWe said todo: later is fine\n- [ ]   \nTODO:",
                vec![],
            ),
            (
                "items inside code fences are ignored",
                "```\n- [ ] not me\n```\n~~~\nTODO: nor me\n~~~\n- [ ] me",
                vec![("me", None)],
            ),
            (
                "the same item twice is one item",
                "- [ ] Book the lab\nTODO: book  the LAB",
                vec![("Book the lab", None)],
            ),
        ];
        for (name, body, want) in cases {
            let want: Vec<(String, Option<String>)> = want
                .into_iter()
                .map(|(t, d)| (t.to_string(), d.map(str::to_string)))
                .collect();
            assert_eq!(texts(body), want, "{name}");
        }
    }

    #[test]
    fn items_remember_their_line() {
        let items = parse_action_items("# Sync\n\nNotes\n- [ ] first\n\nTODO: second");
        let lines: Vec<usize> = items.iter().map(|i| i.line).collect();
        assert_eq!(lines, [4, 6]);
    }
}
