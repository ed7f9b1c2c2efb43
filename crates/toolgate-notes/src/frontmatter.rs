//! Markdown notes with optional front matter: the file format of the importer and of the
//! bundled sample notebook. Pure: text in, a note or a precise reason out.
//!
//! The format. A file may start with a front-matter block: a line `---`, then `key: value`
//! lines, then a closing `---` line; everything after it is the body. Keys (lower-case):
//!
//! | key | value |
//! |---|---|
//! | `title` | text, at most 200 characters |
//! | `notebook` | text, e.g. `Work` |
//! | `tags` | `[a, b]`, `a, b`, or a block of `- a` lines under `tags:`; letters, digits, spaces, `-`, `_`; a leading `#` is dropped |
//! | `due` | `YYYY-MM-DD` |
//! | `created` (or `date`) | `YYYY-MM-DD` |
//! | `kind` | `note`, `todo`, `meeting` or `clip` |
//! | `source_url` | an `http://` or `https://` URL |
//! | `untrusted` | `true`/`false` (also `yes`/`no`) |
//! | `done` | `true`/`false`, only for `kind: todo` |
//!
//! Values may be wrapped in matching single or double quotes. Blank lines and lines starting
//! with `#` inside the block are ignored. An empty value is the same as leaving the key out.
//!
//! Defaults. Title: the first `# heading` of the body, else the file name. Notebook: the given
//! default (the importer passes the sub-folder name, else `Inbox`). Kind: `todo` when `due` is
//! set, else `note`. Created: the given fallback date. Untrusted: true for `kind: clip` (which
//! cannot be made trusted) and for any note with a `source_url`, unless `untrusted: false`.
//!
//! Guarantees: unknown keys, repeated keys, malformed lines, bad dates, bad tags and an
//! unclosed block are errors naming the line, never silently dropped.

use toolgate_core::schema::{closest, is_iso_date};

use crate::rows::{Kind, NewNote, join_tags, valid_tag};

/// Longest accepted title, in characters.
pub const TITLE_MAX_CHARS: usize = 200;

/// The keys a front-matter block may use.
pub const KEYS: [&str; 9] = [
    "title",
    "notebook",
    "tags",
    "due",
    "created",
    "kind",
    "source_url",
    "untrusted",
    "done",
];

/// The parsed front-matter block (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontMatter {
    pub title: Option<String>,
    pub notebook: Option<String>,
    pub tags: Vec<String>,
    pub due: Option<String>,
    pub created: Option<String>,
    pub kind: Option<Kind>,
    pub source_url: Option<String>,
    pub untrusted: Option<bool>,
    pub done: Option<bool>,
}

/// Why a front-matter block was refused. Lines are counted from 1 at the top of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    #[error("the front matter opened on line {opened_at} is never closed with a `---` line")]
    Unclosed { opened_at: usize },
    #[error("line {line}: expected `key: value`, found `{text}`")]
    NotKeyValue { line: usize, text: String },
    #[error("line {line}: unknown key `{key}`{}; known keys: {}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default(), KEYS.join(", "))]
    UnknownKey {
        line: usize,
        key: String,
        suggestion: Option<String>,
    },
    #[error("line {line}: `{key}` is given twice")]
    DuplicateKey { line: usize, key: String },
    #[error("line {line}: `{key}` must be {expected}, found `{got}`")]
    BadValue {
        line: usize,
        key: String,
        expected: &'static str,
        got: String,
    },
}

/// Why a Markdown file cannot become a note.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteFileError {
    #[error(transparent)]
    FrontMatter(#[from] FrontMatterError),
    #[error("the file has neither a title nor any text")]
    Empty,
    #[error("the title has {chars} characters; at most {TITLE_MAX_CHARS} are allowed")]
    TitleTooLong { chars: usize },
    #[error("`kind: clip` is web content and is always untrusted; remove `untrusted: false`")]
    TrustedClip,
    #[error("`done` applies only to `kind: todo`, and this note is a {kind}")]
    DoneWithoutTodo { kind: &'static str },
}

const DATE: &str = "a date written YYYY-MM-DD";
const BOOL: &str = "true or false";
const KIND: &str = "one of note, todo, meeting, clip";
const URL: &str = "an http:// or https:// URL without spaces";
const TAG: &str = "tags of letters, digits, spaces, - and _ (at most 32 characters each)";
const TEXT: &str = "text on one line";

fn is_fence(line: &str) -> bool {
    line.trim_end() == "---"
}

fn unquote(value: &str) -> &str {
    let v = value.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" => Some(true),
        "false" | "no" => Some(false),
        _ => None,
    }
}

