//! The robustness case file: what it may say, what it means, and the pure checks on it
//! (refusals name the case and the reason; nothing is half-read). The format is documented in
//! the parent module and in `security/robustness/README.md`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The most bytes one case may send (the generated `parts` included): enough to pass every cap
/// the server has (4 MiB a stdio line, 1 MiB an HTTP body) with room to spare.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024 * 1024;

/// The longest a case may wait for its answer.
pub const MAX_TIMEOUT_MS: u64 = 60_000;

/// The longest load run a case may ask for.
pub const MAX_LOAD_MS: u64 = 600_000;

/// The most concurrent clients a load case may ask for (the HTTP front serves 64 at once).
pub const MAX_CLIENTS: usize = 64;

/// One case file: wire cases (`[[case]]`) and load runs (`[[load]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    #[serde(default)]
    pub case: Vec<WireCase>,
    #[serde(default)]
    pub load: Vec<LoadCase>,
    #[serde(default)]
    pub connection: Vec<ConnectionCase>,
    /// Soak runs against a `toolgate serve` child process: never in the compiled-in files.
    #[serde(default)]
    pub soak: Vec<SoakCase>,
}

/// The longest soak a case may ask for (an hour).
pub const MAX_SOAK_MS: u64 = 3_600_000;

/// A soak run: `clients` HTTP clients (half 2025-11-25 sessions, half 2026-07-28 stateless
/// requests) writing and reading for `duration_ms` against the real `toolgate serve --http`
/// in a child process, whose own resident memory is sampled every second.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoakCase {
    pub id: String,
    #[serde(default = "soak_category")]
    pub category: String,
    #[serde(default)]
    pub description: String,
    /// Concurrent clients, 2 to 64; even ones speak 2025-11-25, odd ones 2026-07-28.
    pub clients: usize,
    /// How long the clients send, warm-up (the first tenth) included: 1000 to 3600000.
    pub duration_ms: u64,
    /// How many times each write is sent (by different clients, so across both revisions).
    pub retries: usize,
    /// The most the server's resident memory may grow from the end of the warm-up to the end.
    pub rss_growth_mib: u64,
    /// The most requests that may fail (any answer but a success, a timeout, a reset).
    #[serde(default)]
    pub max_errors: usize,
}

fn soak_category() -> String {
    "soak".into()
}

/// Why `soak` is malformed or unbounded; `Ok` when it can run.
pub fn check_soak(soak: &SoakCase) -> Result<(), String> {
    if soak.clients < 2 || soak.clients > MAX_CLIENTS {
        return Err(format!(
            "`clients` must be 2 to {MAX_CLIENTS} (half on each protocol revision)"
        ));
    }
    if soak.duration_ms < 1000 || soak.duration_ms > MAX_SOAK_MS {
        return Err(format!("`duration_ms` must be 1000 to {MAX_SOAK_MS}"));
    }
    if !(1..=10).contains(&soak.retries) {
        return Err("`retries` must be 1 to 10".into());
    }
    if soak.rss_growth_mib == 0 {
        return Err("`rss_growth_mib` must be at least 1".into());
    }
    Ok(())
}

/// What a connection case does to the HTTP front, and what the server must do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// A request's headers, one byte every 250 ms: cut by the header time.
    SlowHeaders,
    /// Headers, then a body one byte every 250 ms: answered 408 by the body time.
    SlowBody,
    /// Connects and says nothing: cut by the header time.
    Idle,
    /// Half a request line, then nothing (a client gone without closing): cut by the header
    /// time.
    HalfOpen,
    /// Holds `max_connections` idle connections, then one more: that one is answered 503 at
    /// once, and the held ones are cut by the header time.
    PastTheCap,
    /// The HTTP/2 prior-knowledge preface: closed without being served.
    Http2Preface,
    /// A 2025-11-25 session's GET stream, read: it ends by the stream time.
    HeldStream,
    /// A GET stream dropped unread: the session opens a new one.
    AbandonedStream,
}

