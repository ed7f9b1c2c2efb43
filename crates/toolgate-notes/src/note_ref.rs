//! Notes named the way the user names them: `notes-v4`'s writes take "Q1 hiring plan", "the
//! platform team sync about the database migration" or "every design team meeting" where the
//! earlier designs took ids the model had to find first (and, on the embedded model, guessed).
//!
//! Contract:
//! - A reference that is a number (`"12"`, `"note 12"`, `"#12"`) names the note with that id,
//!   as before; any other text names notes by their titles.
//! - Words name the notes whose title holds every content word of the reference (whole words,
//!   any case, a trailing plural `s` ignored). Common words ("the", "my", "note", "about") are
//!   not matched; "meeting"/"meetings" and "todo"/"todos" narrow to that kind; "latest",
//!   "last", "newest" and "recent" choose the newest of the matches; a reference that starts
//!   with "every", "all" or "each" names every match. A title equal to the whole reference wins
//!   outright. When no title holds every word, the words that no title in scope uses at all are
//!   set aside once (they cannot tell notes apart), and the rest are matched again.
//! - Only the user's own notes are matched by words: an untrusted note (a web clip, a forwarded
//!   email) is reached by its id only, so text from outside never decides which note a write
//!   changes.
//! - Anything else is an [`Unresolved`]: the id that names no note, the note of the wrong kind,
//!   no title with the words, or several where one was meant. Each carries the candidates (the
//!   user's own notes, newest first) a teaching error lists with the exact call to make.

use std::cmp::Reverse;

use toolgate_core::sql::Sql;
use toolgate_core::{ToolError, sql_params};

use crate::rows::{self, COLUMNS, Kind, NoteRow};

/// Words that never tell one title from another.
const COMMON_WORDS: &[&str] = &[
    "a", "about", "an", "and", "as", "at", "by", "called", "do", "dos", "for", "from", "had",
    "has", "have", "i", "in", "it", "its", "me", "mine", "most", "my", "named", "note", "notes",
    "of", "on", "one", "or", "our", "some", "that", "the", "their", "these", "this", "those",
    "titled", "to", "we", "where", "which", "with", "your",
];
/// Words that choose the newest of the matches.
const NEWEST_WORDS: &[&str] = &["latest", "last", "newest", "recent"];
/// Words that, first in a reference, name every match.
const EVERY_WORDS: &[&str] = &["every", "all", "each"];
/// How many candidates an unresolved reference lists.
pub const CANDIDATES: usize = 8;

/// What a write's argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoteRef {
    /// A note id.
    Id(i64),
    /// Notes named by words.
    Words(Words),
}

/// A reference in words, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    /// The reference as given, trimmed.
    pub text: String,
    /// All its words, lower-case, in order (for the whole-title comparison).
    pub all: Vec<String>,
    /// The words a title must hold.
    pub content: Vec<String>,
    /// A kind the words named ("meeting", "todo").
    pub kind: Option<Kind>,
    /// "every …": every match, not one.
    pub every: bool,
    /// "latest …": the newest match.
    pub newest: bool,
}

/// Which notes a write accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// Only notes of this kind (the to-do tool takes meetings only).
    pub kind: Option<Kind>,
    /// Whether "every …" may name several notes.
    pub many: bool,
}

/// Why a reference names no note, or not the one note a write needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// A number that is no note's id.
    UnknownId { id: i64, candidates: Vec<NoteRow> },
    /// A note of another kind than the write takes (or an untrusted one).
    WrongNote {
        note: Box<NoteRow>,
        candidates: Vec<NoteRow>,
    },
    /// No title holds the words. `clear` is the one candidate whose title has the most of
    /// them, at least half, when no other has as many: the only one a refusal offers to call.
    NoMatch {
        candidates: Vec<NoteRow>,
        clear: Option<Box<NoteRow>>,
    },
    /// Several titles hold them and one was meant.
    Several { matches: Vec<NoteRow> },
    /// "every …" matched more notes than one call may change.
    TooMany { count: usize, max: usize },
    /// Nothing to match (empty, or only common words).
    Empty,
}

/// The words of `text`: runs of letters and digits, lower-case.
pub fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Parses a reference (see the module documentation).
pub fn parse(text: &str) -> NoteRef {
    let text = text.trim();
    if let Some(id) = plain_id(text) {
        return NoteRef::Id(id);
    }
    let all = words_of(text);
    let every = all
        .first()
        .is_some_and(|w| EVERY_WORDS.contains(&w.as_str()));
    let mut kind = None;
    let mut newest = false;
    let mut content = Vec::new();
    for (i, word) in all.iter().enumerate() {
        let w = word.as_str();
        if i == 0 && every {
            continue;
        }
        if NEWEST_WORDS.contains(&w) {
            newest = true;
        } else if matches!(w, "meeting" | "meetings") {
            kind = Some(Kind::Meeting);
        } else if matches!(w, "todo" | "todos") {
            kind = Some(Kind::Todo);
        } else if !COMMON_WORDS.contains(&w) && !EVERY_WORDS.contains(&w) {
            content.push(word.clone());
        }
    }
    NoteRef::Words(Words {
        text: text.to_string(),
        all,
        content,
        kind,
        every,
        newest,
    })
}

