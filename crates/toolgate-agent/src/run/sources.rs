//! Where the conversation's text came from, for the dispatcher's taint checks: the user's
//! words, trusted tool results, and the untrusted texts results carried, each as the model
//! read it.

use serde_json::Value;
use toolgate_core::observation::UntrustedText;
use toolgate_core::taint::{TaintSources, UntrustedSource};
use toolgate_core::{CallOutcome, CallResult, Observation};
use toolgate_llm::{ContentBlock, Message, Role, ToolCall};

/// Where the text of a conversation so far came from: the user's text blocks, and the trusted
/// and untrusted parts of earlier tool results (as the model read them: the `result` and
/// `untrusted_content` of an observation's JSON). An error result is neither: it quotes what
/// the model wrote.
pub fn sources_from_history(history: &[Message]) -> TaintSources {
    let mut sources = TaintSources::new();
    let mut tools = std::collections::HashMap::new();
    for message in history {
        for block in &message.content {
            match block {
                ContentBlock::Text { text } if message.role == Role::User => sources.add_user(text),
                ContentBlock::Text { .. } => {}
                ContentBlock::ToolCall(call) => {
                    tools.insert(call.id.clone(), call.name.clone());
                }
                ContentBlock::ToolResult(result) if !result.is_error => {
                    let Ok(view) = serde_json::from_str::<Value>(&result.content) else {
                        continue;
                    };
                    let tool = tools.get(&result.call_id).map_or("a tool", String::as_str);
                    if let Some(trusted) = view.get("result") {
                        sources.add_trusted(&trusted.to_string());
                    }
                    let untrusted = view.get("untrusted_content");
                    learn_untrusted_json(&mut sources, untrusted, tool, &result.call_id);
                }
                // An error's own words are ours, but a remote server's words it carries
                // (`error.untrusted_content`) are untrusted like any result's.
                ContentBlock::ToolResult(result) => {
                    let Ok(view) = serde_json::from_str::<Value>(&result.content) else {
                        continue;
                    };
                    let tool = tools.get(&result.call_id).map_or("a tool", String::as_str);
                    let carried = view.pointer("/error/untrusted_content");
                    learn_untrusted_json(&mut sources, carried, tool, &result.call_id);
                }
            }
        }
    }
    sources
}

/// Adds each `{"source", "text"}` of an `untrusted_content` array as the model read it.
fn learn_untrusted_json(
    sources: &mut TaintSources,
    texts: Option<&Value>,
    tool: &str,
    call_id: &str,
) {
    for text in texts.and_then(Value::as_array).into_iter().flatten() {
        let origin = text.get("source").and_then(Value::as_str).unwrap_or("");
        let body = text.get("text").and_then(Value::as_str).unwrap_or("");
        sources.add_untrusted(UntrustedSource::new(origin, body, tool, call_id));
    }
}

/// Adds what one call's outcome told the model: its result or the untrusted texts its error
/// carried, and what its nested calls read (a script's page taints what follows, printed or
/// not).
pub(super) fn learn_outcome(sources: &mut TaintSources, call: &ToolCall, outcome: &CallOutcome) {
    if let Some(observation) = outcome.observation() {
        learn_sources(sources, &call.name, &call.id, observation);
    }
    if let CallResult::Failed(error) = &outcome.result {
        learn_untrusted(sources, &call.name, &call.id, &error.untrusted);
    }
    for source in &outcome.nested_untrusted {
        sources.add_untrusted(source.clone());
    }
}

/// Adds what one observation told the model: its trusted result and each untrusted text.
fn learn_sources(sources: &mut TaintSources, tool: &str, call_id: &str, observation: &Observation) {
    sources.add_trusted(&observation.content.to_string());
    learn_untrusted(sources, tool, call_id, &observation.untrusted);
}

/// Adds the untrusted texts a failed call carried (a remote server's error words).
fn learn_untrusted(sources: &mut TaintSources, tool: &str, call_id: &str, texts: &[UntrustedText]) {
    for text in texts {
        sources.add_untrusted(UntrustedSource::new(
            &text.source,
            &text.text,
            tool,
            call_id,
        ));
    }
}