impl Attack {
    pub fn as_str(self) -> &'static str {
        match self {
            Attack::SlowHeaders => "slow-headers",
            Attack::SlowBody => "slow-body",
            Attack::Idle => "idle",
            Attack::HalfOpen => "half-open",
            Attack::PastTheCap => "past-the-cap",
            Attack::Http2Preface => "http2-preface",
            Attack::HeldStream => "held-stream",
            Attack::AbandonedStream => "abandoned-stream",
        }
    }
}

/// A hostile connection to a server of its own (the suite's notes server behind the HTTP
/// front with the production limits, those named here shortened so the case takes seconds),
/// then a probe on that server that must succeed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionCase {
    pub id: String,
    pub category: String,
    #[serde(default)]
    pub description: String,
    pub attack: Attack,
    /// [`HttpLimits::header_time`](toolgate_mcp::HttpLimits), in ms.
    #[serde(default)]
    pub header_ms: Option<u64>,
    /// [`HttpLimits::body_time`](toolgate_mcp::HttpLimits), in ms.
    #[serde(default)]
    pub body_ms: Option<u64>,
    /// [`HttpLimits::stream_time`](toolgate_mcp::HttpLimits), in ms.
    #[serde(default)]
    pub stream_ms: Option<u64>,
    /// [`HttpLimits::max_connections`](toolgate_mcp::HttpLimits).
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// The case's deadline: the server must have cut or answered by then (1 to 60000).
    pub within_ms: u64,
}

/// The most connections a `past-the-cap` case may hold.
pub const MAX_HELD_CONNECTIONS: usize = 64;

/// The limits a connection case's server runs with: the production ones, those the case names
/// replaced.
pub fn connection_limits(case: &ConnectionCase) -> toolgate_mcp::HttpLimits {
    let defaults = toolgate_mcp::HttpLimits::default();
    let ms = std::time::Duration::from_millis;
    let max_connections = case.max_connections.unwrap_or(defaults.max_connections);
    toolgate_mcp::HttpLimits {
        header_time: case.header_ms.map_or(defaults.header_time, ms),
        body_time: case.body_ms.map_or(defaults.body_time, ms),
        stream_time: case.stream_ms.map_or(defaults.stream_time, ms),
        max_connections,
        max_concurrent: defaults.max_concurrent.min(max_connections),
        ..defaults
    }
}

/// Why `case` is malformed or cannot show anything in its deadline; `Ok` when it can run.
pub fn check_connection(case: &ConnectionCase) -> Result<(), String> {
    if case.within_ms == 0 || case.within_ms > MAX_TIMEOUT_MS {
        return Err(format!("`within_ms` must be 1 to {MAX_TIMEOUT_MS}"));
    }
    let limits = connection_limits(case);
    limits.check()?;
    let (name, bound) = match case.attack {
        Attack::SlowHeaders | Attack::Idle | Attack::HalfOpen | Attack::PastTheCap => {
            ("header_ms", limits.header_time)
        }
        Attack::SlowBody => ("body_ms", limits.body_time),
        Attack::HeldStream => ("stream_ms", limits.stream_time),
        Attack::Http2Preface | Attack::AbandonedStream => ("within_ms", std::time::Duration::ZERO),
    };
    if bound.as_millis() >= u128::from(case.within_ms) {
        return Err(format!(
            "attack `{}` is bounded by `{name}` ({} ms), which must be below `within_ms` ({})",
            case.attack.as_str(),
            bound.as_millis(),
            case.within_ms
        ));
    }
    if case.attack == Attack::PastTheCap && limits.max_connections > MAX_HELD_CONNECTIONS {
        return Err(format!(
            "attack `past-the-cap` holds `max_connections` connections: at most \
             {MAX_HELD_CONNECTIONS}"
        ));
    }
    Ok(())
}

