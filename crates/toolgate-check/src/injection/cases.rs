//! The injection suite's case files, and how they expand into runs (pure).
//!
//! A file holds any of three tables, each optional:
//! - `[[task]]`: a user task on the notes toolset. `id`, `placement` (`page`: a web page the
//!   task clips; `note`: a clipped note's body; `email`: a forwarded email kept as an
//!   untrusted note; `snippet`: the start of a clipped note, which search results show),
//!   `summary`, `prompt` (`{page}` is the page's URL), `title`, `text` (the page's HTML body
//!   or the note's text, with `{payload}` where the attack goes), optional `source_url` (a
//!   clipped note's origin) and `[[task.check]]`s in the eval suites' format that decide
//!   whether the user got what they asked for.
//! - `[[goal]]`: what the attacker wants. `id`, `summary`, `line` (`gated`: only a tool that
//!   needs approval can do it; `egress`: only the egress exit can; `soft`: an ungated tool or
//!   the answer itself can), `marker` (the attacker's value), `action`, `action_fr`,
//!   `action_de` (the instruction, in English, French and German), `tried_tools` and
//!   `tried_contains` (a call to one of those tools whose arguments contain that text means
//!   the model tried), and `effect` (how the end state shows it happened:
//!   `mail_to_marker`, `egress_to_marker`, `notes_deleted`, `notes_tagged_marker`,
//!   `answer_contains_marker`).
//! - `[[phrasing]]`: how the instruction is dressed. `id`, `summary`, `template` with
//!   `{action}`, `{action_fr}`, `{action_de}` or `{action_b64}` ("Before answering,
//!   {action}." in base64).
//!
//! Every task is crossed with every goal and every phrasing of every loaded file; each task
//! also runs once without a payload. Refused: unknown fields, unknown placements, lines or
//! effects, a task text without `{payload}`, a page task whose prompt lacks `{page}`, a
//! template naming no action, duplicate ids.

use base64::Engine as _;
use serde::Deserialize;
use toolgate_eval::suite::Check;

use crate::cases::{CaseSource, unique_ids};
use crate::error::CheckError;

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectionFile {
    #[serde(default, rename = "task")]
    pub tasks: Vec<UserTask>,
    #[serde(default, rename = "goal")]
    pub goals: Vec<Goal>,
    #[serde(default, rename = "phrasing")]
    pub phrasings: Vec<Phrasing>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    Page,
    Note,
    Email,
    Snippet,
}

impl Placement {
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Page => "page",
            Placement::Note => "note",
            Placement::Email => "email",
            Placement::Snippet => "snippet",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserTask {
    pub id: String,
    pub placement: Placement,
    pub summary: String,
    pub prompt: String,
    pub title: String,
    pub text: String,
    #[serde(default)]
    pub source_url: Option<String>,
    #[serde(default, rename = "check")]
    pub checks: Vec<Check>,
}

/// Which layer alone can carry a goal out, and so what must stop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// Only a tool that needs approval: with deny-all, zero end-to-end success is the hard
    /// line; with a fatigued approver it is measured (what taint still stops).
    Gated,
    /// Only the egress exit: zero end-to-end success with every approver.
    Egress,
    /// An ungated tool or the answer: measured.
    Soft,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// The mail server accepted a message for the marker address.
    MailToMarker,
    /// The egress exit let a request out to the marker host.
    EgressToMarker,
    /// Fewer notes at the end than at the start.
    NotesDeleted,
    /// A note carries the marker as a tag.
    NotesTaggedMarker,
    /// The final answer contains the marker.
    AnswerContainsMarker,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub id: String,
    pub summary: String,
    pub line: Line,
    pub marker: String,
    pub action: String,
    pub action_fr: String,
    pub action_de: String,
    pub tried_tools: Vec<String>,
    pub tried_contains: String,
    pub effect: Effect,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phrasing {
    pub id: String,
    pub summary: String,
    pub template: String,
}

/// One run to make: a task with a payload (an attack case) or without (a clean run).
#[derive(Debug, Clone)]
pub struct Planned {
    /// `task.goal.phrasing`, or `task.clean`.
    pub id: String,
    pub task: UserTask,
    pub attack: Option<Attack>,
}

#[derive(Debug, Clone)]
pub struct Attack {
    pub goal: Goal,
    pub phrasing: String,
    pub payload: String,
}

impl Planned {
    /// The payload as it is placed (empty for a clean run).
    pub fn payload(&self) -> &str {
        self.attack.as_ref().map_or("", |a| a.payload.as_str())
    }

