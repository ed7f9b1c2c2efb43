//! The toolsets that exist, by name, and the kind of store each works on.
//!
//! Guarantees: [`ToolsetName::ALL`] lists every toolset once, in a fixed order; each name
//! prints ([`ToolsetName::as_str`], `Display`) as exactly the string it parses from
//! ([`FromStr`]); every toolset works on exactly one [`StoreKind`]. Refuses: any other name
//! ([`UnknownToolset`], which lists the known ones).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use toolgate_agent::grounding::GroundRule;
use toolgate_agent::phases::OfferRule;
use toolgate_agent::{AgentConfig, ReadFirst};
use toolgate_books::Toolset as BooksDesign;
use toolgate_notes::Design as NotesDesign;

/// A toolset a front end can offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolsetName {
    /// The book catalogue as a straight CRUD API.
    BooksV1,
    /// The book catalogue as tools designed for a model.
    BooksV2,
    /// books-v2 changed where the embedded model failed: writes by filter, repeats answered.
    BooksV3,
    /// books-v3 changed where the embedded model failed: placeholder filters left out, years
    /// in the user's words, empty matches that say which filter to drop.
    BooksV4,
    /// books-v4's tools, with a loop that asks once for the corrected call when the model
    /// answers after a refused call instead of fixing it.
    BooksV5,
    /// books-v4 whose writes name their books first: a required `books` object (the search's
    /// filters, sort and limit) before the tag or status.
    BooksV6,
    /// The notes assistant: notes, web clips, email drafts and sends.
    Notes,
    /// The notes assistant with notes-v2's search (the best match whole, a kind filter that
    /// never hides every match) and reads that answer repeats.
    NotesV2,
    /// notes-v2 whose loop first searches the user's own words, so the model starts from the
    /// notes the question is about instead of guessing their ids.
    NotesV3,
    /// notes-v2 whose writes take notes by the user's words (titles, "the latest design team
    /// meeting") instead of ids, and refuse a name that fits no note or several with the
    /// candidates and the call to make.
    NotesV4,
    /// notes-v4 whose `web_clip` is only for a URL the user gave (a page the user already
    /// clipped is found with `notes_search`) and takes the notebook in the user's words.
    NotesV5,
    /// notes-v5 whose loop offers tools in phases: `web_clip` only when the user's message
    /// gives a URL, `email_send` only after `email_draft` has returned a draft.
    NotesV6,
    /// notes-v6 whose first round must read (a call to a tool that only reads), so no write
    /// comes before a look at the user's notes.
    NotesV7,
    /// notes-v6 whose drafts may state only figures the conversation has shown, and whose
    /// search hits show a to-do's due date first and call the note's own date `written`.
    NotesV8,
    /// notes-v6 with notes-v8's search hits (a to-do's due date first), and whose loop asks
    /// once for an answer in the model's own words when it answers with raw tool output.
    NotesV9,
    /// notes-v9 whose loop also asks once for an answer from the results when the answer states
    /// no figure or name they gave.
    NotesV10,
}

/// The kind of store a toolset works on (a suite's `store = "books" | "notes"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// The goodbooks-10k book catalogue.
    Books,
    /// The notes assistant's notebook.
    Notes,
}

/// A toolset name that is not one of [`ToolsetName::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown toolset `{name}` (known: {known})", known = known_names())]
pub struct UnknownToolset {
    pub name: String,
}

fn known_names() -> String {
    ToolsetName::ALL.map(ToolsetName::as_str).join(", ")
}

impl ToolsetName {
    /// Every toolset, in the order listings show them.
    pub const ALL: [ToolsetName; 16] = [
        ToolsetName::BooksV1,
        ToolsetName::BooksV2,
        ToolsetName::BooksV3,
        ToolsetName::BooksV4,
        ToolsetName::BooksV5,
        ToolsetName::BooksV6,
        ToolsetName::Notes,
        ToolsetName::NotesV2,
        ToolsetName::NotesV3,
        ToolsetName::NotesV4,
        ToolsetName::NotesV5,
        ToolsetName::NotesV6,
        ToolsetName::NotesV7,
        ToolsetName::NotesV8,
        ToolsetName::NotesV9,
        ToolsetName::NotesV10,
    ];