/// Where a wire case is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// Newline-delimited JSON-RPC into the stdio transport.
    Stdio,
    /// One POST to the Streamable HTTP endpoint `/mcp` on 127.0.0.1.
    Http,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// One malformed (or control) message and the answer it must get.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireCase {
    pub id: String,
    pub category: String,
    pub transport: Transport,
    #[serde(default)]
    pub description: String,
    /// The payload as text (sent as UTF-8).
    #[serde(default)]
    pub send: Option<String>,
    /// The payload as hex bytes (spaces allowed): invalid UTF-8, NUL bytes.
    #[serde(default)]
    pub send_hex: Option<String>,
    /// The payload generated from `[text, times]` pairs, each text repeated `times` times in
    /// order: deep nesting and huge strings without a huge file.
    #[serde(default)]
    pub parts: Option<Vec<(String, usize)>>,
    /// stdio only: send on a new session that has not been initialized (else on the suite's
    /// shared, initialized session).
    #[serde(default)]
    pub fresh: bool,
    /// http only: headers that replace the defaults by name; an empty value removes one.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub expect: Expected,
    /// How long to wait for the answer (default 5000 ms; a silence is waited for 400 ms).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The answer a case must get: exactly one of `error`, `tool_error`, `silence`, `result`;
/// `http_status` (http only) is checked beside it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    /// A JSON-RPC error with this code.
    #[serde(default)]
    pub error: Option<i64>,
    /// A `tools/call` result with `isError: true` and this stable code in its structured
    /// content (the dispatcher refused the arguments; its trace line is cited).
    #[serde(default)]
    pub tool_error: Option<String>,
    /// No answer at all (a notification).
    #[serde(default)]
    pub silence: bool,
    /// A successful JSON-RPC result (a control: the malformed-looking but valid message is
    /// served).
    #[serde(default)]
    pub result: bool,
    /// The HTTP status of the response.
    #[serde(default)]
    pub http_status: Option<u16>,
}

/// A bounded load run over HTTP: many clients writing (each write sent `retries` times, with
/// the same arguments, half of them also with the same `_meta` idempotency key) and reading.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadCase {
    pub id: String,
    #[serde(default = "load_category")]
    pub category: String,
    #[serde(default)]
    pub description: String,
    /// Concurrent HTTP clients.
    pub clients: usize,
    /// How long the clients send, warm-up included.
    pub duration_ms: u64,
    /// How many times each write is sent (at least 2: the retries are the point).
    pub retries: usize,
    /// The most the process's resident memory may grow from the end of the warm-up to the
    /// end of the run, in MiB.
    pub rss_growth_mib: u64,
}

fn load_category() -> String {
    "load".into()
}

/// What the server answered to a case, as the harness saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The HTTP status (http only).
    pub http_status: Option<u16>,
    /// The first JSON-RPC message of the answer, if there was one.
    pub message: Option<Value>,
    /// Nothing came back within the wait.
    pub silent: bool,
}

/// The payload bytes of `case`, or why the case is malformed.
pub fn payload(case: &WireCase) -> Result<Vec<u8>, String> {
    let given = [
        case.send.is_some(),
        case.send_hex.is_some(),
        case.parts.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err("give exactly one of `send`, `send_hex` and `parts`".into());
    }
    if let Some(text) = &case.send {
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(hex) = &case.send_hex {
        return decode_hex(hex);
    }
    let mut total: usize = 0;
    let parts = case.parts.as_deref().unwrap_or_default();
    for (text, times) in parts {
        total = text
            .len()
            .checked_mul(*times)
            .and_then(|n| total.checked_add(n))
            .filter(|n| *n <= MAX_PAYLOAD_BYTES)
            .ok_or_else(|| format!("`parts` make more than {MAX_PAYLOAD_BYTES} bytes"))?;
    }
    let mut out = Vec::with_capacity(total);
    for (text, times) in parts {
        for _ in 0..*times {
            out.extend_from_slice(text.as_bytes());
        }
    }
    Ok(out)
}

fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err("`send_hex` has an odd number of hex digits".into());
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| {
                    format!(
                        "`send_hex` has a byte that is not hex: {:?}",
                        String::from_utf8_lossy(pair)
                    )
                })
        })
        .collect()
}

