use super::*;
use crate::run::trace::TurnSummary;
use toolgate_llm::Usage;

fn value(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

fn turn(usage: Usage, response_model: &str) -> ModelTurn {
    ModelTurn {
        run_id: "run-1".into(),
        round: 1,
        model: "anthropic:claude-x".into(),
        duration_ms: 3,
        outcome: Ok(TurnSummary {
            response_model: response_model.into(),
            usage,
            finish_reason: StopReason::ToolUse,
            tool_calls: vec!["kb_lookup".into()],
        }),
    }
}

#[test]
fn each_adapter_is_named_by_its_provider_and_one_api_never_splits_a_provider() {
    let cases = [
        (
            "anthropic:claude-sonnet-4-5",
            "anthropic",
            "claude-sonnet-4-5",
        ),
        ("openai:gpt-5", "openai", "gpt-5"),
        ("openai-responses:gpt-5", "openai", "gpt-5"),
        ("openai-compat:qwen2.5:7b", "openai-compat", "qwen2.5:7b"),
        (
            "embedded:qwen2.5-coder-1.5b",
            "embedded",
            "qwen2.5-coder-1.5b",
        ),
        ("scripted", "scripted", "scripted"),
    ];
    for (name, provider, model) in cases {
        assert_eq!(
            provider_and_model(name),
            (provider.to_string(), model.to_string()),
            "{name}"
        );
    }
}

#[test]
fn a_failed_requests_error_type_never_carries_the_errors_text() {
    let secret = "sk-ant-secret the user's prompt";
    let cases = [
        (
            LlmError::Status {
                status: 429,
                message: secret.into(),
            },
            "429",
        ),
        (LlmError::Transport(secret.into()), "transport"),
        (LlmError::Decode(secret.into()), "decode"),
        (LlmError::Config(secret.into()), "config"),
        (LlmError::Engine(secret.into()), "engine"),
    ];
    for (error, kind) in cases {
        assert_eq!(llm_error_type(&error), kind);
    }
}

#[test]
fn only_a_run_without_a_final_answer_is_an_error() {
    let cases = [
        (StopCause::FinalAnswer, None),
        (StopCause::RoundCap { rounds: 8 }, Some("round_cap")),
        (
            StopCause::TokenBudget {
                used: 10,
                budget: 5,
            },
            Some("token_budget"),
        ),
        (
            StopCause::BudgetExhausted {
                detail: "spent".into(),
            },
            Some("budget_exhausted"),
        ),
        (
            StopCause::ModelError {
                message: "down".into(),
                retryable: true,
            },
            Some("model_error"),
        ),
    ];
    for (stop, kind) in cases {
        assert_eq!(stop_error_type(&stop), kind, "{stop:?}");
    }
}

#[test]
fn cached_tokens_are_claimed_only_when_the_adapter_reports_some() {
    let uncached = chat_end_attributes(&turn(
        Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 0,
        },
        "claude-x-2026",
    ));
    assert_eq!(
        value(&uncached, names::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        None
    );
    assert_eq!(
        value(&uncached, names::GEN_AI_USAGE_INPUT_TOKENS).as_deref(),
        Some("100")
    );
    assert_eq!(
        value(&uncached, names::GEN_AI_RESPONSE_MODEL).as_deref(),
        Some("claude-x-2026")
    );
    assert_eq!(
        value(&uncached, names::GEN_AI_RESPONSE_FINISH_REASONS).as_deref(),
        Some("[\"tool_use\"]")
    );
    let cached = chat_end_attributes(&turn(
        Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 80,
        },
        "",
    ));
    assert_eq!(
        value(&cached, names::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS).as_deref(),
        Some("80")
    );
    assert_eq!(
        value(&cached, names::GEN_AI_RESPONSE_MODEL),
        None,
        "an unnamed response model is not claimed"
    );
}

#[test]
fn finish_reasons_are_written_as_the_trace_line_writes_them() {
    for reason in [
        StopReason::EndTurn,
        StopReason::ToolUse,
        StopReason::MaxTokens,
        StopReason::StopSequence,
        StopReason::Refusal,
    ] {
        assert_eq!(
            serde_json::to_value(&reason).unwrap_or_default(),
            serde_json::Value::String(finish_reason(&reason)),
        );
    }
    assert_eq!(finish_reason(&StopReason::Other("length".into())), "length");
}
