//! `notes-v4`'s writes that name notes the way the user does: `notes_tag` takes `notes`, each a
//! title, the user's words or an id, and `create_todos_from_meeting` takes `meeting` the same
//! way ([`crate::note_ref`] says how words name notes). On the embedded model, notes-v2's
//! id-only writes failed with ids it guessed without a search (tagged note 3, made to-dos from
//! "meeting 100"); here the user's words are the argument.
//!
//! Contract: the same tools, names, risks, effects and undo handles as the id-only designs
//! (`crate::tools`), so no policy view changes; a write changes nothing unless every name in
//! it resolves. A name that fits no note, several notes where one was meant, an id that names
//! no note or a note of the wrong kind is refused, changing nothing, with the candidates (the
//! user's own notes, newest first: an untrusted title is never shown or matched) and, in the
//! error's `example`, the whole call to make instead.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::idempotency::WriteEffect;
use toolgate_core::spec::Expected;
use toolgate_core::sql::Sql;
use toolgate_core::tool::DeclarationError;
use toolgate_core::{Effect, ErrorCode, Risk, Tool, ToolBuilder, ToolError};

use crate::note_ref::{self, Scope, Unresolved, describe_all};
use crate::rows::{Kind, NoteRow};
use crate::store::NotesStore;
use crate::tools::{apply_tags_to, apply_todos};

/// The most notes one `notes_tag` call changes (as the id-only design's `note_ids`).
pub const MAX_TAGGED: usize = 100;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagByWordsArgs {
    /// Which notes: each one's title or the user's words for it, e.g. ["Apartment ideas", "the running log"], or its id, e.g. "12". Words that start with "every" name every note whose title has them, e.g. ["every budget meeting"].
    #[schemars(length(min = 1, max = 100), inner(length(min = 1, max = 200)))]
    pub notes: Vec<String>,
    /// Tags to add, e.g. ["budget"]: letters, digits, spaces, - and _; stored lower-case. Pass [] when only removing.
    #[schemars(
        length(max = 10),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,31}$"))
    )]
    pub tags: Vec<String>,
    /// Tags to remove, e.g. ["draft"].
    #[serde(default)]
    #[schemars(
        length(max = 10),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,31}$"))
    )]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodosByWordsArgs {
    /// The meeting note: its title or the user's words for it, e.g. "the sales team sync" or "the latest security team sync", or its id, e.g. "3".
    #[schemars(length(min = 1, max = 200))]
    pub meeting: String,
}