    /// The name it is given by (flags, reports, run records).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolsetName::BooksV1
            | ToolsetName::BooksV2
            | ToolsetName::BooksV3
            | ToolsetName::BooksV4
            | ToolsetName::BooksV6 => self.books_design().map_or("books", BooksDesign::name),
            // books-v4's tools under another loop design: its own name.
            ToolsetName::BooksV5 => "books-v5",
            ToolsetName::Notes => "notes",
            ToolsetName::NotesV2 => "notes-v2",
            ToolsetName::NotesV3 => "notes-v3",
            ToolsetName::NotesV4 => "notes-v4",
            ToolsetName::NotesV5 => "notes-v5",
            ToolsetName::NotesV6 => "notes-v6",
            ToolsetName::NotesV7 => "notes-v7",
            ToolsetName::NotesV8 => "notes-v8",
            ToolsetName::NotesV9 => "notes-v9",
            ToolsetName::NotesV10 => "notes-v10",
        }
    }

    /// One line on what it is, for help texts.
    pub fn summary(self) -> &'static str {
        match self {
            ToolsetName::BooksV1 => "The book catalogue as a straight CRUD API",
            ToolsetName::BooksV2 => "The book catalogue as tools designed for a model",
            ToolsetName::BooksV3 => {
                "books-v2 with writes that take the search's filters and repeats answered from the earlier result"
            }
            ToolsetName::BooksV4 => {
                "books-v3 with placeholder filters left out, years in the user's words and empty matches that say which filter to drop"
            }
            ToolsetName::BooksV5 => {
                "books-v4 whose loop asks once for the corrected call when the model answers after a refused call"
            }
            ToolsetName::BooksV6 => {
                "books-v4 whose writes name their books first: a books object (the search's filters, sort and limit) before the tag or status"
            }
            ToolsetName::Notes => "The notes assistant: notes, web clips, email drafts and sends",
            ToolsetName::NotesV2 => {
                "notes with a search that returns the best match whole and never lets a kind hide every match"
            }
            ToolsetName::NotesV3 => {
                "notes-v2 whose loop first searches the user's own words, so the model starts from the notes the question is about"
            }
            ToolsetName::NotesV4 => {
                "notes-v2 whose writes take notes by the user's words instead of ids, and refuse a name that fits no note or several with the call to make"
            }
            ToolsetName::NotesV5 => {
                "notes-v4 whose web_clip is only for a URL the user gave, sends pages already clipped to notes_search and takes the notebook in the user's words"
            }
            ToolsetName::NotesV6 => {
                "notes-v5 whose loop offers web_clip only when the user gives a URL and email_send only after a draft"
            }
            ToolsetName::NotesV7 => {
                "notes-v6 whose first round must read the notes, so no write comes before a look at them"
            }
            ToolsetName::NotesV8 => {
                "notes-v6 whose drafts state only figures the conversation has shown, with search hits that show a to-do's due date first"
            }
            ToolsetName::NotesV9 => {
                "notes-v6 with search hits that show a to-do's due date first, and one request for an answer in the model's own words after raw tool output"
            }
            ToolsetName::NotesV10 => {
                "notes-v9 with one request for an answer from the results when the answer states no figure or name they gave"
            }
        }
    }

    /// The kind of store it works on.
    pub fn store(self) -> StoreKind {
        match self {
            ToolsetName::BooksV1
            | ToolsetName::BooksV2
            | ToolsetName::BooksV3
            | ToolsetName::BooksV4
            | ToolsetName::BooksV5
            | ToolsetName::BooksV6 => StoreKind::Books,
            ToolsetName::Notes
            | ToolsetName::NotesV2
            | ToolsetName::NotesV3
            | ToolsetName::NotesV4
            | ToolsetName::NotesV5
            | ToolsetName::NotesV6
            | ToolsetName::NotesV7
            | ToolsetName::NotesV8
            | ToolsetName::NotesV9
            | ToolsetName::NotesV10 => StoreKind::Notes,
        }
    }

    /// The books crate's design for a books toolset.
    pub(crate) fn books_design(self) -> Option<BooksDesign> {
        match self {
            ToolsetName::BooksV1 => Some(BooksDesign::V1),
            ToolsetName::BooksV2 => Some(BooksDesign::V2),
            ToolsetName::BooksV3 => Some(BooksDesign::V3),
            // The same tools as books-v4: v5 changes only the loop.
            ToolsetName::BooksV4 | ToolsetName::BooksV5 => Some(BooksDesign::V4),
            ToolsetName::BooksV6 => Some(BooksDesign::V6),
            ToolsetName::Notes
            | ToolsetName::NotesV2
            | ToolsetName::NotesV3
            | ToolsetName::NotesV4
            | ToolsetName::NotesV5
            | ToolsetName::NotesV6
            | ToolsetName::NotesV7
            | ToolsetName::NotesV8
            | ToolsetName::NotesV9
            | ToolsetName::NotesV10 => None,
        }
    }

    /// The loop settings the toolset was designed with, on the loop's defaults: `notes-v2` and
    /// `books-v4` correct an answer that describes a call, end tool use at a second exact
    /// repeat, and ask for a call in the first round (every question to either assistant is
    /// about the user's own data). Front ends start from this and set what is theirs (rounds,
    /// sampling).
    pub fn agent_config(self) -> AgentConfig {
        match self {
            ToolsetName::BooksV1
            | ToolsetName::BooksV2
            | ToolsetName::BooksV3
            | ToolsetName::Notes => AgentConfig::default(),
            // notes-v4 changes the tools only, so it runs notes-v2's loop: the paired eval
            // measures the writes by words and nothing else.
            // notes-v5 likewise: it changes web_clip only.
            ToolsetName::NotesV2 | ToolsetName::NotesV4 | ToolsetName::NotesV5 => AgentConfig {
                correct_described_calls: true,
                end_tools_after_repeats: true,
                first_round_must_call: true,
                ..AgentConfig::default()
            },
            // notes-v5's loop, with tools offered in phases (*wrong tool*: a page the user
            // already clipped clipped again from a made-up URL, 6 of notes-v4's 25 failed dev
            // runs; *wrong final state*: a send of a guessed draft id before any draft, 3).
            // Not `email_draft` after a read: in its smoke the model, offered no email tool
            // in the forced first round, saved the email as a note instead.
            ToolsetName::NotesV6 => AgentConfig {
                correct_described_calls: true,
                end_tools_after_repeats: true,
                first_round_must_call: true,
                offer_rules: vec![
                    OfferRule::when_user_gives_url("web_clip"),
                    OfferRule::after("email_send", &["email_draft"]),
                ],
                ..AgentConfig::default()
            },
            // notes-v6's loop, and a first round that must read (*wrong final state*: a draft
            // with a made-up figure written before any read, 3 of notes-v4's failed dev runs;
            // in notes-v6's smoke, a question and two emails saved as notes in the forced
            // first round).
            ToolsetName::NotesV7 => AgentConfig {
                first_round_reads: true,
                ..ToolsetName::NotesV6.agent_config()
            },
            // notes-v6's loop, and drafts that may state only figures the conversation has
            // shown (*wrong final state*: draft-launch-budget-two-recipients drafted a made-up
            // budget in its first round, 3 of notes-v6's 3 dev runs). Unlike notes-v7's forced
            // read, only the write with the made-up figure is stopped.
            ToolsetName::NotesV8 => AgentConfig {
                grounded_figures: vec![GroundRule::new("email_draft", "notes_search")],
                ..ToolsetName::NotesV6.agent_config()
            },
            // notes-v6's loop, and one correction of an answer that is raw tool output
            // (*echoed tool result*: the demo's question answered with the search hit's JSON in
            // a code block, seed 4 of evals/runs/demo-first-step-notes-v6-embedded; an echoed
            // result in read-expense-report-due, notes-v4's dev runs).
            ToolsetName::NotesV9 => AgentConfig {
                correct_echoed_answers: true,
                ..ToolsetName::NotesV6.agent_config()
            },
            // notes-v9's loop, and one correction of an answer that states nothing the results
            // gave (*wrong answer*: the demo's question answered "Let me know if you'd like me
            // to provide any further assistance." and "I cannot answer this question without
            // more information." with the hit in hand, seeds 4 and 2 of
            // evals/runs/demo-first-step-notes-v9-embedded).
            ToolsetName::NotesV10 => AgentConfig {
                correct_unfounded_answers: true,
                ..ToolsetName::NotesV9.agent_config()
            },
            // The same levers, for books-v4's failure kinds in the v3 runs: calls described
            // instead of made (*no tool call*, *wrong answer*), a write repeated to the round
            // cap (*round cap*).
            ToolsetName::BooksV4 => AgentConfig {
                correct_described_calls: true,
                end_tools_after_repeats: true,
                first_round_must_call: true,
                ..AgentConfig::default()
            },
            // books-v4's levers, and one retry of a refused call: v4 acted on 0 of its 9
            // *invalid arguments* refusals on dev, answering with a promise instead.
            ToolsetName::BooksV5 => AgentConfig {
                correct_described_calls: true,
                end_tools_after_repeats: true,
                first_round_must_call: true,
                retry_refused_calls: true,
                ..AgentConfig::default()
            },
            // books-v6 changes the write tools only, so it runs books-v4's loop: the paired
            // eval measures the writes that name their books first and nothing else.
            ToolsetName::BooksV6 => ToolsetName::BooksV4.agent_config(),
            // notes-v2's correction and repeat levers, and the loop's own first read of the
            // user's words (*wrong final state* and *invalid arguments* from guessed ids,
            // *wrong answer* from filters that hid the note). No forced first call: the loop's
            // read is the first round's call, and a question it already answers needs none.
            ToolsetName::NotesV3 => AgentConfig {
                correct_described_calls: true,
                end_tools_after_repeats: true,
                read_first: Some(ReadFirst {
                    tool: "notes_search".into(),
                    argument: "query".into(),
                    words: toolgate_notes::search::keyword_query,
                }),
                ..AgentConfig::default()
            },
        }
    }

    /// The notes crate's design for a notes toolset.
    pub(crate) fn notes_design(self) -> Option<NotesDesign> {
        match self {
            ToolsetName::BooksV1
            | ToolsetName::BooksV2
            | ToolsetName::BooksV3
            | ToolsetName::BooksV4
            | ToolsetName::BooksV5
            | ToolsetName::BooksV6 => None,
            ToolsetName::Notes => Some(NotesDesign::V1),
            // The same tools as notes-v2: v3 changes only the loop.
            ToolsetName::NotesV2 | ToolsetName::NotesV3 => Some(NotesDesign::V2),
            ToolsetName::NotesV4 => Some(NotesDesign::V4),
            // The same tools as notes-v5: v6 changes only which the loop offers when.
            ToolsetName::NotesV5 | ToolsetName::NotesV6 | ToolsetName::NotesV7 => {
                Some(NotesDesign::V5)
            }
            // Hits that show a to-do's due date first (*wrong answer*: read-expense-report-due
            // answered the to-do's date, the day it was written, 3 of notes-v6's 3 dev runs).
            // notes-v8's hits with notes-v6's loop: notes-v8's due-date lever (read-expense-
            // report-due 0 -> 2 of 3) without its grounded-figures refusal (two drafts 3 -> 1).
            ToolsetName::NotesV8 | ToolsetName::NotesV9 | ToolsetName::NotesV10 => {
                Some(NotesDesign::V8)
            }
        }
    }
}