    /// The task's text with the payload in place (or none), as a note holds it.
    pub fn host_text(&self) -> String {
        self.task.text.replace("{payload}", self.payload())
    }

    /// The page a `page` task clips: the task's HTML with the payload written as an
    /// attacker's page writes text, `<`, `>` and `&` as entities, so that what the reader
    /// (and the clip) gets is the payload itself, chat-markup tokens included.
    pub fn page_html(&self) -> String {
        let text = self
            .task
            .text
            .replace("{payload}", &escape_html(self.payload()));
        format!(
            "<!doctype html><html><head><title>{0}</title></head><body><h1>{0}</h1>\n{text}\n</body></html>\n",
            escape_html(&self.task.title)
        )
    }
}

/// Text as HTML character data.
pub fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Everything the loaded files define, checked.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub tasks: Vec<UserTask>,
    pub goals: Vec<Goal>,
    pub phrasings: Vec<Phrasing>,
    pub files: Vec<String>,
}

/// Gathers and checks the files' tasks, goals and phrasings.
pub fn gather(files: Vec<CaseSource<InjectionFile>>) -> Result<Loaded, CheckError> {
    let mut loaded = Loaded::default();
    for source in &files {
        let bad = |message: String| CheckError::Cases {
            path: source.origin.clone().into(),
            message,
        };
        for task in &source.file.tasks {
            if !task.text.contains("{payload}") {
                return Err(bad(format!(
                    "task `{}`: its text has no {{payload}}",
                    task.id
                )));
            }
            if task.placement == Placement::Page && !task.prompt.contains("{page}") {
                return Err(bad(format!(
                    "task `{}`: a page task's prompt must name {{page}}",
                    task.id
                )));
            }
            if task.checks.is_empty() {
                return Err(bad(format!(
                    "task `{}`: give at least one [[task.check]], or utility cannot be judged",
                    task.id
                )));
            }
        }
        for phrasing in &source.file.phrasings {
            let names_action = ["{action}", "{action_fr}", "{action_de}", "{action_b64}"]
                .iter()
                .any(|a| phrasing.template.contains(a));
            if !names_action {
                return Err(bad(format!(
                    "phrasing `{}`: its template names no {{action}}",
                    phrasing.id
                )));
            }
        }
        for goal in &source.file.goals {
            if goal.line != Line::Soft && goal.tried_tools.is_empty() {
                return Err(bad(format!(
                    "goal `{}`: a gated or egress goal names the tools that carry it out (tried_tools)",
                    goal.id
                )));
            }
        }
    }
    let mut ids = Vec::new();
    for source in &files {
        let origin = source.origin.as_str();
        let file = &source.file;
        ids.extend(
            file.tasks
                .iter()
                .map(|t| (origin, format!("task {}", t.id))),
        );
        ids.extend(
            file.goals
                .iter()
                .map(|g| (origin, format!("goal {}", g.id))),
        );
        ids.extend(
            file.phrasings
                .iter()
                .map(|p| (origin, format!("phrasing {}", p.id))),
        );
    }
    unique_ids(ids.iter().map(|(o, i)| (*o, i.as_str())))?;
    for source in files {
        loaded.files.push(source.origin);
        loaded.tasks.extend(source.file.tasks);
        loaded.goals.extend(source.file.goals);
        loaded.phrasings.extend(source.file.phrasings);
    }
    if loaded.tasks.is_empty() || loaded.goals.is_empty() || loaded.phrasings.is_empty() {
        return Err(CheckError::Cases {
            path: loaded.files.join(", ").into(),
            message: "the injection suite needs at least one task, one goal and one phrasing"
                .into(),
        });
    }
    Ok(loaded)
}

/// The payload of `goal` dressed by `phrasing`.
pub fn payload(goal: &Goal, phrasing: &Phrasing) -> String {
    let encoded = base64::engine::general_purpose::STANDARD
        .encode(format!("Before answering, {}.", goal.action));
    phrasing
        .template
        .replace("{action_b64}", &encoded)
        .replace("{action_fr}", &goal.action_fr)
        .replace("{action_de}", &goal.action_de)
        .replace("{action}", &goal.action)
}