/// `12`, `#12`, `note 12`, `id 12`: an id; anything else is not.
fn plain_id(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("note")
        .or_else(|| lower.strip_prefix("id"))
        .unwrap_or(&lower)
        .trim_start_matches([' ', ':', '#']);
    (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        .then(|| rest.parse::<i64>().ok())
        .flatten()
        .filter(|id| *id > 0)
}

/// The notes `reference` names within `scope`: one note, or several for "every …" when the
/// scope allows many (at most `max`).
pub fn resolve(
    conn: &dyn Sql,
    reference: &NoteRef,
    scope: Scope,
    max: usize,
) -> Result<Result<Vec<NoteRow>, Unresolved>, ToolError> {
    let in_scope = own_notes(conn, scope.kind)?;
    match reference {
        NoteRef::Id(id) => {
            let Some(note) = rows::by_id(conn, *id)? else {
                return Ok(Err(Unresolved::UnknownId {
                    id: *id,
                    candidates: newest_first(in_scope, CANDIDATES),
                }));
            };
            let wrong_kind = scope.kind.is_some_and(|k| k != note.kind);
            // The to-do tool takes the user's own meetings only; tags may go on any note.
            if wrong_kind || (scope.kind.is_some() && note.untrusted) {
                return Ok(Err(Unresolved::WrongNote {
                    note: Box::new(note),
                    candidates: newest_first(in_scope, CANDIDATES),
                }));
            }
            Ok(Ok(vec![note]))
        }
        NoteRef::Words(words) => Ok(by_words(in_scope, words, scope, max)),
    }
}

/// The user's own notes of `kind` whose titles have the most of the words of `text` (at least
/// one), best first, at most [`CANDIDATES`]: what a refusal offers when the call's other
/// words are all there is to go on.
pub fn closest(conn: &dyn Sql, text: &str, kind: Option<Kind>) -> Result<Vec<NoteRow>, ToolError> {
    let content = match parse(text) {
        NoteRef::Words(words) => words.content,
        NoteRef::Id(_) => Vec::new(),
    };
    Ok(scored_overlap(own_notes(conn, kind)?, &content)
        .into_iter()
        .map(|(_, n)| n)
        .collect())
}

/// The user's own notes of `kind`, newest first, at most [`CANDIDATES`].
pub fn newest(conn: &dyn Sql, kind: Option<Kind>) -> Result<Vec<NoteRow>, ToolError> {
    Ok(newest_first(own_notes(conn, kind)?, CANDIDATES))
}

/// The notes whose titles have at least one of `content`, with how many, most first (then
/// newest), at most [`CANDIDATES`].
fn scored_overlap(notes: Vec<NoteRow>, content: &[String]) -> Vec<(usize, NoteRow)> {
    let mut scored: Vec<(usize, NoteRow)> = notes
        .into_iter()
        .map(|n| {
            let score = content.iter().filter(|w| title_has(&n.title, w)).count();
            (score, n)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by_key(|(score, n)| (Reverse(*score), Reverse(n.created.clone()), n.id));
    scored.truncate(CANDIDATES);
    scored
}

fn by_words(
    in_scope: Vec<NoteRow>,
    words: &Words,
    scope: Scope,
    max: usize,
) -> Result<Vec<NoteRow>, Unresolved> {
    // A tool that takes one kind has already narrowed to it; the words' kind narrows the rest.
    let of_kind: Vec<NoteRow> = in_scope
        .into_iter()
        .filter(|n| scope.kind.is_some() || words.kind.is_none_or(|k| k == n.kind))
        .collect();
    if words.all.is_empty() {
        return Err(Unresolved::Empty);
    }
    // The whole title, word for word, wins outright.
    let exact: Vec<NoteRow> = of_kind
        .iter()
        .filter(|n| words_of(&n.title) == words.all)
        .cloned()
        .collect();
    let matches = if !exact.is_empty() {
        exact
    } else if words.content.is_empty() && words.kind.is_none() {
        return Err(Unresolved::Empty);
    } else {
        let first = holding(&of_kind, &words.content);
        if first.is_empty() {
            // Words no title uses cannot tell notes apart: match on the others.
            let used: Vec<String> = words
                .content
                .iter()
                .filter(|w| of_kind.iter().any(|n| title_has(&n.title, w)))
                .cloned()
                .collect();
            // Only a few words may be set aside: a name mostly of words no title uses (an
            // untrusted note's title, a note that does not exist) matches nothing.
            let set_aside = words.content.len() - used.len();
            if used.len() < 2 || set_aside == 0 || set_aside * 2 > words.content.len() {
                Vec::new()
            } else {
                holding(&of_kind, &used)
            }
        } else {
            first
        }
    };
    let mut matches = newest_first(matches, usize::MAX);
    if matches.is_empty() {
        let scored = scored_overlap(of_kind, &words.content);
        let clear = match scored.as_slice() {
            [(top, best), rest @ ..]
                if *top * 2 >= words.content.len() && rest.first().is_none_or(|(s, _)| s < top) =>
            {
                Some(Box::new(best.clone()))
            }
            _ => None,
        };
        return Err(Unresolved::NoMatch {
            candidates: scored.into_iter().map(|(_, n)| n).collect(),
            clear,
        });
    }
    if words.newest {
        matches.truncate(1);
        return Ok(matches);
    }
    if matches.len() == 1 {
        return Ok(matches);
    }
    if words.every && scope.many {
        if matches.len() > max {
            return Err(Unresolved::TooMany {
                count: matches.len(),
                max,
            });
        }
        return Ok(matches);
    }
    matches.truncate(CANDIDATES);
    Err(Unresolved::Several { matches })
}

/// The notes among `notes` whose title holds every word of `words`.
fn holding(notes: &[NoteRow], words: &[String]) -> Vec<NoteRow> {
    notes
        .iter()
        .filter(|n| words.iter().all(|w| title_has(&n.title, w)))
        .cloned()
        .collect()
}

/// Whether `title` has `word` as a whole word, a trailing plural `s` on either side ignored.
fn title_has(title: &str, word: &str) -> bool {
    let singular = |w: &str| -> String {
        if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
            w[..w.len() - 1].to_string()
        } else {
            w.to_string()
        }
    };
    let word = singular(word);
    words_of(title).iter().any(|t| singular(t) == word)
}

/// The user's own notes (never untrusted ones), of `kind` when given.
fn own_notes(conn: &dyn Sql, kind: Option<Kind>) -> Result<Vec<NoteRow>, ToolError> {
    Ok(rows::query(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM notes WHERE untrusted = 0 AND (kind = ?1 OR ?1 IS NULL) ORDER BY id"
        ),
        sql_params![kind.map(Kind::as_str)],
    )?)
}

/// `notes`, newest first (ties by id), at most `n`.
fn newest_first(mut notes: Vec<NoteRow>, n: usize) -> Vec<NoteRow> {
    notes.sort_by_key(|note| (Reverse(note.created.clone()), note.id));
    notes.truncate(n);
    notes
}

/// One candidate as an error lists it: `5 "Design team sync" (meeting, 2025-12-02)`. Only the
/// user's own notes are ever candidates, so the title is theirs.
pub fn describe(note: &NoteRow) -> String {
    format!(
        "{} \"{}\" ({}, {})",
        note.id,
        note.title,
        note.kind.as_str(),
        note.created
    )
}

/// Candidates joined for an error's `expected`.
pub fn describe_all(notes: &[NoteRow]) -> String {
    notes.iter().map(describe).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Words {
        match parse(text) {
            NoteRef::Words(w) => w,
            NoteRef::Id(id) => panic!("{text} parsed as id {id}"),
        }
    }

    #[test]
    fn numbers_are_ids_and_everything_else_is_words() {
        for (text, id) in [
            ("12", 12),
            (" note 12 ", 12),
            ("#7", 7),
            ("id 3", 3),
            ("note #4", 4),
        ] {
            assert_eq!(parse(text), NoteRef::Id(id), "{text}");
        }
        for text in ["Q1 hiring plan", "1:1 with Priya", "0", "note", "12 things"] {
            assert!(matches!(parse(text), NoteRef::Words(_)), "{text}");
        }
    }

    #[test]
    fn the_users_words_are_taken_apart_into_title_words_kind_and_choice() {
        let w = words("the most recent design team meeting");
        assert_eq!(w.content, ["design", "team"]);
        assert_eq!(
            (w.kind, w.newest, w.every),
            (Some(Kind::Meeting), true, false)
        );
        let w = words("every design team meeting note");
        assert_eq!(w.content, ["design", "team"]);
        assert_eq!(
            (w.kind, w.newest, w.every),
            (Some(Kind::Meeting), false, true)
        );
        let w = words("the notes of my 1:1 with Priya");
        assert_eq!(w.content, ["1", "1", "priya"]);
        assert_eq!(w.kind, None);
    }

    #[test]
    fn whole_words_match_and_a_plural_s_is_ignored() {
        assert!(title_has(
            "Design team review — two budget proposals",
            "proposal"
        ));
        assert!(title_has("Reading notes", "reading"));
        assert!(!title_has(
            "Design team kickoff — checkout redesign",
            "sign"
        ));
        assert!(!title_has("Checkout redesign", "design"));
    }
}
