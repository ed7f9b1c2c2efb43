//! The error algebra every tool call can end in.
//!
//! Guarantees: the set of codes is closed, each has a stable snake_case name and an explicit
//! `retryable` flag, and classification is exhaustive (adding a code breaks the build until it is
//! classified). Messages are written for a model: which field, what was expected, what was
//! received, an example, and a hint. They never carry stack traces, credentials or whole rows.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every way a tool call can fail, as the model and the trace see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidArgument,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    RateLimited,
    TransientDependency,
    PermanentDependency,
    DeadlineExceeded,
    Canceled,
    Internal,
    ApprovalDenied,
    /// The run's or the principal's budget (calls, writes, approvals asked, outbound requests,
    /// model tokens) is spent: nothing more of that kind runs until a new run or budget.
    BudgetExhausted,
}

impl ErrorCode {
    /// All codes, in declaration order.
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::InvalidArgument,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::RateLimited,
        ErrorCode::TransientDependency,
        ErrorCode::PermanentDependency,
        ErrorCode::DeadlineExceeded,
        ErrorCode::Canceled,
        ErrorCode::Internal,
        ErrorCode::ApprovalDenied,
        ErrorCode::BudgetExhausted,
    ];

    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::TransientDependency => "transient_dependency",
            ErrorCode::PermanentDependency => "permanent_dependency",
            ErrorCode::DeadlineExceeded => "deadline_exceeded",
            ErrorCode::Canceled => "canceled",
            ErrorCode::Internal => "internal",
            ErrorCode::ApprovalDenied => "approval_denied",
            ErrorCode::BudgetExhausted => "budget_exhausted",
        }
    }

    /// Whether the call's own arguments caused it: the same call fails the same way every time,
    /// and a call with other arguments may succeed. (Policy refusals, failures of the world and
    /// our own faults are not: they say nothing about what to change.)
    pub fn caused_by_arguments(self) -> bool {
        match self {
            ErrorCode::InvalidArgument | ErrorCode::NotFound => true,
            ErrorCode::Unauthorized
            | ErrorCode::Forbidden
            | ErrorCode::Conflict
            | ErrorCode::RateLimited
            | ErrorCode::TransientDependency
            | ErrorCode::PermanentDependency
            | ErrorCode::DeadlineExceeded
            | ErrorCode::Canceled
            | ErrorCode::Internal
            | ErrorCode::ApprovalDenied
            | ErrorCode::BudgetExhausted => false,
        }
    }

    /// Whether the same call, unchanged, may succeed if tried again later.
    ///
    /// `invalid_argument` is not retryable as-is: the call must change first.
    pub fn retryable(self) -> bool {
        match self {
            ErrorCode::RateLimited
            | ErrorCode::TransientDependency
            | ErrorCode::DeadlineExceeded => true,
            ErrorCode::InvalidArgument
            | ErrorCode::Unauthorized
            | ErrorCode::Forbidden
            | ErrorCode::NotFound
            | ErrorCode::Conflict
            | ErrorCode::PermanentDependency
            | ErrorCode::Canceled
            | ErrorCode::Internal
            | ErrorCode::ApprovalDenied
            | ErrorCode::BudgetExhausted => false,
        }
    }

    /// A short HTTP-API-style status line, used by tools whose errors are deliberately terse.
    pub fn http_status(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "400 Bad Request",
            ErrorCode::Unauthorized => "401 Unauthorized",
            ErrorCode::Forbidden | ErrorCode::ApprovalDenied => "403 Forbidden",
            ErrorCode::NotFound => "404 Not Found",
            ErrorCode::Conflict => "409 Conflict",
            ErrorCode::RateLimited | ErrorCode::BudgetExhausted => "429 Too Many Requests",
            ErrorCode::TransientDependency => "503 Service Unavailable",
            ErrorCode::PermanentDependency => "502 Bad Gateway",
            ErrorCode::DeadlineExceeded => "504 Gateway Timeout",
            ErrorCode::Canceled => "499 Client Closed Request",
            ErrorCode::Internal => "500 Internal Server Error",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call, as returned to the caller (model, MCP host, sandbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    pub code: ErrorCode,
    /// What went wrong, in a sentence a model can act on.
    pub message: String,
    /// The argument at fault, as a JSON path (`ids[2]`, `filters.year_min`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What the field must look like.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What the call sent (bounded; never a whole row or a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<Value>,
    /// A value that would have been accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    /// How to fix the call, or facts the model lacks (today's date, the closest real names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Text someone else wrote that the failure carries (a remote server's own error words):
    /// shown to the model in its own field, never in `message`, and a taint source like any
    /// untrusted text of an observation.
    #[serde(
        default,
        rename = "untrusted_content",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub untrusted: Vec<crate::observation::UntrustedText>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            field: None,
            expected: None,
            received: None,
            example: None,
            hint: None,
            untrusted: Vec::new(),
        }
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError::new(ErrorCode::InvalidArgument, message).with_field(field)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ToolError::new(ErrorCode::NotFound, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ToolError::new(ErrorCode::Internal, message)
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn with_expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }

    pub fn with_received(mut self, received: Value) -> Self {
        self.received = Some(bounded_received(received));
        self
    }

    pub fn with_example(mut self, example: Value) -> Self {
        self.example = Some(example);
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds untrusted text the failure carries (see [`ToolError::untrusted`]).
    pub fn with_untrusted(mut self, text: crate::observation::UntrustedText) -> Self {
        self.untrusted.push(text);
        self
    }

    pub fn retryable(&self) -> bool {
        self.code.retryable()
    }

    /// The error as the model sees it, in the tool's error style.
    pub fn to_model_value(&self, style: ErrorStyle) -> Value {
        match style {
            ErrorStyle::Teaching => {
                let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
                if let Value::Object(map) = &mut v {
                    map.insert("retryable".into(), Value::Bool(self.retryable()));
                    if !self.untrusted.is_empty() {
                        map.insert(
                            "untrusted_note".into(),
                            Value::String(crate::observation::UNTRUSTED_NOTE.into()),
                        );
                    }
                }
                serde_json::json!({ "error": v })
            }
            ErrorStyle::Terse => Value::String(self.code.http_status().to_string()),
        }
    }
}

/// How a tool's errors are rendered for the model. `Terse` exists to reproduce an API wrapper
/// that answers like an HTTP API (status line only); it is what a redesign is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ErrorStyle {
    #[default]
    Teaching,
    Terse,
}

