//! toolgate-llm: one [`Model`] trait and its adapters. Each adapter keeps its wire format (pure
//! functions from [`ModelRequest`] to the provider's JSON and back) apart from its transport.

pub mod adapters;
pub mod anthropic;
pub mod embedded;
pub mod error;
pub mod http;
pub mod openai_chat;
pub mod openai_responses;
pub mod scripted;
pub mod types;
mod wire;

use std::future::Future;
use std::pin::Pin;

pub use adapters::{AnthropicModel, OpenAiChatModel, OpenAiCompatModel, OpenAiResponsesModel};
pub use error::LlmError;
pub use http::{HttpConfig, Secret};
pub use types::*;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A language model that can call tools.
pub trait Model: Send + Sync {
    /// A name for traces and reports (`anthropic:claude-…`, `embedded:qwen2.5-coder-1.5b`).
    fn name(&self) -> String;

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>>;
}