fn tag_items(value: &str) -> Vec<String> {
    let v = value.trim();
    let inner = v
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(v);
    inner
        .split(',')
        .map(|t| unquote(t).trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn bad(line: usize, key: &str, expected: &'static str, got: &str) -> FrontMatterError {
    FrontMatterError::BadValue {
        line,
        key: key.into(),
        expected,
        got: got.chars().take(80).collect(),
    }
}

/// Applies one `key: value` to `fm`.
fn set_key(
    fm: &mut FrontMatter,
    line: usize,
    key: &str,
    raw: &str,
) -> Result<(), FrontMatterError> {
    let value = unquote(raw).trim();
    if value.is_empty() {
        return Ok(());
    }
    match key {
        "title" => fm.title = Some(value.into()),
        "notebook" => fm.notebook = Some(value.into()),
        "tags" => {
            for tag in tag_items(raw) {
                if !valid_tag(&tag) {
                    return Err(bad(line, key, TAG, &tag));
                }
                fm.tags.push(tag);
            }
        }
        "due" | "created" => {
            if !is_iso_date(value) {
                return Err(bad(line, key, DATE, value));
            }
            let slot = if key == "due" {
                &mut fm.due
            } else {
                &mut fm.created
            };
            *slot = Some(value.into());
        }
        "kind" => fm.kind = Some(Kind::parse(value).ok_or_else(|| bad(line, key, KIND, value))?),
        "source_url" => {
            let ok = (value.starts_with("http://") || value.starts_with("https://"))
                && !value.chars().any(char::is_whitespace);
            if !ok {
                return Err(bad(line, key, URL, value));
            }
            fm.source_url = Some(value.into());
        }
        "untrusted" | "done" => {
            let b = parse_bool(value).ok_or_else(|| bad(line, key, BOOL, value))?;
            if key == "untrusted" {
                fm.untrusted = Some(b);
            } else {
                fm.done = Some(b);
            }
        }
        _ => return Err(bad(line, key, TEXT, value)),
    }
    Ok(())
}

/// Splits `text` into its front matter (if it opens with a `---` line) and its body.
pub fn split_front_matter(text: &str) -> Result<(Option<FrontMatter>, &str), FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if is_fence(first.trim_end_matches(['\n', '\r'])) => offset += first.len(),
        _ => return Ok((None, text)),
    }
    // A missing closing line is the likelier mistake than a bad line in the body below it.
    if !lines
        .clone()
        .any(|l| is_fence(l.trim_end_matches(['\n', '\r'])))
    {
        return Err(FrontMatterError::Unclosed { opened_at: 1 });
    }
    let mut fm = FrontMatter::default();
    let mut seen: Vec<String> = Vec::new();
    // The key whose value is a block list (`tags:` followed by `- a` lines).
    let mut list_key: Option<String> = None;
    for (index, raw_line) in lines.enumerate() {
        let line_no = index + 2;
        offset += raw_line.len();
        let line = raw_line.trim_end_matches(['\n', '\r']);
        if is_fence(line) {
            return Ok((Some(fm), &text[offset..]));
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed
            .strip_prefix("- ")
            .or((trimmed == "-").then_some(""))
        {
            match &list_key {
                Some(key) => {
                    set_key(&mut fm, line_no, key, item)?;
                    continue;
                }
                None => {
                    return Err(FrontMatterError::NotKeyValue {
                        line: line_no,
                        text: trimmed.chars().take(80).collect(),
                    });
                }
            }
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            return Err(FrontMatterError::NotKeyValue {
                line: line_no,
                text: trimmed.chars().take(80).collect(),
            });
        };
        let key = key.trim().to_ascii_lowercase();
        let key = if key == "date" { "created".into() } else { key };
        if !KEYS.contains(&key.as_str()) {
            let suggestion = closest(&key, KEYS, 1).first().map(|s| s.to_string());
            return Err(FrontMatterError::UnknownKey {
                line: line_no,
                key,
                suggestion,
            });
        }
        if seen.contains(&key) {
            return Err(FrontMatterError::DuplicateKey { line: line_no, key });
        }
        seen.push(key.clone());
        list_key = (key == "tags" && value.trim().is_empty()).then(|| key.clone());
        set_key(&mut fm, line_no, &key, value)?;
    }
    Err(FrontMatterError::Unclosed { opened_at: 1 })
}

/// The first `# heading` of a body, if any.
fn first_heading(body: &str) -> Option<&str> {
    body.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("# "))
        .map(str::trim)
        .filter(|h| !h.is_empty())
}

