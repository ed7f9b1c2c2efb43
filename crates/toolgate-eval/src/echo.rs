//! Whether a final answer is an echo: raw tool output handed to the user instead of an answer.
//! The detector is the loop's ([`toolgate_agent::echoed_answer`], so what the loop corrects is
//! what the eval fails); this adds what only a record has: results the record cut short.
//!
//! Guarantees: [`echoed_tool_output`] finds every JSON object (with at least one member) written
//! in the answer and in the run's tool results, and calls the answer an echo when the answer's
//! characters inside objects equal (as JSON values, so re-indenting or re-spacing does not
//! hide a copy) to an object of some tool result are at least half of the answer: most of what
//! the user reads is the tools' raw output. Nested objects count. A result the record cut
//! short ([`crate::record::bound_result`]) has an outer object that no longer parses: an
//! answer object that starts with that object's kept text, verbatim, is a copy of it (the
//! kept text is up to 1,500 characters of the tools' JSON, which no answer writes by chance).
//! Pure and deterministic.
//!
//! Not an echo: an answer that quotes a phrase or a value of a result ("due 2025-12-12",
//! "Receipts from the Berlin trip are in the travel folder"): quoting a note's words is how a
//! note is answered from; an answer that writes a JSON object of its own (a described tool
//! call: the objects are not a result's; that failure is another kind's); an answer with a
//! small copied object inside more words than it.

use serde_json::Value;

pub use toolgate_agent::echoed_answer::Echo;

use crate::record::kept_part;

/// The kept text of the outermost object a cut result leaves open (from its first `{` whose
/// JSON runs into the cut), if the record cut `result`.
fn open_object_at_cut(result: &str) -> Option<&str> {
    let kept = kept_part(result)?;
    kept.char_indices()
        .filter(|(_, c)| *c == '{')
        .find_map(|(start, _)| {
            let mut stream =
                serde_json::Deserializer::from_str(&kept[start..]).into_iter::<Value>();
            match stream.next() {
                Some(Err(e)) if e.is_eof() => Some(&kept[start..]),
                _ => None,
            }
        })
}

/// Whether `answer` is mostly raw output of the tool results `results` (see the module doc).
pub fn echoed_tool_output<'a>(
    answer: &str,
    results: impl IntoIterator<Item = &'a str>,
) -> Option<Echo> {
    let results: Vec<&str> = results.into_iter().collect();
    let cut_open: Vec<&str> = results
        .iter()
        .filter_map(|r| open_object_at_cut(r))
        .collect();
    toolgate_agent::echoed_answer::echoed_tool_output(answer, &results, &cut_open)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESULT: &str = r#"{"result":{"match":"all_words","total_matches":1,"offset":0,"hits":[{"id":23,"title":"Submit the November expense report","date":"2025-11-28","notebook":"Work","kind":"todo","due":"2025-12-12","done":false,"text":"Receipts from the Berlin trip are in the travel folder; the taxi receipt is missing."}],"next_step":"the first hit's whole text is above: if it answers the question, answer from it; to read another hit whole, call notes_get with its id","note":"no note of kind meeting matches; these are notes of any kind"}}"#;

    fn is_echo(answer: &str, results: &[&str]) -> bool {
        echoed_tool_output(answer, results.iter().copied()).is_some()
    }

    #[test]
    fn a_raw_tool_result_as_the_answer_is_an_echo() {
        // The recorded notes-v2 run: the result verbatim, then a line of the model's own.
        let recorded = format!(
            "{RESULT}\n```\nThis is an incomplete answer as the provided tool response only contains a date without the date format. To format the date correctly, you would need to add the \"-00\" format to the date string."
        );
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(RESULT).unwrap()).unwrap();
        let repeat = format!(
            "[repeat] Unchanged: you made this exact call in round 1 and nothing has changed since, so it was not run again. Its result is below. Answer the user from it.\n{RESULT}"
        );
        // (why, answer, results)
        let cases: Vec<(&str, String, Vec<String>)> = vec![
            (
                "verbatim, with a trailing remark",
                recorded,
                vec![RESULT.into()],
            ),
            ("the result alone", RESULT.into(), vec![RESULT.into()]),
            (
                "re-indented in a code fence",
                format!("```json\n{pretty}\n```"),
                vec![RESULT.into()],
            ),
            (
                "copied from a repeat notice",
                format!("Here it is: {RESULT}"),
                vec![repeat],
            ),
            (
                "a copy of a result the record cut short",
                RESULT.into(),
                vec![crate::record::bound_result(RESULT, 400)],
            ),
            (
                "one hit of the result, after a short lead-in",
                format!(
                    "Found: {}",
                    &RESULT[RESULT.find(r#"{"id""#).unwrap()..RESULT.find("}],").unwrap() + 1]
                ),
                vec![RESULT.into()],
            ),
        ];
        for (why, answer, results) in cases {
            let results: Vec<&str> = results.iter().map(String::as_str).collect();
            assert!(is_echo(&answer, &results), "{why}: {answer}");
        }
    }

    #[test]
    fn an_answer_quoting_a_result_is_not_an_echo() {
        let cases = [
            (
                "a value of it",
                "The November expense report is due 2025-12-12.",
            ),
            (
                "a sentence of the note, verbatim",
                "Receipts from the Berlin trip are in the travel folder; the taxi receipt is missing.",
            ),
            (
                "a small copied object inside more words",
                "The expense report is due on 2025-12-12: the todo \"Submit the November expense report\" is still open, and its note says the taxi receipt is missing ({\"id\":23,\"due\":\"2025-12-12\"}).",
            ),
            (
                "a JSON object of its own (a described call), not a result's",
                "{\"name\": \"notes_search\", \"arguments\": {\"query\": \"expense report\"}}",
            ),
            ("an empty answer", "   "),
            ("an empty object", "{}"),
        ];
        let small = r#"{"result":{"todo":{"id":23,"due":"2025-12-12"}}}"#;
        for (why, answer) in cases {
            assert!(!is_echo(answer, &[RESULT, small]), "{why}: {answer}");
        }
        // The small object is copied (so the case above tests the share, not a miss).
        assert!(is_echo(r#"{"id":23,"due":"2025-12-12"}"#, &[small]));
        // No tool results: nothing can be copied from them.
        assert!(!is_echo(RESULT, &[]));
    }

    #[test]
    fn an_echo_says_how_much_was_copied() {
        let echo = echoed_tool_output(RESULT, [RESULT]).unwrap();
        assert_eq!(echo.copied_chars, echo.answer_chars);
        assert!(
            echo.describe().contains("raw tool output"),
            "{}",
            echo.describe()
        );
    }
}
