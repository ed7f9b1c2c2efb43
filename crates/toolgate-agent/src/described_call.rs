//! Described calls: a final answer that tells the user how to call a tool instead of calling
//! it ("use notes_search with the query \"design team budget\", kind \"meeting\"", or a JSON
//! object of the tool's arguments).
//!
//! The loop's [`crate::AgentConfig::correct_described_calls`] answers such an answer with one
//! corrective turn per run. Failure kinds it targets, in the eval's taxonomy: *wrong answer*
//! (the embedded model, holding a result whose snippet carries the figure, replied with a
//! description of the call it had already made) and *no tool call* (a first reply that
//! describes the call it should make).
//!
//! Guarantees: pure. An answer is a described call only when
//! - it names an offered tool as a whole identifier (not inside a longer word or identifier:
//!   `notes_search_v2` and `mynotes_search` do not name `notes_search`); a tool whose name is a
//!   plain word (letters only, such as `search`) counts only when set off as code (backticks or
//!   quotes around it, or `(` or `{` right after it), so prose that uses the word does not; or
//! - it holds a JSON object whose keys are all argument names of one offered tool, among them
//!   at least one the tool requires (an object with any key the tool does not take, or with
//!   only optional keys, is not that tool's call).
//!
//! Refuses nothing else: an answer that states a result ("The Q1 design budget is $48,000.")
//! is never a described call. The correction quotes nothing the model wrote, only the tool's
//! registry name, so it adds no words a later taint check could take for the user's.

use serde::Serialize;
use serde_json::{Map, Value};
use toolgate_llm::ToolDefinition;

/// What made an answer a described call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// It names the tool.
    Named,
    /// It gives the tool's arguments as a JSON object.
    Arguments,
}

/// A call an answer described instead of making.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DescribedCall {
    pub tool: String,
    pub evidence: Evidence,
}

/// The first offered tool `answer` names, else the first whose arguments one of its JSON
/// objects gives; `None` for an answer that describes no call.
pub fn described_call(answer: &str, tools: &[ToolDefinition]) -> Option<DescribedCall> {
    let named = tools.iter().find(|t| names_tool(answer, &t.name));
    if let Some(tool) = named {
        return Some(DescribedCall {
            tool: tool.name.clone(),
            evidence: Evidence::Named,
        });
    }
    json_objects(answer).find_map(|object| {
        tools
            .iter()
            .find(|t| gives_arguments_of(&object, t))
            .map(|t| DescribedCall {
                tool: t.name.clone(),
                evidence: Evidence::Arguments,
            })
    })
}

/// The loop's corrective turn (sent as a user-role message: every chat template renders one
/// after an assistant's answer). `has_results`: the run already holds tool results, so the
/// model is pointed at them first (measured on the embedded model: told to "make the call or
/// answer", it replied that it would make the call, and made none).
pub fn correction_text(call: &DescribedCall, has_results: bool) -> String {
    if has_results {
        format!(
            "You described a call to {} instead of answering. The tool results above are what \
             your calls returned: answer my question from them now, in one short sentence. Only \
             if they do not hold the answer, make a new call.",
            call.tool
        )
    } else {
        format!(
            "You described a call to {} instead of making it. Make the call now; do not describe \
             it.",
            call.tool
        )
    }
}

fn is_identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text` holds `name` as a whole identifier (set off as code when it is a plain word).
fn names_tool(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let plain_word = name.chars().all(char::is_alphabetic);
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        let whole =
            !before.is_some_and(is_identifier_char) && !after.is_some_and(is_identifier_char);
        whole && (!plain_word || set_off_as_code(before, after))
    })
}

fn set_off_as_code(before: Option<char>, after: Option<char>) -> bool {
    matches!(before, Some('`' | '"' | '\'')) || matches!(after, Some('`' | '"' | '\'' | '(' | '{'))
}

/// Every JSON object that starts at a `{` of `text` (nested ones too: an object's `arguments`
/// is found at its own brace).
fn json_objects(text: &str) -> impl Iterator<Item = Map<String, Value>> + '_ {
    text.match_indices('{').filter_map(|(at, _)| {
        let first = serde_json::Deserializer::from_str(&text[at..])
            .into_iter::<Value>()
            .next()?;
        match first {
            Ok(Value::Object(object)) => Some(object),
            _ => None,
        }
    })
}

/// Whether `object`'s keys are all `tool`'s argument names, one of them required.
fn gives_arguments_of(object: &Map<String, Value>, tool: &ToolDefinition) -> bool {
    let Some(properties) = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    else {
        return false;
    };
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    !object.is_empty()
        && object.keys().all(|k| properties.contains_key(k))
        && object.keys().any(|k| required.contains(&k.as_str()))
}

#[cfg(test)]
#[path = "described_call_tests.rs"]
mod tests;