/// Received values are echoed to help the model, but never in bulk.
const RECEIVED_MAX_CHARS: usize = 200;

fn bounded_received(value: Value) -> Value {
    let text = value.to_string();
    if text.len() <= RECEIVED_MAX_CHARS {
        return value;
    }
    // Redacted before cutting: half a secret no longer looks like one to the later redaction.
    let (text, _) = crate::observation::redact_text(&text);
    let cut: String = text.chars().take(RECEIVED_MAX_CHARS).collect();
    Value::String(format!(
        "{cut}… ({} characters in all)",
        text.chars().count()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_stable_snake_case_names_matching_serde() {
        for code in ErrorCode::ALL {
            let via_serde = serde_json::to_value(code).unwrap();
            assert_eq!(via_serde, Value::String(code.as_str().to_string()));
        }
    }

    #[test]
    fn only_transient_kinds_are_retryable() {
        let retryable: Vec<&str> = ErrorCode::ALL
            .iter()
            .filter(|c| c.retryable())
            .map(|c| c.as_str())
            .collect();
        assert_eq!(
            retryable,
            ["rate_limited", "transient_dependency", "deadline_exceeded"]
        );
    }

    #[test]
    fn only_errors_of_the_calls_own_arguments_say_what_to_change() {
        let caused: Vec<&str> = ErrorCode::ALL
            .iter()
            .filter(|c| c.caused_by_arguments())
            .map(|c| c.as_str())
            .collect();
        assert_eq!(caused, ["invalid_argument", "not_found"]);
        for code in ErrorCode::ALL {
            assert!(
                !(code.caused_by_arguments() && code.retryable()),
                "{}",
                code.as_str()
            );
        }
    }

    #[test]
    fn huge_received_values_are_not_echoed_whole() {
        let err =
            ToolError::invalid("body", "too long").with_received(Value::String("x".repeat(5000)));
        let shown = err.received.unwrap().to_string();
        assert!(shown.len() < 300, "{shown}");
        assert!(shown.contains("5002 characters"));
    }

    #[test]
    fn terse_style_shows_only_the_status_line() {
        let err = ToolError::invalid("my_status", "bad value");
        assert_eq!(
            err.to_model_value(ErrorStyle::Terse),
            Value::String("400 Bad Request".into())
        );
        let teaching = err.to_model_value(ErrorStyle::Teaching);
        assert_eq!(teaching["error"]["code"], "invalid_argument");
        assert_eq!(teaching["error"]["field"], "my_status");
        assert_eq!(teaching["error"]["retryable"], false);
    }
}
