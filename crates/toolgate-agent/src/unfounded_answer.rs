//! Unfounded answers: a final answer that states nothing the run's reads returned, after they
//! returned something (the embedded model, holding the search hit that says "$48,000", answered
//! "Let me know if you'd like me to provide any further assistance." and, in another run, "I
//! cannot answer this question without more information.":
//! `evals/runs/demo-first-step-notes-v9-embedded`, seeds 4 and 2).
//!
//! The loop's [`crate::AgentConfig::correct_unfounded_answers`] answers such an answer with one
//! corrective turn per run. Failure kind it targets, in the eval's taxonomy: *wrong answer* (an
//! answer that gives up or closes politely while the results hold the answer).
//!
//! What an answer is founded on ([`data_tokens`]): its figures (runs of digits, a thousands
//! separator inside them ignored, so "$48,000" is `48000`) and its names (words that start with
//! a capital letter, other than "I"; a sentence's first word only when the results name it so
//! mid-sentence, since every sentence opens with a capital). An answer is *unfounded* when
//! the run has at least one tool result that is not an error, and none of the answer's figures
//! or names appears in any such result, leaving out those the user's own messages contain
//! (restating the question founds nothing). Words are compared without case.
//!
//! Guarantees: pure and deterministic. No list of phrases: an answer is judged only by whether
//! it carries a figure or a name the results gave, never by its wording. So a right answer made
//! only of lowercase words ("in your reading notebook") is also asked once more; the second
//! answer is final whatever it says, and a run without a successful result is never asked. The
//! correction quotes nothing the model or a tool wrote.

use std::collections::BTreeSet;

use serde::Serialize;

/// Why an answer is unfounded: how many figures and names it had, none from a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unfounded {
    /// The answer's figures and names (after leaving out the user's), none found in a result.
    pub data_tokens: usize,
    /// The tool results without error the answer could have been founded on.
    pub results: usize,
}

impl Unfounded {
    pub fn describe(&self) -> String {
        format!(
            "its final answer states no figure or name from the {} tool result(s) it read ({} of its own)",
            self.results, self.data_tokens
        )
    }
}

/// The loop's one corrective turn for an unfounded answer.
pub const CORRECTION: &str = "Your answer gives nothing from the tool results above. Read them again and answer my question from what they say, with the figures or names that answer it; if they really do not answer it, say what they do contain.";

/// The figures and names `text` states (see the module documentation), lower-cased.
pub fn data_tokens(text: &str) -> BTreeSet<String> {
    data_and_opening_words(text).0
}

/// [`data_tokens`], and the capitalized words that open a sentence (lower-cased): a name there
/// ("Priya was there.") looks like any opening word, so it counts only when the results name it.
fn data_and_opening_words(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut tokens = BTreeSet::new();
    let mut openings = BTreeSet::new();
    let mut sentence_start = true;
    for word in words(text) {
        let capitalized = word.text.chars().next().is_some_and(char::is_uppercase);
        if word.text.chars().any(|c| c.is_ascii_digit()) {
            let digits: String = word.text.chars().filter(char::is_ascii_digit).collect();
            tokens.insert(digits);
        } else if capitalized && word.text != "I" {
            if sentence_start {
                openings.insert(word.text.to_lowercase());
            } else {
                tokens.insert(word.text.to_lowercase());
            }
        }
        sentence_start = word.ends_sentence;
    }
    (tokens, openings)
}

/// Every word of the texts, lower-cased, with a figure's digits alone, for looking tokens up.
fn vocabulary(texts: &[&str]) -> BTreeSet<String> {
    texts
        .iter()
        .flat_map(|t| words(t))
        .map(|w| {
            if w.text.chars().any(|c| c.is_ascii_digit()) {
                w.text.chars().filter(char::is_ascii_digit).collect()
            } else {
                w.text.to_lowercase()
            }
        })
        .collect()
}

struct Word<'a> {
    text: &'a str,
    /// Followed by `.`, `!`, `?` or a line break before the next word.
    ends_sentence: bool,
}

/// Words: runs of letters, digits and apostrophes, a `,` or `.` between digits kept inside
/// ("48,000", "2.5"), with whether a sentence ends after each.
fn words(text: &str) -> Vec<Word<'_>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out: Vec<Word<'_>> = Vec::new();
    let mut start: Option<usize> = None;
    for (i, &(at, c)) in chars.iter().enumerate() {
        let digit_separator = matches!(c, ',' | '.')
            && i > 0
            && chars[i - 1].1.is_ascii_digit()
            && chars.get(i + 1).is_some_and(|(_, n)| n.is_ascii_digit());
        if c.is_alphanumeric() || c == '\'' || digit_separator {
            start.get_or_insert(at);
            continue;
        }
        if let Some(s) = start.take() {
            out.push(Word {
                text: &text[s..at],
                ends_sentence: false,
            });
        }
        if matches!(c, '.' | '!' | '?' | '\n')
            && let Some(last) = out.last_mut()
        {
            last.ends_sentence = true;
        }
    }
    if let Some(s) = start {
        out.push(Word {
            text: &text[s..],
            ends_sentence: true,
        });
    }
    out
}

/// Whether `answer` states nothing from the successful tool `results`, given the user's own
/// messages `user_texts` (see the module documentation); `None` when it states something, or
/// when there is no result to state anything from.
pub fn unfounded_answer(answer: &str, user_texts: &[&str], results: &[&str]) -> Option<Unfounded> {
    if results.is_empty() || answer.trim().is_empty() {
        return None;
    }
    let users = vocabulary(user_texts);
    let named_by_results: BTreeSet<String> = results.iter().flat_map(|r| data_tokens(r)).collect();
    let (tokens, openings) = data_and_opening_words(answer);
    let own: BTreeSet<String> = tokens
        .into_iter()
        .chain(
            openings
                .into_iter()
                .filter(|w| named_by_results.contains(w)),
        )
        .filter(|t| !users.contains(t))
        .collect();
    let found = vocabulary(results);
    if own.iter().any(|t| found.contains(t)) {
        return None;
    }
    Some(Unfounded {
        data_tokens: own.len(),
        results: results.len(),
    })
}

#[cfg(test)]
#[path = "unfounded_answer_tests.rs"]
mod tests;