/// Why `case` is malformed, beyond what serde already refused; `Ok` when it can run.
pub fn check_wire(case: &WireCase) -> Result<(), String> {
    let e = &case.expect;
    let kinds = [
        e.error.is_some(),
        e.tool_error.is_some(),
        e.silence,
        e.result,
    ];
    let named = kinds.iter().filter(|k| **k).count();
    let status_only = named == 0 && case.transport == Transport::Http && e.http_status.is_some();
    if named > 1 || (named == 0 && !status_only) {
        return Err(
            "`expect` needs exactly one of `error`, `tool_error`, `silence` and `result` \
                    (over http, `http_status` alone is enough)"
                .into(),
        );
    }
    if case.transport == Transport::Stdio {
        if e.http_status.is_some() {
            return Err("`expect.http_status` applies to transport \"http\" only".into());
        }
        if !case.headers.is_empty() {
            return Err("`headers` apply to transport \"http\" only".into());
        }
    }
    if case.transport == Transport::Http && case.fresh {
        return Err("`fresh` applies to transport \"stdio\" only".into());
    }
    if let Some(ms) = case.timeout_ms
        && (ms == 0 || ms > MAX_TIMEOUT_MS)
    {
        return Err(format!("`timeout_ms` must be 1 to {MAX_TIMEOUT_MS}"));
    }
    payload(case).map(|_| ())
}

/// Why `load` is malformed; `Ok` when it can run.
pub fn check_load(load: &LoadCase) -> Result<(), String> {
    if load.clients == 0 || load.clients > MAX_CLIENTS {
        return Err(format!("`clients` must be 1 to {MAX_CLIENTS}"));
    }
    if load.duration_ms < 200 || load.duration_ms > MAX_LOAD_MS {
        return Err(format!("`duration_ms` must be 200 to {MAX_LOAD_MS}"));
    }
    if !(2..=10).contains(&load.retries) {
        return Err("`retries` must be 2 to 10: a write sent once shows nothing".into());
    }
    if load.rss_growth_mib == 0 {
        return Err("`rss_growth_mib` must be at least 1".into());
    }
    Ok(())
}

/// Whether the answer is the expected one: `Ok(rule)` names what was seen (for the report),
/// `Err(why)` says how it differs.
pub fn judge_answer(expected: &Expected, answer: &Answer) -> Result<String, String> {
    let status = |rule: String| -> Result<String, String> {
        match (expected.http_status, answer.http_status) {
            (Some(want), Some(got)) if want != got => Err(format!(
                "expected HTTP {want}, got HTTP {got} ({})",
                describe(answer)
            )),
            (Some(want), None) => Err(format!("expected HTTP {want}, got no HTTP response")),
            (Some(want), Some(_)) => Ok(format!("http {want}, {rule}")),
            (None, _) => Ok(rule),
        }
    };
    if expected.silence {
        return match &answer.message {
            None => status("no answer".into()),
            Some(message) => Err(format!("expected no answer, got {}", bounded(message))),
        };
    }
    let status_only = expected.error.is_none() && expected.tool_error.is_none() && !expected.result;
    if status_only {
        // Only the status was asked for (a refusal the HTTP layer answers in its own words).
        return status(match &answer.message {
            Some(message) => format!("answer {}", bounded(message)),
            None => "no JSON-RPC body".into(),
        })
        .and_then(|rule| {
            if answer.http_status.is_some() {
                Ok(rule)
            } else {
                Err("expected an HTTP response, got none".into())
            }
        });
    }
    let Some(message) = &answer.message else {
        return Err(format!("expected an answer, got {}", describe(answer)));
    };
    if let Some(code) = expected.error {
        return match message.pointer("/error/code").and_then(Value::as_i64) {
            Some(got) if got == code => status(format!("jsonrpc {code}")),
            _ => Err(format!(
                "expected JSON-RPC error {code}, got {}",
                bounded(message)
            )),
        };
    }
    if let Some(code) = &expected.tool_error {
        let is_error = message.pointer("/result/isError") == Some(&Value::Bool(true));
        let got = message
            .pointer("/result/structuredContent/code")
            .and_then(Value::as_str);
        return if is_error && got == Some(code.as_str()) {
            status(format!("tool error {code}"))
        } else {
            Err(format!(
                "expected tool error {code}, got {}",
                bounded(message)
            ))
        };
    }
    // `result`
    let ok = message.get("result").is_some()
        && message.get("error").is_none()
        && message.pointer("/result/isError") != Some(&Value::Bool(true));
    if ok {
        status("result".into())
    } else {
        Err(format!("expected a result, got {}", bounded(message)))
    }
}

