//! What a toolset offers a host besides its tools, in no protocol's terms: resources (entries a
//! host lists page by page and reads) and prompts (ready-made requests a host shows its user).
//! A front end (the MCP server) translates these into its protocol's messages; the toolset that
//! offers them names no protocol, and the front end names no toolset.
//!
//! Guarantees: a resource is never read by the source itself: the source names the tool call
//! that reads it ([`ReadCall`]), and the front end makes that call through the dispatcher like
//! any call, so a read gets the tool's catalogue check, bounds, redaction, untrusted marking
//! and trace. A prompt only writes a user message ([`Prompt::render`]), and only once every
//! required argument is given as non-blank text; whatever the model then does is a call like
//! any other.
//!
//! Refuses, as an [`OfferError`]: a cursor the source did not hand out, a URI it does not
//! serve, a store that cannot list, a prompt without a required argument.

use std::sync::Arc;

use serde_json::{Map, Value};

/// Why an offer could not be listed, read or rendered.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// A listing cursor this source never handed out.
    #[error("unknown cursor {cursor:?}: {remedy}")]
    BadCursor { cursor: String, remedy: String },
    /// A URI this source does not serve; `served` says what it does serve.
    #[error("no such resource: {uri} ({served})")]
    UnknownResource { uri: String, served: String },
    /// The store behind the source failed to list.
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),
    /// A prompt rendered without one of its required arguments.
    #[error("prompt {prompt} needs the argument {argument:?}")]
    MissingArgument { prompt: String, argument: String },
}

/// One resource as a host lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceEntry {
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// A family of resources a host can name itself (`note://{id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTemplate {
    pub uri_template: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub entries: Vec<ResourceEntry>,
    /// The opaque cursor of the next page, when there is one.
    pub next: Option<String>,
}

/// The tool call that reads a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadCall {
    pub tool: String,
    pub arguments: Value,
    /// The type of what the call returns, as the host is told.
    pub mime_type: String,
}

/// A source of resources: lists them in pages and names, for each URI, the call that reads it.
pub trait ResourceSource: Send + Sync {
    /// The tool every read goes through; a front end offers the source only to a principal who
    /// may call it.
    fn read_tool(&self) -> &str;
    fn templates(&self) -> Vec<ResourceTemplate>;
    /// The page after `cursor` (the first page without one).
    fn list(&self, cursor: Option<&str>) -> Result<Page, OfferError>;
    fn read_call(&self, uri: &str) -> Result<ReadCall, OfferError>;
}

/// The arguments a host passes to a prompt.
pub type PromptArguments = Map<String, Value>;

/// One argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    pub name: String,
    pub description: Option<String>,
    /// Rendering without it (or with blank text) is refused.
    pub required: bool,
}

impl PromptArgument {
    /// An optional argument without a description.
    pub fn new(name: impl Into<String>) -> Self {
        PromptArgument {
            name: name.into(),
            description: None,
            required: false,
        }
    }

    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
}

/// One prompt: what a host lists, and how its arguments become the user's message.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
    render: fn(&PromptArguments) -> String,
}

impl Prompt {
    /// A prompt without arguments whose user message `render` writes from the (checked)
    /// arguments.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        render: fn(&PromptArguments) -> String,
    ) -> Self {
        Prompt {
            name: name.into(),
            title: None,
            description: description.into(),
            arguments: Vec::new(),
            render,
        }
    }

    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn with_argument(mut self, argument: PromptArgument) -> Self {
        self.arguments.push(argument);
        self
    }

    /// The user message for `arguments`, once every required argument is there as non-blank
    /// text.
    pub fn render(&self, arguments: &PromptArguments) -> Result<String, OfferError> {
        for argument in self.arguments.iter().filter(|a| a.required) {
            let given = arguments
                .get(&argument.name)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.trim().is_empty());
            if !given {
                return Err(OfferError::MissingArgument {
                    prompt: self.name.clone(),
                    argument: argument.name.clone(),
                });
            }
        }
        Ok((self.render)(arguments))
    }
}

/// Everything a toolset offers besides its tools: empty for most.
#[derive(Clone, Default)]
pub struct Offers {
    pub resources: Option<Arc<dyn ResourceSource>>,
    pub prompts: Vec<Prompt>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> PromptArguments {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_required_argument_must_be_non_blank_text_an_optional_one_need_not_be_there() {
        let prompt = Prompt::new("greet", "Greets someone.", |a| {
            format!(
                "hello {}",
                a.get("who").and_then(Value::as_str).unwrap_or("")
            )
        })
        .with_argument(PromptArgument::new("who").required())
        .with_argument(PromptArgument::new("mood"));
        let cases = [
            (json!({"who": "ann"}), Some("hello ann")),
            (json!({"who": "ann", "mood": "glad"}), Some("hello ann")),
            (json!({}), None),
            (json!({"who": "   "}), None),
            (json!({"who": 7}), None),
            (json!({"mood": "glad"}), None),
        ];
        for (given, rendered) in cases {
            let got = prompt.render(&args(given.clone()));
            assert_eq!(got.as_deref().ok(), rendered, "{given}");
            if let Err(error) = got {
                assert!(
                    matches!(&error, OfferError::MissingArgument { prompt, argument }
                        if prompt == "greet" && argument == "who"),
                    "{error:?}"
                );
                assert_eq!(error.to_string(), "prompt greet needs the argument \"who\"");
            }
        }
    }
}
