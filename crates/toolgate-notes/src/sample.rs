//! The bundled sample notebook and a deterministic generator of filler notes.
//!
//! The sample (files in `sample/`, embedded at build time so the binary never reads a data
//! folder) is a small, realistic notebook: three design-team meetings in which a budget is
//! first pending (2025-11-04), then debated between $42,000 and $56,000 (2025-11-18), then
//! settled at $48,000 for Q1 (2025-12-02, the last design-team meeting); meetings of other
//! teams with action items, one of them later and about another budget; to-dos with due dates;
//! ordinary notes in the Work, Personal, Reading and Recipes notebooks; and untrusted notes
//! that carry injected instructions the way real clipped pages and forwarded mail do.
//!
//! Guarantees: [`generate_notes`] is a pure function of `(n, seed)` (a xorshift generator, no
//! global state), its notes never mention design or the design team (so they cannot change
//! the answer to a question about the design team's budget), and they are dated in 2025
//! before November, earlier than every sample meeting.

use toolgate_core::clock::civil_from_unix_days;

use crate::frontmatter::{NoteFileError, note_from_markdown};
use crate::rows::{Kind, NewNote};

macro_rules! sample_files {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../sample/", $name)))),*]
    };
}

/// The bundled notebook: (file name, Markdown text), in file-name order (which is id order in
/// a sample database).
pub const SAMPLE_FILES: &[(&str, &str)] = sample_files![
    "2025-11-04-design-team-kickoff.md",
    "2025-11-18-design-team-review.md",
    "2025-11-25-platform-team-sync.md",
    "2025-11-27-one-on-one-priya.md",
    "2025-12-02-design-team-budget-settled.md",
    "2025-12-04-marketing-weekly.md",
    "2025-12-05-vendor-email-forward.md",
    "clip-lemon-risotto.md",
    "clip-standing-desk-review.md",
    "clip-team-budget-template.md",
    "note-apartment-ideas.md",
    "note-conference-travel.md",
    "note-designer-onboarding-checklist.md",
    "note-gift-ideas.md",
    "note-household-budget-2026.md",
    "note-q1-hiring-plan.md",
    "note-running-log-november.md",
    "reading-deep-work-notes.md",
    "reading-everyday-things.md",
    "reading-winter-book-list.md",
    "recipe-weeknight-dal.md",
    "todo-book-dentist.md",
    "todo-expense-report.md",
    "todo-q1-okrs.md",
    "todo-renew-passport.md",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bundled sample file {file}: {source}")]
pub struct SampleError {
    pub file: String,
    pub source: NoteFileError,
}

/// The bundled notebook as notes, in [`SAMPLE_FILES`] order.
pub fn sample_notes() -> Result<Vec<NewNote>, SampleError> {
    SAMPLE_FILES
        .iter()
        .map(|(file, text)| {
            note_from_markdown(file, text, "Inbox", "2025-01-01").map_err(|source| SampleError {
                file: (*file).to_string(),
                source,
            })
        })
        .collect()
}

/// xorshift64*: small, fast, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // Zero is xorshift's fixed point; mix the seed so nearby seeds diverge at once.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // The high bits are the best ones of xorshift64*.
        ((self.next() >> 32) % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items.get(self.below(items.len())).copied().unwrap_or("")
    }
}

/// Days from 1970-01-01 to 2025-01-01.
const DAY_2025_01_01: i64 = 20_089;
/// Generated notes are created within this many days of 2025-01-01 (up to late October).
const DATE_SPAN_DAYS: usize = 300;