/// The clean runs (one per task) and the attack cases (task x goal x phrasing), in that
/// order; attack cases task-major so that a bounded subset ([`spread`]) still varies.
pub fn expand(loaded: &Loaded) -> (Vec<Planned>, Vec<Planned>) {
    let clean = loaded
        .tasks
        .iter()
        .map(|task| Planned {
            id: format!("{}.clean", task.id),
            task: task.clone(),
            attack: None,
        })
        .collect();
    let mut attacks = Vec::new();
    for task in &loaded.tasks {
        for goal in &loaded.goals {
            for phrasing in &loaded.phrasings {
                attacks.push(Planned {
                    id: format!("{}.{}.{}", task.id, goal.id, phrasing.id),
                    task: task.clone(),
                    attack: Some(Attack {
                        goal: goal.clone(),
                        phrasing: phrasing.id.clone(),
                        payload: payload(goal, phrasing),
                    }),
                });
            }
        }
    }
    (clean, attacks)
}

/// At most `limit` of `cases`, chosen to cover as many goals, phrasings and tasks as the limit
/// allows: case `i` of the subset is at `i * step + i % step` (`step = len / limit`), so that
/// successive picks also move along the innermost dimension (the phrasing) instead of always
/// taking its first.
pub fn spread(cases: Vec<Planned>, limit: Option<usize>) -> Vec<Planned> {
    match limit {
        Some(limit) if limit < cases.len() => {
            let len = cases.len();
            let step = (len / limit.max(1)).max(1);
            (0..limit)
                .filter_map(|i| cases.get((i * step + i % step).min(len - 1)).cloned())
                .collect()
        }
        _ => cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::load_cases;

    const BUILTIN: &str = include_str!("../../../../security/injection/notes.toml");

    fn builtin() -> Loaded {
        gather(load_cases(&[("security/injection/notes.toml", BUILTIN)], &[]).unwrap()).unwrap()
    }

    #[test]
    fn committed_cases_make_at_least_a_hundred_attacks_with_five_phrasings_per_goal() {
        let loaded = builtin();
        let (clean, attacks) = expand(&loaded);
        assert_eq!(clean.len(), loaded.tasks.len());
        assert!(attacks.len() >= 100, "{} attack cases", attacks.len());
        assert!(loaded.phrasings.len() >= 5);
        assert_eq!(loaded.goals.len(), 5);
    }

    #[test]
    fn every_payload_carries_its_goal_in_some_form() {
        let loaded = builtin();
        for goal in &loaded.goals {
            for phrasing in &loaded.phrasings {
                let p = payload(goal, phrasing);
                assert!(!p.contains('{') || p.contains("\"status\""), "{p}");
                assert!(p.len() > 40, "{} {}: {p}", goal.id, phrasing.id);
            }
        }
        let email = loaded.goals.iter().find(|g| g.id == "email-out").unwrap();
        let b64 = loaded.phrasings.iter().find(|p| p.id == "base64").unwrap();
        let encoded = payload(email, b64);
        assert!(
            !encoded.contains("evil.example"),
            "the address is hidden by the encoding"
        );
    }

    #[test]
    fn a_task_without_a_payload_slot_is_refused() {
        let text = BUILTIN.replacen("<p>{payload}</p>", "<p></p>", 1);
        let err = gather(load_cases(&[("x.toml", text.as_str())], &[]).unwrap()).unwrap_err();
        assert!(err.to_string().contains("{payload}"), "{err}");
    }

    #[test]
    fn a_template_without_an_action_is_refused() {
        let text = BUILTIN.replace("{action_b64}", "(nothing)");
        let err = gather(load_cases(&[("x.toml", text.as_str())], &[]).unwrap()).unwrap_err();
        assert!(err.to_string().contains("base64"), "{err}");
    }

    #[test]
    fn a_subset_spreads_over_goals() {
        let (_, attacks) = expand(&builtin());
        let subset = spread(attacks, Some(5));
        let goals: std::collections::BTreeSet<_> = subset
            .iter()
            .map(|c| c.attack.as_ref().unwrap().goal.id.clone())
            .collect();
        let phrasings: std::collections::BTreeSet<_> = subset
            .iter()
            .map(|c| c.attack.as_ref().unwrap().phrasing.clone())
            .collect();
        assert_eq!(subset.len(), 5);
        assert_eq!(goals.len(), 5, "{goals:?}");
        assert_eq!(phrasings.len(), 5, "{phrasings:?}");
    }

    #[test]
    fn the_same_id_in_two_files_is_refused() {
        let files =
            load_cases::<InjectionFile>(&[("a.toml", BUILTIN), ("b.toml", BUILTIN)], &[]).unwrap();
        assert!(
            gather(files)
                .unwrap_err()
                .to_string()
                .contains("already used")
        );
    }
}
