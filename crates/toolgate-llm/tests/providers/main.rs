//! Provider wire formats against golden files, and the real adapters and transport against a
//! real HTTP server on 127.0.0.1 serving the providers' documented answers.

mod common;

use common::{
    Received, Reply, TestServer, assert_golden, conversation, fast_http, golden_json, golden_text,
};
use serde_json::{Value, json};
use toolgate_llm::{
    AnthropicModel, LlmError, Model, ModelResponse, OpenAiChatModel, OpenAiCompatModel,
    OpenAiResponsesModel, StopReason, ToolCall, Usage, anthropic, openai_chat, openai_responses,
};

const ANTHROPIC_KEY: &str = "sk-ant-test-0123456789";
const OPENAI_KEY: &str = "sk-test";

fn usage(input: u64, output: u64, cached: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

fn ok(result: Result<ModelResponse, LlmError>) -> ModelResponse {
    result.unwrap_or_else(|e| panic!("expected a response, got {e:?}"))
}

// ---- golden requests -------------------------------------------------------------------------

#[test]
fn anthropic_request_matches_golden() {
    assert_golden(
        "anthropic/request.json",
        &anthropic::build_request(&conversation(), "claude-sonnet-4-5"),
    );
}

#[test]
fn openai_chat_request_matches_golden() {
    assert_golden(
        "openai_chat/request.json",
        &openai_chat::build_request(&conversation(), "gpt-4.1"),
    );
}

#[test]
fn openai_compat_request_matches_golden() {
    assert_golden(
        "openai_chat/compat_request.json",
        &openai_chat::build_compat_request(&conversation(), "qwen2.5-coder-1.5b-instruct"),
    );
}

#[test]
fn openai_responses_request_matches_golden() {
    assert_golden(
        "openai_responses/request.json",
        &openai_responses::build_request(&conversation(), "gpt-4.1"),
    );
}

// ---- Anthropic over HTTP ---------------------------------------------------------------------

const ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";

async fn anthropic_exchange(
    replies: Vec<Reply>,
) -> (Result<ModelResponse, LlmError>, Vec<Received>) {
    let server = TestServer::start("", replies);
    let model = AnthropicModel::new(ANTHROPIC_KEY, ANTHROPIC_MODEL)
        .and_then(|m| m.with_base_url(&server.base_url))
        .and_then(|m| m.with_http_config(fast_http()))
        .unwrap_or_else(|e| panic!("{e}"));
    let result = model.complete(&conversation()).await;
    (result, server.finish())
}

fn assert_anthropic_request(received: &Received) {
    assert_eq!(received.method, "POST");
    assert_eq!(received.path, "/v1/messages");
    assert_eq!(received.header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(received.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(received.header("content-type"), Some("application/json"));
    assert_eq!(received.header("authorization"), None);
    assert_eq!(
        received.body,
        anthropic::build_request(&conversation(), ANTHROPIC_MODEL)
    );
    assert_eq!(received.body, golden_json("anthropic/request.json"));
}

async fn anthropic_ok(fixture: &str) -> ModelResponse {
    let (result, received) =
        anthropic_exchange(vec![Reply::json(200, &golden_text(fixture))]).await;
    assert_eq!(received.len(), 1);
    assert_anthropic_request(&received[0]);
    ok(result)
}

#[tokio::test]
async fn anthropic_text_response_is_parsed() {
    let r = anthropic_ok("anthropic/response_text.json").await;
    assert_eq!(r.text, "Hi! My name is Claude.");
    assert_eq!(r.tool_calls, vec![]);
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.usage, usage(2095, 503, 0));
    assert_eq!(r.model, "claude-sonnet-4-5-20250929");
}

#[tokio::test]
async fn anthropic_single_tool_call_is_parsed() {
    let r = anthropic_ok("anthropic/response_tool_call.json").await;
    assert_eq!(
        r.text,
        "I'll check the current weather in San Francisco for you."
    );
    assert_eq!(
        r.tool_calls,
        vec![call(
            "toolu_01A09q90qw90lq917835lq9",
            "get_weather",
            json!({"location": "San Francisco, CA", "unit": "celsius"})
        )]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.usage, usage(472, 91, 0));
}

#[tokio::test]
async fn anthropic_parallel_tool_calls_are_parsed_in_order() {
    let r = anthropic_ok("anthropic/response_parallel.json").await;
    assert_eq!(
        r.tool_calls,
        vec![
            call(
                "toolu_01WeatherA9q90qw90lq917",
                "get_weather",
                json!({"location": "San Francisco, CA"})
            ),
            call(
                "toolu_01TimeB9q90qw90lq9178",
                "get_time",
                json!({"timezone": "America/Los_Angeles"})
            ),
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn anthropic_max_tokens_is_reported() {
    let r = anthropic_ok("anthropic/response_max_tokens.json").await;
    assert_eq!(r.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        r.text,
        "Here is a detailed history of the Roman Empire. It began"
    );
    assert_eq!(r.usage, usage(25, 16, 0));
}

#[tokio::test]
async fn anthropic_cached_usage_is_counted() {
    let r = anthropic_ok("anthropic/response_cached_usage.json").await;
    assert_eq!(r.usage, usage(21 + 188_086, 393, 188_086));
    assert_eq!(r.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn anthropic_error_body_is_a_status_error_and_not_retried() {
    let (result, received) = anthropic_exchange(vec![Reply::json(
        400,
        &golden_text("anthropic/error_invalid_request.json"),
    )])
    .await;
    assert_eq!(received.len(), 1);
    assert_eq!(
        result,
        Err(LlmError::Status {
            status: 400,
            message: "invalid_request_error: messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"user\" roles in a row".into()
        })
    );
}

#[tokio::test]
async fn anthropic_rate_limit_is_retried_once_then_succeeds() {
    let (result, received) = anthropic_exchange(vec![
        Reply::json(429, &golden_text("anthropic/error_rate_limit.json"))
            .header("retry-after", "0"),
        Reply::json(200, &golden_text("anthropic/response_text.json")),
    ])
    .await;
    assert_eq!(received.len(), 2);
    for r in &received {
        assert_anthropic_request(r);
    }
    assert_eq!(ok(result).text, "Hi! My name is Claude.");
}

// ---- OpenAI Chat Completions over HTTP -------------------------------------------------------

const OPENAI_MODEL: &str = "gpt-4.1";

async fn chat_exchange(replies: Vec<Reply>) -> (Result<ModelResponse, LlmError>, Vec<Received>) {
    let server = TestServer::start("/v1", replies);
    let model = OpenAiChatModel::new(OPENAI_KEY, OPENAI_MODEL)
        .and_then(|m| m.with_base_url(&server.base_url))
        .and_then(|m| m.with_http_config(fast_http()))
        .unwrap_or_else(|e| panic!("{e}"));
    let result = model.complete(&conversation()).await;
    (result, server.finish())
}

fn assert_chat_request(received: &Received) {
    assert_eq!(received.method, "POST");
    assert_eq!(received.path, "/v1/chat/completions");
    assert_eq!(received.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(received.header("content-type"), Some("application/json"));
    assert_eq!(received.body, golden_json("openai_chat/request.json"));
}

async fn chat_ok(fixture: &str) -> ModelResponse {
    let (result, received) = chat_exchange(vec![Reply::json(200, &golden_text(fixture))]).await;
    assert_eq!(received.len(), 1);
    assert_chat_request(&received[0]);
    ok(result)
}

#[tokio::test]
async fn openai_chat_text_response_is_parsed() {
    let r = chat_ok("openai_chat/response_text.json").await;
    assert_eq!(r.text, "Hello! How can I assist you today?");
    assert_eq!(r.tool_calls, vec![]);
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.usage, usage(19, 10, 0));
    assert_eq!(r.model, "gpt-4.1-2025-04-14");
}

#[tokio::test]
async fn openai_chat_single_tool_call_is_parsed() {
    let r = chat_ok("openai_chat/response_tool_call.json").await;
    assert_eq!(r.text, "");
    assert_eq!(
        r.tool_calls,
        vec![call(
            "call_abc123",
            "get_current_weather",
            json!({"location": "Boston, MA"})
        )]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.usage, usage(82, 17, 0));
}

#[tokio::test]
async fn openai_chat_parallel_tool_calls_are_parsed_in_order() {
    let r = chat_ok("openai_chat/response_parallel.json").await;
    assert_eq!(
        r.tool_calls,
        vec![
            call(
                "call_12345xyz",
                "get_weather",
                json!({"location": "Paris, France"})
            ),
            call(
                "call_67890abc",
                "get_weather",
                json!({"location": "Bogotá, Colombia"})
            ),
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_chat_max_tokens_is_reported() {
    let r = chat_ok("openai_chat/response_max_tokens.json").await;
    assert_eq!(r.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        r.text,
        "Here is a detailed history of the Roman Empire. It began"
    );
}

#[tokio::test]
async fn openai_chat_cached_usage_is_counted() {
    let r = chat_ok("openai_chat/response_cached_usage.json").await;
    assert_eq!(r.usage, usage(2006, 300, 1920));
}

#[tokio::test]
async fn openai_chat_unparseable_arguments_are_kept_as_a_string() {
    let r = chat_ok("openai_chat/response_bad_arguments.json").await;
    assert_eq!(
        r.tool_calls,
        vec![call(
            "call_trunc01",
            "get_weather",
            json!("{\"location\": \"Bos")
        )]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_chat_error_body_is_a_status_error_without_the_key() {
    let (result, received) = chat_exchange(vec![Reply::json(
        401,
        &golden_text("openai_chat/error_invalid_api_key.json"),
    )])
    .await;
    assert_eq!(received.len(), 1);
    assert_eq!(
        result,
        Err(LlmError::Status {
            status: 401,
            message: "invalid_request_error (invalid_api_key): Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys.".into()
        })
    );
}

#[tokio::test]
async fn openai_chat_bad_request_is_not_retried() {
    let (result, received) = chat_exchange(vec![
        Reply::json(400, r#"{"error":{"message":"Invalid 'messages[3].tool_call_id'","type":"invalid_request_error","param":"messages[3].tool_call_id","code":null}}"#),
        Reply::json(200, &golden_text("openai_chat/response_text.json")),
    ])
    .await;
    assert_eq!(received.len(), 1, "a 400 must not be sent again");
    assert!(
        matches!(result, Err(LlmError::Status { status: 400, .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn openai_chat_rate_limit_is_retried_once_then_succeeds() {
    let (result, received) = chat_exchange(vec![
        Reply::json(429, &golden_text("openai_chat/error_rate_limit.json"))
            .header("retry-after-ms", "20"),
        Reply::json(200, &golden_text("openai_chat/response_text.json")),
    ])
    .await;
    assert_eq!(received.len(), 2);
    for r in &received {
        assert_chat_request(r);
    }
    assert_eq!(ok(result).text, "Hello! How can I assist you today?");
}

#[tokio::test]
async fn openai_chat_server_errors_stop_after_three_tries() {
    let busy = || {
        Reply::json(
            503,
            r#"{"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}"#,
        )
    };
    let (result, received) = chat_exchange(vec![busy(), busy(), busy(), busy()]).await;
    assert_eq!(received.len(), 3);
    assert_eq!(
        result,
        Err(LlmError::Status {
            status: 503,
            message: "server_error: The server is overloaded (gave up after 3 tries)".into()
        })
    );
}

// ---- OpenAI-compatible local server over HTTP ------------------------------------------------

#[tokio::test]
async fn openai_compat_sends_max_tokens_and_no_key() {
    let server = TestServer::start(
        "/v1",
        vec![Reply::json(
            200,
            &golden_text("openai_chat/compat_response_tool_call.json"),
        )],
    );
    let model = OpenAiCompatModel::new(&server.base_url, "qwen2.5-coder-1.5b-instruct")
        .and_then(|m| m.with_http_config(fast_http()))
        .unwrap_or_else(|e| panic!("{e}"));
    let r = ok(model.complete(&conversation()).await);
    let received = server.finish();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/chat/completions");
    assert_eq!(received[0].header("authorization"), None);
    assert_eq!(received[0].header("content-type"), Some("application/json"));
    assert_eq!(
        received[0].body,
        golden_json("openai_chat/compat_request.json")
    );
    assert_eq!(
        r.tool_calls,
        vec![call("Kx81Fa0", "notes_get", json!({"id": "n_7"}))]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.usage, usage(311, 18, 0));
    assert_eq!(r.model, "qwen2.5-coder-1.5b-instruct");
}

#[tokio::test]
async fn openai_compat_sends_an_optional_key_as_bearer() {
    let server = TestServer::start(
        "/v1",
        vec![Reply::json(
            200,
            &golden_text("openai_chat/response_text.json"),
        )],
    );
    let model = OpenAiCompatModel::new(&server.base_url, "local")
        .and_then(|m| m.with_api_key("vllm-key"))
        .unwrap_or_else(|e| panic!("{e}"));
    ok(model.complete(&conversation()).await);
    let received = server.finish();
    assert_eq!(received[0].header("authorization"), Some("Bearer vllm-key"));
}

#[tokio::test]
async fn openai_compat_gets_no_key_unless_one_is_named_for_it() {
    // OPENAI_API_KEY is OpenAI's: a compatible server at another address never gets it; it gets
    // the key named for it, OPENAI_COMPAT_API_KEY, and nothing else.
    let cases: [(&[(&str, &str)], Option<&str>); 3] = [
        (&[("OPENAI_API_KEY", "sk-openai-secret")], None),
        (
            &[
                ("OPENAI_API_KEY", "sk-openai-secret"),
                ("OPENAI_COMPAT_API_KEY", "compat-key"),
            ],
            Some("Bearer compat-key"),
        ),
        (&[], None),
    ];
    for (env, want) in cases {
        let server = TestServer::start(
            "/v1",
            vec![Reply::json(
                200,
                &golden_text("openai_chat/response_text.json"),
            )],
        );
        let lookup = |var: &str| {
            env.iter()
                .find(|(name, _)| *name == var)
                .map(|(_, value)| value.to_string())
        };
        let model = OpenAiCompatModel::from_lookup(&server.base_url, "local", lookup)
            .and_then(|m| m.with_http_config(fast_http()))
            .unwrap_or_else(|e| panic!("{e}"));
        ok(model.complete(&conversation()).await);
        let received = server.finish();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].header("authorization"), want, "{env:?}");
    }
}

// ---- keys stay with the host they were meant for ---------------------------------------------

/// A server that must receive nothing: it stops after a short wait for a first connection.
fn recorder() -> TestServer {
    TestServer::start_waiting(
        "",
        vec![Reply::json(
            200,
            &golden_text("anthropic/response_text.json"),
        )],
        std::time::Duration::from_millis(1500),
    )
}

#[tokio::test]
async fn a_redirect_is_refused_and_the_key_goes_nowhere_else() {
    // Anthropic's key travels as `x-api-key`, which HTTP clients keep across hosts; OpenAI's as
    // `authorization`. Neither may reach the host a redirect names.
    for anthropic_format in [true, false] {
        let elsewhere = recorder();
        let target = format!("{}/v1/messages", elsewhere.base_url);
        let first = TestServer::start(
            if anthropic_format { "" } else { "/v1" },
            vec![
                Reply::json(307, "").header("location", &target),
                Reply::json(307, "").header("location", &target),
            ],
        );
        let result = if anthropic_format {
            AnthropicModel::new(ANTHROPIC_KEY, ANTHROPIC_MODEL)
                .and_then(|m| m.with_base_url(&first.base_url))
                .and_then(|m| m.with_http_config(fast_http()))
                .unwrap_or_else(|e| panic!("{e}"))
                .complete(&conversation())
                .await
        } else {
            OpenAiChatModel::new(OPENAI_KEY, OPENAI_MODEL)
                .and_then(|m| m.with_base_url(&first.base_url))
                .and_then(|m| m.with_http_config(fast_http()))
                .unwrap_or_else(|e| panic!("{e}"))
                .complete(&conversation())
                .await
        };
        let at_first = first.finish();
        let at_elsewhere = elsewhere.finish();
        assert!(
            at_elsewhere.is_empty(),
            "the redirect target received {:?}",
            at_elsewhere.iter().map(|r| &r.headers).collect::<Vec<_>>()
        );
        assert_eq!(at_first.len(), 1, "a redirect is not retried");
        match result {
            Err(LlmError::Status {
                status: 307,
                message,
            }) => {
                assert!(
                    message.contains("redirected to host `127.0.0.1`"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn an_error_body_echoing_the_key_at_the_cut_is_scrubbed() {
    // The key starts a few characters before the 300th, where the excerpt is cut: cut first and
    // the scrubber no longer sees the whole key, so its first characters would be shown.
    const LONG_KEY: &str = "sk-live-0123456789abcdefghij";
    let message = format!("{}{LONG_KEY} is not a valid key.", "x".repeat(288));
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}});
    let server = TestServer::start("/v1", vec![Reply::json(401, &body.to_string())]);
    let model = OpenAiChatModel::new(LONG_KEY, OPENAI_MODEL)
        .and_then(|m| m.with_base_url(&server.base_url))
        .and_then(|m| m.with_http_config(fast_http()))
        .unwrap_or_else(|e| panic!("{e}"));
    let result = model.complete(&conversation()).await;
    server.finish();
    match result {
        Err(e @ LlmError::Status { status: 401, .. }) => {
            let shown = e.to_string();
            assert!(!shown.contains(&LONG_KEY[..8]), "{shown}");
            assert!(
                shown.contains("[redacted]") || shown.contains("[redac"),
                "{shown}"
            );
        }
        other => panic!("{other:?}"),
    }
}

// ---- OpenAI Responses over HTTP --------------------------------------------------------------

async fn responses_exchange(
    replies: Vec<Reply>,
) -> (Result<ModelResponse, LlmError>, Vec<Received>) {
    let server = TestServer::start("/v1", replies);
    let model = OpenAiResponsesModel::new(OPENAI_KEY, OPENAI_MODEL)
        .and_then(|m| m.with_base_url(&server.base_url))
        .and_then(|m| m.with_http_config(fast_http()))
        .unwrap_or_else(|e| panic!("{e}"));
    let result = model.complete(&conversation()).await;
    (result, server.finish())
}

async fn responses_ok(fixture: &str) -> ModelResponse {
    let (result, received) =
        responses_exchange(vec![Reply::json(200, &golden_text(fixture))]).await;
    assert_eq!(received.len(), 1);
    let r = &received[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/responses");
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, golden_json("openai_responses/request.json"));
    ok(result)
}

#[tokio::test]
async fn openai_responses_text_response_is_parsed() {
    let r = responses_ok("openai_responses/response_text.json").await;
    assert_eq!(
        r.text,
        "In a peaceful grove beneath a silver moon, a unicorn named Lumina discovered a hidden pool that reflected the stars."
    );
    assert_eq!(r.tool_calls, vec![]);
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.usage, usage(36, 87, 0));
    assert_eq!(r.model, "gpt-4.1-2025-04-14");
}

#[tokio::test]
async fn openai_responses_single_tool_call_is_parsed() {
    let r = responses_ok("openai_responses/response_tool_call.json").await;
    assert_eq!(
        r.tool_calls,
        vec![call(
            "call_12345xyz",
            "get_weather",
            json!({"location": "Paris, France"})
        )]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.usage, usage(291, 23, 0));
}

#[tokio::test]
async fn openai_responses_parallel_tool_calls_are_parsed_in_order() {
    let r = responses_ok("openai_responses/response_parallel.json").await;
    assert_eq!(
        r.tool_calls,
        vec![
            call(
                "call_12345xyz",
                "get_weather",
                json!({"location": "Paris, France"})
            ),
            call(
                "call_67890abc",
                "get_weather",
                json!({"location": "Bogotá, Colombia"})
            ),
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_responses_max_tokens_is_reported() {
    let r = responses_ok("openai_responses/response_max_tokens.json").await;
    assert_eq!(r.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        r.text,
        "Here is a detailed history of the Roman Empire. It began"
    );
}

#[tokio::test]
async fn openai_responses_cached_usage_is_counted() {
    let r = responses_ok("openai_responses/response_cached_usage.json").await;
    assert_eq!(r.usage, usage(2006, 300, 1920));
}

#[tokio::test]
async fn openai_responses_error_body_is_a_status_error() {
    let (result, received) = responses_exchange(vec![Reply::json(
        400,
        &golden_text("openai_responses/error_invalid_request.json"),
    )])
    .await;
    assert_eq!(received.len(), 1);
    assert_eq!(
        result,
        Err(LlmError::Status {
            status: 400,
            message: "invalid_request_error (invalid_type): Invalid type for 'input[2].call_id': expected a string, but got an integer instead.".into()
        })
    );
}

// ---- transport -------------------------------------------------------------------------------

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    // A port that was free a moment ago and has no listener now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let model = OpenAiCompatModel::new(&format!("http://127.0.0.1:{port}/v1"), "local")
        .and_then(|m| m.with_http_config(fast_http()))
        .unwrap_or_else(|e| panic!("{e}"));
    match model.complete(&conversation()).await {
        Err(LlmError::Transport(message)) => {
            assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
            assert!(message.contains("gave up after 3 tries"), "{message}");
            assert!(message.to_lowercase().contains("refused"), "{message}");
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_non_json_success_body_is_a_decode_error() {
    let (result, received) =
        chat_exchange(vec![Reply::json(200, "<html>captive portal</html>")]).await;
    assert_eq!(received.len(), 1);
    match result {
        Err(LlmError::Decode(message)) => assert!(message.contains("captive portal"), "{message}"),
        other => panic!("expected a decode error, got {other:?}"),
    }
}