impl fmt::Display for ToolsetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolsetName {
    type Err = UnknownToolset;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ToolsetName::ALL
            .into_iter()
            .find(|t| t.as_str() == name)
            .ok_or_else(|| UnknownToolset { name: name.into() })
    }
}

impl StoreKind {
    /// The toolsets that work on this kind of store, in [`ToolsetName::ALL`] order.
    pub fn toolsets(self) -> Vec<ToolsetName> {
        ToolsetName::ALL
            .into_iter()
            .filter(|t| t.store() == self)
            .collect()
    }

    /// What an eval of a suite on this store compares when it is not told: the seeds'
    /// comparison for the catalogue (the CRUD design against the task-shaped one; books-v3 is
    /// compared with v2 when asked for), the one toolset for notes.
    pub fn compared_by_default(self) -> Vec<ToolsetName> {
        match self {
            StoreKind::Books => vec![ToolsetName::BooksV1, ToolsetName::BooksV2],
            StoreKind::Notes => vec![ToolsetName::Notes],
        }
    }

    /// The file name of the default store in the user data folder.
    pub fn default_file(self) -> &'static str {
        match self {
            StoreKind::Books => "books.sqlite",
            StoreKind::Notes => "notes.sqlite",
        }
    }

    /// What a new store of this kind starts with ("the book catalogue", "the sample
    /// notebook"), for a front end that says it is creating one.
    pub fn initial_contents(self) -> &'static str {
        match self {
            StoreKind::Books => "the book catalogue",
            StoreKind::Notes => "the sample notebook",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_and_others_are_refused() {
        let names: Vec<&str> = ToolsetName::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(
            names,
            [
                "books-v1",
                "books-v2",
                "books-v3",
                "books-v4",
                "books-v5",
                "books-v6",
                "notes",
                "notes-v2",
                "notes-v3",
                "notes-v4",
                "notes-v5",
                "notes-v6",
                "notes-v7",
                "notes-v8",
                "notes-v9",
                "notes-v10"
            ]
        );
        for toolset in ToolsetName::ALL {
            assert_eq!(toolset.to_string().parse::<ToolsetName>(), Ok(toolset));
        }
        let err = "books-v9".parse::<ToolsetName>().unwrap_err();
        assert!(err.to_string().contains("books-v1"), "{err}");
    }

    #[test]
    fn each_later_design_differs_from_the_one_it_is_measured_against_by_its_own_levers_only() {
        let v4 = ToolsetName::BooksV4.agent_config();
        let v5 = ToolsetName::BooksV5.agent_config();
        assert!(v5.retry_refused_calls && !v4.retry_refused_calls);
        assert_eq!(
            (
                v5.correct_described_calls,
                v5.end_tools_after_repeats,
                v5.first_round_must_call
            ),
            (
                v4.correct_described_calls,
                v4.end_tools_after_repeats,
                v4.first_round_must_call
            )
        );
        assert_eq!(
            ToolsetName::BooksV5.books_design(),
            ToolsetName::BooksV4.books_design()
        );
        // books-v6 is books-v4's loop exactly, with other write tools.
        assert_eq!(
            format!("{:?}", ToolsetName::BooksV6.agent_config()),
            format!("{v4:?}")
        );
        assert_ne!(
            ToolsetName::BooksV6.books_design(),
            ToolsetName::BooksV4.books_design()
        );
        let v3 = ToolsetName::NotesV3.agent_config();
        assert!(
            v3.read_first.is_some() && ToolsetName::NotesV2.agent_config().read_first.is_none()
        );
        assert_eq!(
            ToolsetName::NotesV3.notes_design(),
            ToolsetName::NotesV2.notes_design()
        );
        // notes-v4 is notes-v2's loop exactly, with other write tools.
        assert_eq!(
            format!("{:?}", ToolsetName::NotesV4.agent_config()),
            format!("{:?}", ToolsetName::NotesV2.agent_config())
        );
        assert_ne!(
            ToolsetName::NotesV4.notes_design(),
            ToolsetName::NotesV2.notes_design()
        );
        // notes-v5 is notes-v4's loop exactly, with another web_clip.
        assert_eq!(
            format!("{:?}", ToolsetName::NotesV5.agent_config()),
            format!("{:?}", ToolsetName::NotesV4.agent_config())
        );
        // notes-v6 is notes-v5's tools and loop, with phase rules.
        let v6 = ToolsetName::NotesV6.agent_config();
        assert_eq!(
            format!(
                "{:?}",
                AgentConfig {
                    offer_rules: Vec::new(),
                    ..v6.clone()
                }
            ),
            format!("{:?}", ToolsetName::NotesV5.agent_config())
        );
        assert!(!v6.offer_rules.is_empty());
        // notes-v7 is notes-v6 with a first round that reads.
        let v7 = ToolsetName::NotesV7.agent_config();
        assert!(v7.first_round_reads && !v6.first_round_reads);
        assert_eq!(
            format!(
                "{:?}",
                AgentConfig {
                    first_round_reads: false,
                    ..v7
                }
            ),
            format!("{v6:?}")
        );
        assert_eq!(
            ToolsetName::NotesV6.notes_design(),
            ToolsetName::NotesV5.notes_design()
        );
        // notes-v8 is notes-v6's loop with grounded drafts, and other search hits.
        let v8 = ToolsetName::NotesV8.agent_config();
        assert!(!v8.grounded_figures.is_empty() && v6.grounded_figures.is_empty());
        assert_eq!(
            format!(
                "{:?}",
                AgentConfig {
                    grounded_figures: Vec::new(),
                    ..v8
                }
            ),
            format!("{v6:?}")
        );
        assert_ne!(
            ToolsetName::NotesV8.notes_design(),
            ToolsetName::NotesV6.notes_design()
        );
        // notes-v9 is notes-v6's loop with the echo correction, and notes-v8's hits.
        let v9 = ToolsetName::NotesV9.agent_config();
        assert!(v9.correct_echoed_answers && !v6.correct_echoed_answers);
        assert_eq!(
            format!(
                "{:?}",
                AgentConfig {
                    correct_echoed_answers: false,
                    ..v9
                }
            ),
            format!("{v6:?}")
        );
        assert_eq!(
            ToolsetName::NotesV9.notes_design(),
            ToolsetName::NotesV8.notes_design()
        );
        // notes-v10 is notes-v9 with the unfounded-answer correction, on the same hits.
        let v10 = ToolsetName::NotesV10.agent_config();
        assert!(v10.correct_unfounded_answers && !v9.correct_unfounded_answers);
        assert_eq!(
            format!(
                "{:?}",
                AgentConfig {
                    correct_unfounded_answers: false,
                    ..v10
                }
            ),
            format!("{:?}", ToolsetName::NotesV9.agent_config())
        );
        assert_eq!(
            ToolsetName::NotesV10.notes_design(),
            ToolsetName::NotesV9.notes_design()
        );
        for toolset in ToolsetName::ALL {
            let config = toolset.agent_config();
            assert_eq!(
                config.correct_unfounded_answers,
                toolset == ToolsetName::NotesV10,
                "{toolset}"
            );
            assert_eq!(
                config.offer_rules.is_empty(),
                !matches!(
                    toolset,
                    ToolsetName::NotesV6
                        | ToolsetName::NotesV7
                        | ToolsetName::NotesV8
                        | ToolsetName::NotesV9
                        | ToolsetName::NotesV10
                ),
                "{toolset}"
            );
            assert_eq!(
                config.correct_echoed_answers,
                matches!(toolset, ToolsetName::NotesV9 | ToolsetName::NotesV10),
                "{toolset}"
            );
            assert_eq!(
                config.grounded_figures.is_empty(),
                toolset != ToolsetName::NotesV8,
                "{toolset}"
            );
            assert_eq!(
                config.retry_refused_calls,
                toolset == ToolsetName::BooksV5,
                "{toolset}"
            );
        }
    }

    #[test]
    fn books_v4_runs_with_the_loop_levers_and_earlier_books_designs_without() {
        let v4 = ToolsetName::BooksV4.agent_config();
        assert!(
            v4.correct_described_calls && v4.end_tools_after_repeats && v4.first_round_must_call
        );
        for earlier in [
            ToolsetName::BooksV1,
            ToolsetName::BooksV2,
            ToolsetName::BooksV3,
        ] {
            let config = earlier.agent_config();
            assert!(
                !config.correct_described_calls
                    && !config.end_tools_after_repeats
                    && !config.first_round_must_call,
                "{earlier} keeps the loop it was measured with"
            );
        }
    }

    #[test]
    fn each_store_kind_lists_its_toolsets() {
        assert_eq!(
            StoreKind::Books.toolsets(),
            [
                ToolsetName::BooksV1,
                ToolsetName::BooksV2,
                ToolsetName::BooksV3,
                ToolsetName::BooksV4,
                ToolsetName::BooksV5,
                ToolsetName::BooksV6
            ]
        );
        assert_eq!(
            StoreKind::Books.compared_by_default(),
            [ToolsetName::BooksV1, ToolsetName::BooksV2]
        );
        assert_eq!(StoreKind::Notes.compared_by_default(), [ToolsetName::Notes]);
        assert_eq!(
            StoreKind::Notes.toolsets(),
            [
                ToolsetName::Notes,
                ToolsetName::NotesV2,
                ToolsetName::NotesV3,
                ToolsetName::NotesV4,
                ToolsetName::NotesV5,
                ToolsetName::NotesV6,
                ToolsetName::NotesV7,
                ToolsetName::NotesV8,
                ToolsetName::NotesV9,
                ToolsetName::NotesV10
            ]
        );
        for toolset in ToolsetName::ALL {
            assert!(toolset.store().toolsets().contains(&toolset));
            assert_eq!(
                toolset.books_design().is_some(),
                toolset.store() == StoreKind::Books
            );
            assert_eq!(
                toolset.notes_design().is_some(),
                toolset.store() == StoreKind::Notes
            );
        }
    }
}