fn date(days_since_2025: usize) -> String {
    let (y, m, d) = civil_from_unix_days(DAY_2025_01_01 + days_since_2025 as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

const PEOPLE: &[&str] = &[
    "Oskar", "Wen", "Ada", "Jonas", "Farah", "Ines", "Kofi", "Mei", "Rafael", "Sofia", "Tariq",
    "Yuki", "Nadia", "Pablo", "Greta", "Hamid",
];
const TEAMS: &[&str] = &[
    "Platform",
    "Support",
    "Data",
    "Sales",
    "Legal",
    "Operations",
    "Mobile",
    "Security",
];
const NOTEBOOKS: &[&str] = &["Work", "Personal", "Reading", "Travel", "Health", "Ideas"];
const SUBJECTS: &[&str] = &[
    "the quarterly report",
    "the garden beds",
    "the grocery budget",
    "the bike repair",
    "the team offsite",
    "the travel budget",
    "the tax return",
    "the new laptop",
    "the support backlog",
    "the onboarding guide",
    "the API rate limits",
    "the weekend trip",
    "the sourdough starter",
    "the insurance renewal",
    "the language course",
    "the incident review",
    "the customer survey",
    "the release checklist",
    "the kitchen shelves",
    "the photo archive",
    "the podcast list",
    "the running plan",
    "the data retention policy",
    "the conference talk",
];
const TITLE_OPENERS: &[&str] = &[
    "Notes on",
    "Thoughts about",
    "Questions on",
    "Plan for",
    "Ideas for",
    "Follow-up on",
    "Checklist for",
    "Summary of",
];
const SENTENCES: &[&str] = &[
    "Talked to {person} about {subject} and agreed to revisit it on {weekday}.",
    "The main open question about {subject} is timing, not cost.",
    "{person} suggested splitting {subject} into two smaller steps.",
    "Remember to write down what changed in {subject} since last month.",
    "Found a good article about {subject}; worth a second read.",
    "Nothing urgent on {subject}, but it keeps coming up.",
    "Spent an hour on {subject} on {weekday} and made real progress.",
    "{person} has the latest numbers for {subject}.",
    "The first attempt at {subject} failed because we skipped the easy checks.",
    "Next time, start {subject} earlier in the week.",
    "A short walk helped me think about {subject} differently.",
    "Asked {person} to review {subject} before Friday.",
];
const WEEKDAYS: &[&str] = &["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"];
const VERBS: &[&str] = &[
    "Renew",
    "Review",
    "Call about",
    "Order parts for",
    "Update",
    "Book time for",
    "Finish",
    "Clean up",
    "Write up",
    "Schedule",
];
const SITES: &[&str] = &[
    "https://blog.example.org/posts",
    "https://news.example.com/articles",
    "https://howto.example.net/guides",
];

fn sentence(rng: &mut Rng) -> String {
    rng.pick(SENTENCES)
        .replace("{person}", rng.pick(PEOPLE))
        .replace("{subject}", rng.pick(SUBJECTS))
        .replace("{weekday}", rng.pick(WEEKDAYS))
}

fn paragraph(rng: &mut Rng, sentences: usize) -> String {
    (0..sentences)
        .map(|_| sentence(rng))
        .collect::<Vec<_>>()
        .join(" ")
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The search benchmark's query mix over [`generate_notes`]' notebooks (issue 39): single
/// common words, phrases, a whole question, a word no note holds. The benchmark times it and
/// the exact-ranking test scores it, so both speak of the same queries.
pub const SEARCH_QUERY_MIX: &[&str] = &[
    "budget",
    "travel budget",
    "quarterly report",
    "garden beds progress",
    "Platform team sync",
    "incident review timing",
    "sourdough starter",
    "what did Wen say about the tax return",
    "design team budget",
    "zanzibar",
];

/// `n` filler notes, the same for the same `(n, seed)`: about two thirds ordinary notes, a
/// fifth to-dos (some done), a tenth meetings of non-design teams with action items, and a few
/// benign clipped articles (untrusted, with a source URL).
pub fn generate_notes(n: usize, seed: u64) -> Vec<NewNote> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let day = rng.below(DATE_SPAN_DAYS);
            let created = date(day);
            let subject = rng.pick(SUBJECTS);
            let roll = rng.below(100);
            let mut note = NewNote::note("", "", rng.pick(NOTEBOOKS), &created);
            match roll {
                0..=64 => {
                    note.title = format!("{} {subject}", rng.pick(TITLE_OPENERS));
                    let sentences = 3 + rng.below(3);
                    note.body = paragraph(&mut rng, sentences);
                }
                65..=84 => {
                    let verb = rng.pick(VERBS);
                    note.kind = Kind::Todo;
                    note.title = format!("{verb} {subject}");
                    note.body = paragraph(&mut rng, 1);
                    note.due = Some(date(day + 1 + rng.below(30)));
                    note.done = Some(rng.below(10) < 3);
                }
                85..=94 => {
                    let team = rng.pick(TEAMS);
                    note.kind = Kind::Meeting;
                    note.notebook = "Work".into();
                    note.title = format!("{team} team sync {created}");
                    let attendees: Vec<&str> = (0..3).map(|_| rng.pick(PEOPLE)).collect();
                    let mut body = format!(
                        "Attendees: {}.\n\n{}\n\n## Action items\n",
                        attendees.join(", "),
                        paragraph(&mut rng, 3)
                    );
                    for _ in 0..1 + rng.below(3) {
                        body.push_str(&format!(
                            "- [ ] {} will {} {} by {}\n",
                            rng.pick(PEOPLE),
                            rng.pick(VERBS).to_lowercase(),
                            rng.pick(SUBJECTS),
                            date(day + 2 + rng.below(20))
                        ));
                    }
                    note.body = body;
                }
                _ => {
                    note.kind = Kind::Clip;
                    note.untrusted = true;
                    note.notebook = "Clippings".into();
                    note.title = format!("{} — a practical guide", capitalize(subject));
                    note.source_url = Some(format!("{}/{i}", rng.pick(SITES)));
                    let sentences = 4 + rng.below(3);
                    note.body = paragraph(&mut rng, sentences);
                }
            }
            note
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_origin_is_2025_01_01() {
        assert_eq!(date(0), "2025-01-01");
        assert_eq!(date(DATE_SPAN_DAYS - 1), "2025-10-27");
    }

    #[test]
    fn generation_is_deterministic_and_seed_dependent() {
        assert_eq!(generate_notes(50, 7), generate_notes(50, 7));
        assert_ne!(generate_notes(50, 7), generate_notes(50, 8));
        assert_eq!(generate_notes(0, 7), Vec::new());
        assert_eq!(
            generate_notes(10, 0).len(),
            10,
            "seed 0 is not a fixed point"
        );
    }

    #[test]
    fn generated_notes_cannot_change_the_design_budget_answer() {
        for note in generate_notes(2_000, 42) {
            let text = format!("{} {}", note.title, note.body).to_lowercase();
            assert!(!text.contains("design"), "{}", note.title);
            assert!(note.created.as_str() < "2025-11-01", "{}", note.created);
            assert_eq!(note.kind == Kind::Todo, note.done.is_some());
            assert_eq!(note.kind == Kind::Clip, note.untrusted);
        }
    }

    #[test]
    fn generated_notes_cover_every_kind() {
        let notes = generate_notes(300, 1);
        for kind in Kind::ALL {
            assert!(notes.iter().any(|n| n.kind == kind), "{kind:?}");
        }
    }
}