/// The body without its first line when that line is the title as a `# heading` (the title
/// is stored on its own; repeating it would cost every snippet a dozen tokens).
fn without_title_heading<'a>(body: &'a str, title: &str) -> &'a str {
    let (first, rest) = body.split_once('\n').unwrap_or((body, ""));
    match first.trim().strip_prefix("# ") {
        Some(heading) if heading.trim() == title => rest.trim(),
        _ => body,
    }
}

/// A readable title from a file name: `2025-12-02-design-sync.md` → `2025-12-02 design sync`.
pub fn title_from_file_name(name: &str) -> String {
    let stem = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(name)
        .trim_end_matches(".markdown")
        .trim_end_matches(".md");
    // A leading date stays a date; the other separators become spaces.
    let (date, rest) = match stem.get(..10) {
        Some(head) if is_iso_date(head) => (Some(head), stem.get(10..).unwrap_or_default()),
        _ => (None, stem),
    };
    let words: Vec<&str> = rest
        .split(['-', '_', ' '])
        .filter(|p| !p.is_empty())
        .collect();
    date.into_iter().chain(words).collect::<Vec<_>>().join(" ")
}

/// Builds a note from a Markdown file's text; see the module documentation for the format
/// and the defaults.
pub fn note_from_markdown(
    file_name: &str,
    text: &str,
    default_notebook: &str,
    fallback_created: &str,
) -> Result<NewNote, NoteFileError> {
    let (fm, body) = split_front_matter(text)?;
    let fm = fm.unwrap_or_default();
    let body = body.trim();
    let title = fm
        .title
        .clone()
        .or_else(|| first_heading(body).map(str::to_string))
        .unwrap_or_else(|| title_from_file_name(file_name));
    let title = title.trim().to_string();
    let body = without_title_heading(body, &title).to_string();
    if title.is_empty() && body.is_empty() {
        return Err(NoteFileError::Empty);
    }
    let chars = title.chars().count();
    if chars > TITLE_MAX_CHARS {
        return Err(NoteFileError::TitleTooLong { chars });
    }
    let kind = fm.kind.unwrap_or(if fm.due.is_some() {
        Kind::Todo
    } else {
        Kind::Note
    });
    let untrusted = match (kind, fm.untrusted) {
        (Kind::Clip, Some(false)) => return Err(NoteFileError::TrustedClip),
        (Kind::Clip, _) => true,
        (_, Some(flag)) => flag,
        (_, None) => fm.source_url.is_some(),
    };
    let done = match (kind, fm.done) {
        (Kind::Todo, done) => Some(done.unwrap_or(false)),
        (_, None) => None,
        (other, Some(_)) => {
            return Err(NoteFileError::DoneWithoutTodo {
                kind: other.as_str(),
            });
        }
    };
    Ok(NewNote {
        title,
        body,
        notebook: fm.notebook.unwrap_or_else(|| default_notebook.to_string()),
        tags: join_tags(fm.tags.iter().map(String::as_str)),
        due: fm.due,
        created: fm.created.unwrap_or_else(|| fallback_created.to_string()),
        kind,
        source_url: fm.source_url,
        untrusted,
        done,
        meeting_id: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(text: &str) -> Result<FrontMatter, FrontMatterError> {
        split_front_matter(text).map(|(fm, _)| fm.unwrap_or_default())
    }

    #[test]
    fn front_matter_table_accepts_the_documented_forms() {
        let full = "---\ntitle: Design sync\nnotebook: Work\ntags: [design, Budget]\ndue: 2025-12-09\ncreated: 2025-12-02\nkind: meeting\nsource_url: https://example.org/x\nuntrusted: no\n---\nbody";
        let cases: Vec<(&str, &str, FrontMatter)> = vec![
            (
                "every key",
                full,
                FrontMatter {
                    title: Some("Design sync".into()),
                    notebook: Some("Work".into()),
                    tags: vec!["design".into(), "Budget".into()],
                    due: Some("2025-12-09".into()),
                    created: Some("2025-12-02".into()),
                    kind: Some(Kind::Meeting),
                    source_url: Some("https://example.org/x".into()),
                    untrusted: Some(false),
                    done: None,
                },
            ),
            (
                "tags without brackets, quoted values",
                "---\ntags: a, \"b c\"\ntitle: 'Quoted: yes'\n---\n",
                FrontMatter {
                    title: Some("Quoted: yes".into()),
                    tags: vec!["a".into(), "b c".into()],
                    ..FrontMatter::default()
                },
            ),
            (
                "tags as a block list, date as an alias of created",
                "---\ntags:\n  - one\n  - '#two'\ndate: 2024-02-29\n---\n",
                FrontMatter {
                    tags: vec!["one".into(), "#two".into()],
                    created: Some("2024-02-29".into()),
                    ..FrontMatter::default()
                },
            ),
            (
                "comments, blank lines, CRLF and empty values are ignored",
                "---\r\n# a comment\r\n\r\ndue:\r\ntitle: T\r\n---\r\nbody",
                FrontMatter {
                    title: Some("T".into()),
                    ..FrontMatter::default()
                },
            ),
        ];
        for (name, text, want) in cases {
            assert_eq!(fm(text), Ok(want), "{name}");
        }
    }

    #[test]
    fn front_matter_table_refuses_what_would_be_silently_lost() {
        let cases: Vec<(&str, &str, FrontMatterError)> = vec![
            (
                "an unclosed block",
                "---\ntitle: x\nbody without a fence",
                FrontMatterError::Unclosed { opened_at: 1 },
            ),
            (
                "a misspelt key, with a suggestion",
                "---\ntgas: a\n---\n",
                FrontMatterError::UnknownKey {
                    line: 2,
                    key: "tgas".into(),
                    suggestion: Some("tags".into()),
                },
            ),
            (
                "a repeated key",
                "---\ntitle: a\ntitle: b\n---\n",
                FrontMatterError::DuplicateKey {
                    line: 3,
                    key: "title".into(),
                },
            ),
            (
                "a line that is not key: value",
                "---\njust words\n---\n",
                FrontMatterError::NotKeyValue {
                    line: 2,
                    text: "just words".into(),
                },
            ),
            (
                "a relative due date",
                "---\ndue: Friday\n---\n",
                bad(2, "due", DATE, "Friday"),
            ),
            (
                "an impossible date",
                "---\ncreated: 2025-02-30\n---\n",
                bad(2, "created", DATE, "2025-02-30"),
            ),
            (
                "an unknown kind",
                "---\nkind: memo\n---\n",
                bad(2, "kind", KIND, "memo"),
            ),
            (
                "a tag with a comma-free but invalid character",
                "---\ntags: [c++]\n---\n",
                bad(2, "tags", TAG, "c++"),
            ),
            (
                "a source that is not a web URL",
                "---\nsource_url: file:///etc/passwd\n---\n",
                bad(2, "source_url", URL, "file:///etc/passwd"),
            ),
            (
                "a boolean that is not one",
                "---\nuntrusted: maybe\n---\n",
                bad(2, "untrusted", BOOL, "maybe"),
            ),
            (
                "a list item with no list key",
                "---\n- stray\n---\n",
                FrontMatterError::NotKeyValue {
                    line: 2,
                    text: "- stray".into(),
                },
            ),
        ];
        for (name, text, want) in cases {
            assert_eq!(fm(text), Err(want), "{name}");
        }
    }

    #[test]
    fn a_file_without_front_matter_is_all_body() {
        let (fm, body) = split_front_matter("# Title\n---\ntext").unwrap();
        assert_eq!(fm, None);
        assert_eq!(body, "# Title\n---\ntext");
    }

    #[test]
    fn note_defaults_table() {
        // (case, file name, text, expected (title, kind, untrusted, done, notebook, created))
        type Want = (
            &'static str,
            Kind,
            bool,
            Option<bool>,
            &'static str,
            &'static str,
        );
        let cases: Vec<(&str, &str, &str, Want)> = vec![
            (
                "title from the first heading",
                "x.md",
                "intro\n# Real title\ntext",
                ("Real title", Kind::Note, false, None, "Inbox", "2025-01-01"),
            ),
            (
                "a leading heading that repeats the title leaves the body",
                "x.md",
                "---\ntitle: Sync\ncreated: 2025-01-01\n---\n# Sync\n\nAttendees: me",
                ("Sync", Kind::Note, false, None, "Inbox", "2025-01-01"),
            ),
            (
                "title from the file name",
                "2025-12-02-design-sync.md",
                "text",
                (
                    "2025-12-02 design sync",
                    Kind::Note,
                    false,
                    None,
                    "Inbox",
                    "2025-01-01",
                ),
            ),
            (
                "a due date makes a to-do, not done",
                "t.md",
                "---\ntitle: Pay rent\ndue: 2025-12-01\nnotebook: Personal\n---\n",
                (
                    "Pay rent",
                    Kind::Todo,
                    false,
                    Some(false),
                    "Personal",
                    "2025-01-01",
                ),
            ),
            (
                "a clip is untrusted",
                "c.md",
                "---\ntitle: Risotto\nkind: clip\ncreated: 2025-10-10\n---\ntext",
                ("Risotto", Kind::Clip, true, None, "Inbox", "2025-10-10"),
            ),
            (
                "a source URL makes a note untrusted by default",
                "s.md",
                "---\ntitle: S\nsource_url: https://example.org\n---\n",
                ("S", Kind::Note, true, None, "Inbox", "2025-01-01"),
            ),
            (
                "a source URL can be declared trusted",
                "s.md",
                "---\ntitle: S\nsource_url: https://example.org\nuntrusted: false\n---\n",
                ("S", Kind::Note, false, None, "Inbox", "2025-01-01"),
            ),
        ];
        for (name, file, text, want) in cases {
            let note = note_from_markdown(file, text, "Inbox", "2025-01-01")
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = (
                note.title.as_str(),
                note.kind,
                note.untrusted,
                note.done,
                note.notebook.as_str(),
                note.created.as_str(),
            );
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn a_heading_repeating_the_title_does_not_cost_every_snippet() {
        for (text, body) in [
            (
                "---\ntitle: Sync\n---\n# Sync\n\nAttendees: me",
                "Attendees: me",
            ),
            ("# Standup\nShip it.", "Ship it."),
            ("---\ntitle: Sync\n---\n# Other\nx", "# Other\nx"),
            ("intro\n# Standup\nx", "intro\n# Standup\nx"),
        ] {
            let note = note_from_markdown("f.md", text, "Inbox", "2025-01-01").unwrap();
            assert_eq!(note.body, body, "{text}");
        }
    }

    #[test]
    fn note_rules_table_refuses_contradictions() {
        for (name, text, want) in [
            (
                "a clip cannot be trusted",
                "---\nkind: clip\nuntrusted: false\ntitle: x\n---\n",
                NoteFileError::TrustedClip,
            ),
            (
                "done on a meeting",
                "---\nkind: meeting\ndone: true\ntitle: x\n---\n",
                NoteFileError::DoneWithoutTodo { kind: "meeting" },
            ),
            ("an empty file", "---\n---\n  \n", NoteFileError::Empty),
        ] {
            assert_eq!(
                note_from_markdown("", text, "Inbox", "2025-01-01"),
                Err(want),
                "{name}"
            );
        }
        let long = format!("---\ntitle: {}\n---\n", "x".repeat(201));
        assert_eq!(
            note_from_markdown("f.md", &long, "Inbox", "2025-01-01"),
            Err(NoteFileError::TitleTooLong { chars: 201 })
        );
    }
}