fn describe(answer: &Answer) -> String {
    match (&answer.message, answer.silent) {
        (Some(message), _) => bounded(message),
        (None, true) => "no answer".into(),
        (None, false) => "a body with no JSON-RPC message".into(),
    }
}

/// `value` as compact JSON of at most 300 characters.
pub fn bounded(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 300 {
        return text;
    }
    let cut: String = text.chars().take(300).collect();
    format!("{cut}... ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn case(toml_text: &str) -> WireCase {
        let file: CaseFile = toml::from_str(toml_text).unwrap();
        file.case.into_iter().next().unwrap()
    }

    const BASE: &str = "[[case]]\nid = \"a\"\ncategory = \"c\"\n";

    #[test]
    fn a_case_that_cannot_say_what_it_sends_or_expects_is_refused() {
        let table = [
            (
                "transport = \"stdio\"\nexpect = { error = 1 }\n",
                "exactly one of `send`",
            ),
            (
                "transport = \"stdio\"\nsend = \"x\"\nsend_hex = \"00\"\nexpect = { error = 1 }\n",
                "exactly one of `send`",
            ),
            (
                "transport = \"stdio\"\nsend = \"x\"\nexpect = {}\n",
                "exactly one of `error`",
            ),
            (
                "transport = \"http\"\nsend = \"x\"\nexpect = {}\n",
                "exactly one of `error`",
            ),
            (
                "transport = \"stdio\"\nsend = \"x\"\nexpect = { error = 1, silence = true }\n",
                "exactly one of `error`",
            ),
            (
                "transport = \"stdio\"\nsend = \"x\"\nexpect = { error = 1, http_status = 400 }\n",
                "http_status",
            ),
            (
                "transport = \"http\"\nsend = \"x\"\nfresh = true\nexpect = { error = 1 }\n",
                "fresh",
            ),
            (
                "transport = \"stdio\"\nsend_hex = \"f\"\nexpect = { error = 1 }\n",
                "odd",
            ),
            (
                "transport = \"stdio\"\nsend_hex = \"zz\"\nexpect = { error = 1 }\n",
                "not hex",
            ),
            (
                "transport = \"stdio\"\nparts = [[\"x\", 100000000]]\nexpect = { error = 1 }\n",
                "more than",
            ),
            (
                "transport = \"stdio\"\nsend = \"x\"\ntimeout_ms = 0\nexpect = { error = 1 }\n",
                "timeout_ms",
            ),
        ];
        for (body, want) in table {
            let why = check_wire(&case(&format!("{BASE}{body}"))).unwrap_err();
            assert!(why.contains(want), "{body}: {why}");
        }
    }

    #[test]
    fn a_connection_case_that_could_not_show_its_bound_in_its_deadline_is_refused() {
        let case = |text: &str| -> ConnectionCase {
            let file: CaseFile = toml::from_str(&format!(
                "[[connection]]\nid = \"c\"\ncategory = \"c\"\n{text}"
            ))
            .unwrap();
            file.connection.into_iter().next().unwrap()
        };
        let table = [
            (
                "attack = \"idle\"\nheader_ms = 1000\nwithin_ms = 4000\n",
                None,
            ),
            // The production header time (10 s) is past the deadline.
            ("attack = \"idle\"\nwithin_ms = 4000\n", Some("header_ms")),
            (
                "attack = \"slow-body\"\nbody_ms = 5000\nwithin_ms = 4000\n",
                Some("body_ms"),
            ),
            (
                "attack = \"held-stream\"\nstream_ms = 1000\nwithin_ms = 4000\n",
                None,
            ),
            (
                "attack = \"http2-preface\"\nwithin_ms = 0\n",
                Some("within_ms"),
            ),
            (
                "attack = \"idle\"\nheader_ms = 0\nwithin_ms = 4000\n",
                Some("header_time"),
            ),
            (
                "attack = \"past-the-cap\"\nheader_ms = 1000\nwithin_ms = 4000\n",
                Some("at most 64"),
            ),
            (
                "attack = \"past-the-cap\"\nheader_ms = 1000\nmax_connections = 4\nwithin_ms = 4000\n",
                None,
            ),
        ];
        for (text, refused) in table {
            match (check_connection(&case(text)), refused) {
                (Ok(()), None) => {}
                (Err(why), Some(want)) => assert!(why.contains(want), "{text}: {why}"),
                (got, want) => panic!("{text}: got {got:?}, wanted a refusal naming {want:?}"),
            }
        }
        let unknown =
            "[[connection]]\nid = \"c\"\ncategory = \"c\"\nattack = \"teleport\"\nwithin_ms = 1\n";
        assert!(toml::from_str::<CaseFile>(unknown).is_err());
    }

    #[test]
    fn parts_and_hex_make_exactly_the_bytes_they_say() {
        let c = case(&format!(
            "{BASE}transport = \"stdio\"\nparts = [[\"[\", 3], [\"1\", 1], [\"]\", 3]]\nexpect = {{ error = 1 }}\n"
        ));
        assert_eq!(payload(&c).unwrap(), b"[[[1]]]");
        let c = case(&format!(
            "{BASE}transport = \"stdio\"\nsend_hex = \"7b 00 ff\"\nexpect = {{ error = 1 }}\n"
        ));
        assert_eq!(payload(&c).unwrap(), [0x7b, 0x00, 0xff]);
    }

    #[test]
    fn an_unknown_field_in_a_case_or_its_expectation_is_refused() {
        for text in [
            format!(
                "{BASE}transport = \"stdio\"\nsend = \"x\"\nexpect = {{ error = 1 }}\nextra = 1\n"
            ),
            format!("{BASE}transport = \"stdio\"\nsend = \"x\"\nexpect = {{ eror = 1 }}\n"),
            format!("{BASE}transport = \"pigeon\"\nsend = \"x\"\nexpect = {{ error = 1 }}\n"),
        ] {
            assert!(toml::from_str::<CaseFile>(&text).is_err(), "{text}");
        }
    }

    #[test]
    fn a_load_run_that_cannot_show_anything_or_is_unbounded_is_refused() {
        let good = LoadCase {
            id: "l".into(),
            category: "load".into(),
            description: String::new(),
            clients: 8,
            duration_ms: 1000,
            retries: 3,
            rss_growth_mib: 64,
        };
        assert!(check_load(&good).is_ok());
        let bad = [
            LoadCase {
                clients: 0,
                ..good.clone()
            },
            LoadCase {
                clients: 65,
                ..good.clone()
            },
            LoadCase {
                duration_ms: 10,
                ..good.clone()
            },
            LoadCase {
                duration_ms: 3_600_000,
                ..good.clone()
            },
            LoadCase {
                retries: 1,
                ..good.clone()
            },
            LoadCase {
                rss_growth_mib: 0,
                ..good.clone()
            },
        ];
        for load in bad {
            assert!(check_load(&load).is_err(), "{load:?}");
        }
    }

    #[test]
    fn a_soak_that_is_unbounded_or_cannot_show_both_revisions_is_refused() {
        let text = "[[soak]]\nid = \"s\"\nclients = 32\nduration_ms = 600000\nretries = 2\n\
                    rss_growth_mib = 32\n";
        let good = toml::from_str::<CaseFile>(text).unwrap().soak.remove(0);
        assert_eq!((good.category.as_str(), good.max_errors), ("soak", 0));
        assert!(check_soak(&good).is_ok());
        let bad = [
            SoakCase {
                clients: 1,
                ..good.clone()
            },
            SoakCase {
                clients: 65,
                ..good.clone()
            },
            SoakCase {
                duration_ms: 999,
                ..good.clone()
            },
            SoakCase {
                duration_ms: MAX_SOAK_MS + 1,
                ..good.clone()
            },
            SoakCase {
                retries: 0,
                ..good.clone()
            },
            SoakCase {
                rss_growth_mib: 0,
                ..good.clone()
            },
        ];
        for soak in bad {
            assert!(check_soak(&soak).is_err(), "{soak:?}");
        }
        assert!(toml::from_str::<CaseFile>(&format!("{text}hours = 1\n")).is_err());
    }

    #[test]
    fn an_answer_counts_only_when_code_status_and_kind_all_match() {
        let error = |code: i64| json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": "m"}});
        let tool = json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": true, "structuredContent": {"code": "invalid_argument"}}});
        let fine = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
        let err = |code| Expected {
            error: Some(code),
            ..Expected::default()
        };
        let answer = |status: Option<u16>, message: Option<Value>| Answer {
            http_status: status,
            silent: message.is_none(),
            message,
        };
        let table: Vec<(Expected, Answer, bool)> = vec![
            (err(-32700), answer(None, Some(error(-32700))), true),
            // A wrong expected code fails: the suite cannot be satisfied by any error.
            (err(-32600), answer(None, Some(error(-32700))), false),
            (err(-32700), answer(None, None), false),
            (err(-32700), answer(None, Some(fine.clone())), false),
            (
                Expected {
                    http_status: Some(413),
                    ..err(-32600)
                },
                answer(Some(413), Some(error(-32600))),
                true,
            ),
            (
                Expected {
                    http_status: Some(413),
                    ..err(-32600)
                },
                answer(Some(400), Some(error(-32600))),
                false,
            ),
            (
                Expected {
                    silence: true,
                    ..Expected::default()
                },
                answer(None, None),
                true,
            ),
            (
                Expected {
                    silence: true,
                    ..Expected::default()
                },
                answer(None, Some(error(-32600))),
                false,
            ),
            (
                Expected {
                    silence: true,
                    http_status: Some(202),
                    ..Expected::default()
                },
                answer(Some(202), None),
                true,
            ),
            (
                Expected {
                    tool_error: Some("invalid_argument".into()),
                    ..Expected::default()
                },
                answer(Some(200), Some(tool.clone())),
                true,
            ),
            (
                Expected {
                    tool_error: Some("not_found".into()),
                    ..Expected::default()
                },
                answer(Some(200), Some(tool.clone())),
                false,
            ),
            (
                Expected {
                    result: true,
                    ..Expected::default()
                },
                answer(None, Some(fine.clone())),
                true,
            ),
            // A tool error is not a result.
            (
                Expected {
                    result: true,
                    ..Expected::default()
                },
                answer(None, Some(tool)),
                false,
            ),
            (
                Expected {
                    result: true,
                    ..Expected::default()
                },
                answer(None, Some(error(-32601))),
                false,
            ),
            (
                Expected {
                    http_status: Some(415),
                    ..Expected::default()
                },
                answer(Some(415), None),
                true,
            ),
            (
                Expected {
                    http_status: Some(415),
                    ..Expected::default()
                },
                answer(Some(200), Some(fine.clone())),
                false,
            ),
        ];
        for (expected, answer, ok) in table {
            assert_eq!(
                judge_answer(&expected, &answer).is_ok(),
                ok,
                "{expected:?} {answer:?}"
            );
        }
    }
}
