//! Echoed answers: a final answer that hands the user raw tool output instead of answering
//! (the embedded model, asked for the design budget, answered with the search hit's JSON in a
//! code block: `evals/runs/demo-first-step-notes-v6-embedded`, seed 4).
//!
//! The loop's [`crate::AgentConfig::correct_echoed_answers`] answers such an answer with one
//! corrective turn per run, and the eval's checks fail a run that ends with one (*echoed tool
//! result*); both use [`echoed_tool_output`], so what the loop corrects is what the eval fails.
//!
//! Guarantees: pure and deterministic. [`echoed_tool_output`] finds every JSON object (with at
//! least one member) written in the answer and in the tool results, and calls the answer an
//! echo when the answer's characters inside objects equal (as JSON values, so re-indenting or
//! re-spacing does not hide a copy) to an object of some tool result, or starting with one of
//! the `cut_open` texts (a result's kept part that a record cut short), are at least half of
//! the answer. Nested objects count once.
//!
//! Not an echo: an answer that quotes a phrase or a value of a result ("due 2025-12-12"):
//! quoting a note's words is how a note is answered from; an answer that writes a JSON object of
//! its own (a described call: [`crate::described_call`]); an answer with a small copied object
//! inside more words than it. The correction quotes nothing the model or a tool wrote.

use serde::Serialize;
use serde_json::Value;

/// Why an answer is an echo: how much of it is copied tool output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Echo {
    /// Characters of the answer inside objects copied from a tool result.
    pub copied_chars: usize,
    /// Characters of the answer, without leading and trailing whitespace.
    pub answer_chars: usize,
}

impl Echo {
    pub fn describe(&self) -> String {
        format!(
            "its final answer is raw tool output: {} of its {} characters are JSON objects copied from the run's tool results",
            self.copied_chars, self.answer_chars
        )
    }
}

/// The loop's one corrective turn for an echoed answer.
pub const CORRECTION: &str = "That is the tools' raw output, not an answer. Answer my question now, in a sentence or two of your own words, from those results.";

/// The JSON objects (with at least one member) written in `text`, nested ones included, with
/// the byte range of each.
pub fn objects_in(text: &str) -> Vec<(std::ops::Range<usize>, Value)> {
    text.char_indices()
        .filter(|(_, c)| *c == '{')
        .filter_map(|(start, _)| {
            let mut stream =
                serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
            match stream.next() {
                Some(Ok(value @ Value::Object(_)))
                    if value.as_object().is_some_and(|m| !m.is_empty()) =>
                {
                    Some((start..start + stream.byte_offset(), value))
                }
                _ => None,
            }
        })
        .collect()
}

/// Whether `answer` is mostly raw output of the tool results `results`, or copies of the
/// results' cut-off objects `cut_open` (see the module doc).
pub fn echoed_tool_output(answer: &str, results: &[&str], cut_open: &[&str]) -> Option<Echo> {
    let answer = answer.trim();
    let answer_chars = answer.chars().count();
    if answer_chars == 0 || !answer.contains('{') {
        return None;
    }
    let from_results: Vec<Value> = results
        .iter()
        .flat_map(|r| objects_in(r).into_iter().map(|(_, v)| v))
        .collect();
    let mut copied: Vec<std::ops::Range<usize>> = objects_in(answer)
        .into_iter()
        .filter(|(range, v)| {
            from_results.contains(v)
                || cut_open
                    .iter()
                    .any(|k| answer[range.clone()].starts_with(k))
        })
        .map(|(range, _)| range)
        .collect();
    // Nested copies overlap their parents: count each character once.
    copied.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<usize>> = Vec::new();
    for range in copied {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    let copied_chars: usize = merged
        .iter()
        .map(|r| answer[r.clone()].chars().count())
        .sum();
    // At least half: more of the answer is the tools' output than the model's words.
    (copied_chars * 2 >= answer_chars).then_some(Echo {
        copied_chars,
        answer_chars,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESULT: &str = r#"{"result":{"hits":[{"id":5,"title":"Design team sync","text":"We settled on $48,000 for Q1."}],"next_step":"answer from the first hit"}}"#;

    #[test]
    fn a_hit_copied_into_a_code_block_is_an_echo_and_a_sentence_from_it_is_not() {
        let hit = &RESULT[RESULT.find(r#"{"id""#).unwrap()..RESULT.find("}]").unwrap() + 1];
        let copied = format!("```\n{hit}\n```");
        assert!(echoed_tool_output(&copied, &[RESULT], &[]).is_some());
        let answered = "We settled on $48,000 for Q1, in the design team sync.";
        assert_eq!(echoed_tool_output(answered, &[RESULT], &[]), None);
        // Nothing to copy from: no echo, whatever the answer holds.
        assert_eq!(echoed_tool_output(&copied, &[], &[]), None);
    }

    #[test]
    fn a_copy_of_a_cut_off_object_counts_only_when_its_kept_text_is_given() {
        let kept = &RESULT[..60];
        assert_eq!(echoed_tool_output(RESULT, &["other"], &[]), None);
        assert!(echoed_tool_output(RESULT, &["other"], &[kept]).is_some());
    }
}