/// `notes_tag`, naming notes by words.
pub fn tag_tool(store: &NotesStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<TagByWordsArgs>::new("notes_tag", 1)
        .describe(
            "Adds and/or removes tags on one or more notes at once; each note is named by its title or the user's own words for it (or its id).",
            "the user asks to tag, label or untag notes: put the user's words for each note in notes, or \"every …\" for all the notes whose titles have those words, in one call.",
            Some("to create a new note with tags use notes_create."),
            "each changed note's id, title and tags after the change. A name that fits no note, or several notes where one was meant, changes nothing and is refused with the candidates and the call to make.",
        )
        .example("tag two notes as ideas", json!({"notes": ["Apartment ideas", "Gift ideas for Mum"], "tags": ["ideas"]}))
        .example("tag every budget meeting", json!({"notes": ["every budget meeting"], "tags": ["finance"]}))
        .example("remove the tag draft from note 3", json!({"notes": ["3"], "tags": [], "remove": ["draft"]}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own tags, and the previous tags are kept for undo.",
        )
        .check(|args: &TagByWordsArgs, _| {
            if args.tags.is_empty() && args.remove.is_empty() {
                return Err(ToolError::invalid("tags", "nothing to do: give tags to add, tags to remove, or both")
                    .with_example(json!({"notes": args.notes, "tags": ["budget"]})));
            }
            Ok(())
        })
        .receipts(store.receipt_log())
        .write(move |ctx, args: TagByWordsArgs| {
            let store = store.clone();
            async move { store.write_once_sql(&ctx, move |tx| apply_tag_by_words(tx, &args)).await }
        })
}

fn apply_tag_by_words(conn: &dyn Sql, args: &TagByWordsArgs) -> Result<WriteEffect, ToolError> {
    let scope = Scope {
        kind: None,
        many: true,
    };
    let mut chosen: Vec<NoteRow> = Vec::new();
    for (index, text) in args.notes.iter().enumerate() {
        let reference = note_ref::parse(text);
        match note_ref::resolve(conn, &reference, scope, MAX_TAGGED)? {
            Ok(notes) => {
                for note in notes {
                    if !chosen.iter().any(|c| c.id == note.id) {
                        chosen.push(note);
                    }
                }
            }
            Err(unresolved) => return Err(tag_refusal(conn, args, index, unresolved)?),
        }
    }
    if chosen.len() > MAX_TAGGED {
        return Err(ToolError::invalid(
            "notes",
            format!(
                "these names fit {} notes; one call changes at most {MAX_TAGGED}",
                chosen.len()
            ),
        )
        .with_hint("nothing was changed; split the notes over several calls"));
    }
    apply_tags_to(conn, &chosen, &args.tags, &args.remove)
}

/// `args` with `notes[index]` replaced by `with`: the call to make instead.
fn tag_call_with(args: &TagByWordsArgs, index: usize, with: Vec<String>) -> Value {
    let mut notes: Vec<String> = Vec::new();
    for (i, text) in args.notes.iter().enumerate() {
        if i == index {
            notes.extend(with.iter().cloned());
        } else {
            notes.push(text.clone());
        }
    }
    let mut call = json!({"notes": notes, "tags": args.tags});
    if !args.remove.is_empty() {
        call["remove"] = json!(args.remove);
    }
    call
}

fn ids_of(notes: &[NoteRow]) -> Vec<String> {
    notes.iter().map(|n| n.id.to_string()).collect()
}

/// The teaching refusal of `notes[index]`.
fn tag_refusal(
    conn: &dyn Sql,
    args: &TagByWordsArgs,
    index: usize,
    unresolved: Unresolved,
) -> Result<ToolError, ToolError> {
    let text = args.notes.get(index).cloned().unwrap_or_default();
    let error = match unresolved {
        Unresolved::UnknownId { id, .. } => {
            // The call's other words (its other names, its tags) are all there is to go on.
            let mut other: Vec<String> = args
                .notes
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != index)
                .map(|(_, t)| t.clone())
                .collect();
            other.extend(args.tags.iter().cloned());
            other.extend(args.remove.iter().cloned());
            let candidates = note_ref::closest(conn, &other.join(" "), None)?;
            let best = candidates
                .first()
                .map(|best| tag_call_with(args, index, vec![best.id.to_string()]));
            not_found_with(
                format!("no note has id {id}"),
                &text,
                &candidates,
                best,
                "nothing was changed; name each note by its title or the user's words for it (not an id that was not returned by a search)",
            )
        }
        Unresolved::WrongNote { note, .. } => ToolError::invalid(
            "notes",
            format!("note {} cannot be changed by this call", note.id),
        )
        .with_received(json!(text)),
        Unresolved::NoMatch { candidates, clear } => not_found_with(
            format!("no note's title has the words \"{text}\""),
            &text,
            &candidates,
            clear.map(|best| tag_call_with(args, index, vec![best.id.to_string()])),
            "nothing was changed; name the note by its title, or find it with notes_search and pass its id",
        ),
        Unresolved::Several { matches } => ToolError::invalid(
            "notes",
            format!(
                "\"{text}\" fits {} notes, and each name in notes must fit one note",
                matches.len()
            ),
        )
        .with_received(json!(text))
        .with_expected(format!("one of: {}", describe_all(&matches)))
        .with_example(tag_call_with(args, index, ids_of(&matches)))
        .with_hint(
            "nothing was changed; to change all of them, make the example call (their ids); to change one, put its id or its whole title in notes instead",
        ),
        Unresolved::TooMany { count, max } => ToolError::invalid(
            "notes",
            format!("\"{text}\" fits {count} notes; one call changes at most {max}"),
        )
        .with_received(json!(text))
        .with_hint("nothing was changed; add words to the name so it fits fewer notes"),
        Unresolved::Empty => empty_name(&text, "notes"),
    };
    Ok(error)
}

/// A `not_found` refusal listing `candidates` and, when one stands out, the call to make with it.
fn not_found_with(
    message: String,
    text: &str,
    candidates: &[NoteRow],
    call: Option<Value>,
    advice: &str,
) -> ToolError {
    let mut error = ToolError::not_found(message).with_received(json!(text));
    if !candidates.is_empty() {
        error = error.with_expected(format!("one of: {}", describe_all(candidates)));
    }
    match call {
        Some(call) => error.with_example(call).with_hint(format!(
            "{advice}; if the first of the listed notes is the one meant, make the example call"
        )),
        None => error.with_hint(advice.to_string()),
    }
}

fn empty_name(text: &str, field: &str) -> ToolError {
    ToolError::invalid(field, format!("\"{text}\" names no note"))
        .with_received(json!(text))
        .with_hint("give the note's title or words from it, or its id")
}

