//! Figures a write states must have been seen: a call to a grounded tool whose arguments state
//! a figure that neither the user nor any tool result in the conversation has shown is refused
//! unrun, with the figures and the tool to look them up with.
//!
//! Why: on notes-v6's dev runs the embedded model drafted the email about "the campaign budget
//! we set for the spring launch" in its first round, before any read, with a budget it made up
//! ($100,000; the notes say $15,000), in 3 runs of 3. The draft tool's description already says
//! to find such a figure with `notes_search` first, and the model does not. Here code says it,
//! when it matters: at the call that would write the made-up figure.
//!
//! What counts as a figure ([`figures`]): a number whose value is ten or more, as written in
//! prose ("$15,000", "15000", "15k", "2.5m", the parts of "2025-12-12"),
//! compared by value, so "15k" in a note grounds "$15,000" in a draft. One-digit numbers ("Q1",
//! "2 people") are too common to say anything and are never checked.
//!
//! Guarantees: [`ungrounded_figures`] and [`seen_texts`] are pure. What is seen is the text of
//! every user message and every tool result in the conversation (errors too: a refusal that
//! quotes a figure has shown it), never the model's own words, the tool definitions or their
//! examples (copying an example's figure is the failure this prevents). Only the string values
//! of a call's arguments are read; ids and counts given as JSON numbers are not figures here.
//! Refuses nothing at configuration time: a rule naming a tool the model never calls does
//! nothing.

use std::collections::BTreeSet;

use serde_json::Value;
use toolgate_core::{ErrorCode, ToolError};
use toolgate_llm::Message;

/// A tool whose calls may state only figures the conversation has shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroundRule {
    pub tool: String,
    /// The tool the refusal names for looking a figure up (`notes_search`).
    pub look_up_with: String,
}

impl GroundRule {
    pub fn new(tool: &str, look_up_with: &str) -> Self {
        GroundRule {
            tool: tool.into(),
            look_up_with: look_up_with.into(),
        }
    }
}

/// A figure as written, and its value in the form figures are compared in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Figure {
    /// The value without separators or suffix: "15000" for "$15,000" and for "15k".
    pub value: String,
    /// As the text has it: "15,000".
    pub written: String,
}

/// The figures in `text`, in order of first appearance (each value once).
pub fn figures(text: &str) -> Vec<Figure> {
    let chars: Vec<char> = text.chars().collect();
    let mut found: Vec<Figure> = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        if !chars[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        let start = at;
        // Digits, and a ',' or '.' between two digits ("15,000", "2.5").
        while at < chars.len()
            && (chars[at].is_ascii_digit()
                || (matches!(chars[at], ',' | '.')
                    && chars.get(at + 1).is_some_and(char::is_ascii_digit)
                    && at > start))
        {
            at += 1;
        }
        let number: String = chars[start..at].iter().collect();
        // A "k" or "m" right after, not starting a word ("15k", not "15km" or "3 min").
        let multiplier = match chars.get(at) {
            Some('k' | 'K') if !chars.get(at + 1).is_some_and(|c| c.is_alphanumeric()) => {
                at += 1;
                1_000.0
            }
            Some('m' | 'M') if !chars.get(at + 1).is_some_and(|c| c.is_alphanumeric()) => {
                at += 1;
                1_000_000.0
            }
            _ => 1.0,
        };
        if let Some(value) = value_of(&number, multiplier) {
            let written: String = chars[start..at].iter().collect();
            if !found.iter().any(|f| f.value == value) {
                found.push(Figure { value, written });
            }
        }
    }
    found
}

/// The value of `number` (digits with ',' thousands separators or one '.' decimal point)
/// times `multiplier`, when it is a figure worth checking (ten or more: not "2 people", not
/// the "00" of "10:00"); `None` otherwise, and for what does not parse ("1.2.3", a version).
fn value_of(number: &str, multiplier: f64) -> Option<String> {
    let plain: String = number.chars().filter(|c| *c != ',').collect();
    let value: f64 = plain.parse::<f64>().ok()? * multiplier;
    if value < 10.0 {
        return None;
    }
    if value.fract() == 0.0 && value < 1e15 {
        Some(format!("{value:.0}"))
    } else {
        Some(format!("{value}"))
    }
}

/// The texts a figure may be grounded in: every user message's text and every tool result's
/// content in `messages`.
pub fn seen_texts(messages: &[Message]) -> Vec<&str> {
    let mut seen = crate::conversation::user_texts(messages);
    seen.extend(crate::conversation::tool_results(messages, true));
    seen
}

/// The figures the string values of `arguments` state that no text of `seen` contains, in
/// order, each once.
pub fn ungrounded_figures(arguments: &Value, seen: &[&str]) -> Vec<Figure> {
    let mut stated = Vec::new();
    collect_strings(arguments, &mut stated);
    let known: BTreeSet<String> = seen
        .iter()
        .flat_map(|text| figures(text))
        .map(|f| f.value)
        .collect();
    let mut missing: Vec<Figure> = Vec::new();
    for figure in stated.iter().flat_map(|text| figures(text)) {
        if !known.contains(&figure.value) && !missing.iter().any(|m| m.value == figure.value) {
            missing.push(figure);
        }
    }
    missing
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| collect_strings(item, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The rule for `tool` among `rules`, if any.
pub fn rule_for<'a>(rules: &'a [GroundRule], tool: &str) -> Option<&'a GroundRule> {
    rules.iter().find(|r| r.tool == tool)
}

/// The refusal of a call that states `missing` (nothing ran). Invalid arguments: the model
/// can fix it, by looking the figures up and calling again with what it finds.
pub fn ungrounded_error(rule: &GroundRule, missing: &[Figure]) -> ToolError {
    let written: Vec<&str> = missing.iter().map(|f| f.written.as_str()).collect();
    ToolError::new(
        ErrorCode::InvalidArgument,
        format!(
            "not run: {} states {} that neither the user nor any tool result in this conversation has shown",
            rule.tool,
            written.join(", ")
        ),
    )
    .with_hint(format!(
        "look it up with {} first, then call {} again with the figure the result gives",
        rule.look_up_with, rule.tool
    ))
}

#[cfg(test)]
#[path = "grounding_tests.rs"]
mod tests;