/// `create_todos_from_meeting`, naming the meeting by words.
pub fn todos_tool(store: &NotesStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<TodosByWordsArgs>::new("create_todos_from_meeting", 1)
        .describe(
            "Creates one to-do for each open action item of a meeting note (lines starting with \"- [ ] \", \"TODO:\" or \"Action:\"), due on the YYYY-MM-DD date written in the item; an item that already has a to-do from this meeting is not created again. The meeting is named by its title or the user's own words for it (or its id).",
            "the user asks to turn a meeting's action items into to-dos: put the user's words for the meeting in meeting (\"latest\" picks the newest of several).",
            Some("for a single to-do the user dictates, use notes_create with a due date."),
            "the meeting (id, title, date), created (id, title, due) and already_existed (id, title). A name that fits no meeting, or several, creates nothing and is refused with the candidates and the call to make.",
        )
        // On the sample notebook three meetings have this name: the call is refused with them.
        .example_returns(
            "to-dos from the sales team sync",
            json!({"meeting": "the sales team sync"}),
            Expected::error(ErrorCode::InvalidArgument),
        )
        .example("to-dos from the newest of several meetings", json!({"meeting": "the latest security team sync"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It adds to-do notes to the user's own notebook, and undo deletes exactly the ones it created.",
        )
        .receipts(store.receipt_log())
        .write(move |ctx, args: TodosByWordsArgs| {
            let store = store.clone();
            async move {
                let today = ctx.today.clone();
                store
                    .write_once_sql(&ctx, move |tx| apply_todos_by_words(tx, &args.meeting, &today))
                    .await
            }
        })
}

fn apply_todos_by_words(conn: &dyn Sql, text: &str, today: &str) -> Result<WriteEffect, ToolError> {
    let scope = Scope {
        kind: Some(Kind::Meeting),
        many: false,
    };
    let reference = note_ref::parse(text);
    match note_ref::resolve(conn, &reference, scope, 1)? {
        Ok(notes) => match notes.first() {
            Some(meeting) => apply_todos(conn, meeting.id, today),
            None => Err(empty_name(text, "meeting")),
        },
        Err(unresolved) => Err(todos_refusal(conn, text, unresolved)?),
    }
}

/// The call naming `meeting` by its whole title.
fn todos_call(meeting: &NoteRow) -> Value {
    json!({"meeting": meeting.title})
}

fn todos_refusal(
    conn: &dyn Sql,
    text: &str,
    unresolved: Unresolved,
) -> Result<ToolError, ToolError> {
    let advice = "nothing was created; name the meeting by its title or the user's words for it";
    let error = match unresolved {
        Unresolved::UnknownId { id, candidates } => not_found_with(
            format!("no note has id {id}"),
            text,
            &candidates,
            // Nothing in the call says which meeting was meant: no call is offered.
            None,
            &format!("{advice}; the newest meetings are listed"),
        ),
        Unresolved::WrongNote { note, candidates } => {
            let what = if note.untrusted {
                "untrusted content; to-dos are made only from the user's own meeting notes"
                    .to_string()
            } else {
                format!("a {}, not a meeting", note.kind.as_str())
            };
            ToolError::invalid("meeting", format!("note {} is {what}", note.id))
                .with_received(json!(text))
                .with_expected(format!("one of: {}", describe_all(&candidates)))
                .with_hint(format!("{advice}; the newest meetings are listed; for a single to-do use notes_create with a due date"))
        }
        Unresolved::NoMatch { candidates, clear } => {
            let candidates = if candidates.is_empty() {
                note_ref::newest(conn, Some(Kind::Meeting))?
            } else {
                candidates
            };
            not_found_with(
                format!("no meeting's title has the words \"{text}\""),
                text,
                &candidates,
                clear.map(|best| todos_call(&best)),
                advice,
            )
        }
        Unresolved::Several { matches } => {
            let error = ToolError::invalid(
                "meeting",
                format!("\"{text}\" fits {} meetings, and one call takes one meeting", matches.len()),
            )
            .with_received(json!(text))
            .with_expected(format!("one of (newest first): {}", describe_all(&matches)))
            .with_hint(format!(
                "{advice}: the whole title of the one meant, or \"latest\" for the newest; the example takes the newest"
            ));
            match matches.first() {
                Some(newest) => error.with_example(todos_call(newest)),
                None => error,
            }
        }
        Unresolved::TooMany { count, .. } => ToolError::invalid(
            "meeting",
            format!("\"{text}\" fits {count} meetings, and one call takes one meeting"),
        )
        .with_received(json!(text)),
        Unresolved::Empty => empty_name(text, "meeting"),
    };
    Ok(error)
}
