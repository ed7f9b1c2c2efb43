//! The authorization suite: token cases against the real MCP server as an OAuth 2.1 resource
//! server, and a check that no token reaches any trace or log.
//!
//! # What runs
//!
//! - An authorization server of the suite's own on 127.0.0.1 ([`issuer`]): RSA 2048 keys made
//!   at run time, RFC 8414 metadata and a JWKS holding the published key (kid `suite-key`);
//!   a second key (kid `stranger-key`) is never published. Tokens are signed in the suite with
//!   `jsonwebtoken`, exactly as each case describes them. No Node, no network beyond 127.0.0.1.
//! - Two instances of the real MCP server over Streamable HTTP ([`servers`]): the notes toolset
//!   through the wiring's dispatcher, in this process, each on its own 127.0.0.1 port with its
//!   own store and resource URI (`main` and `second`), both trusting that authorization server
//!   with every `[serve.auth]` setting at its default (RS256 only, `at+jwt` required, a clock
//!   leeway of 60 s, which the suite reads from the config it builds) and the scopes
//!   `notes:read` = `notes_search`, `notes_get` and `notes:write` = the whole toolset. They fetch
//!   the keys through the egress exit, as deployed.
//! - Each case is one HTTP request ([`probe`]); its result ([`judge`]) comes from the status,
//!   the `auth` line the server's HTTP front wrote to the JSON Lines trace (`auth-trace.jsonl`:
//!   decision, rule, resource, principal; never the token), and for a call whether the tool ran
//!   (its decision record in the trace, and for `notes_create` the note in the store). Every
//!   block cites its `auth` line.
//! - The server's log is captured at TRACE level (`auth-server.log`: every `tracing` event of
//!   the servers, rmcp's included, emitted on the suite's thread). After the cases, every token
//!   the suite sent is looked for ([`leaks`]), whole or as any 36-character run of its payload
//!   or signature, in the trace, the log, both stores and the report itself: one row each
//!   (`token-leak`); a token found is `Leaked`, citing the file and line where it is, and a
//!   clean source cites the last line scanned.
//!
//! # Case files (`security/auth/*.toml`, and `--cases FILE`)
//!
//! ```toml
//! [[case]]
//! id = "exp-past-leeway"          # unique across all files
//! category = "clock-skew"         # the table's group
//! what = "exp exactly leeway ago" # optional, for the reviewer
//! expect = "block"                # block | allow
//! request = "call"                # initialize | list | call (default call)
//! tool = "notes_create"           # call only; default notes_create
//! arguments = { query = "x" }     # call only; defaults exist for notes_create, notes_search, notes_get
//! server = "main"                 # main | second (default main)
//! present = "bearer"              # bearer | lowercase_scheme | no_scheme | basic | query |
//!                                 # query_and_header | two_headers | none (default bearer)
//! status = 401                    # the HTTP status the server must answer (allow: default 200)
//! rule = "expired"                # block only: the rule its auth trace line must name
//! hidden = ["notes_create"]       # list + block: tools that must not be listed (rule "withheld", status 200)
//! listed = ["notes_search"]       # list + allow: tools that must be listed
//!
//! [case.token]                    # every field optional: the defaults make a valid token
//! sign = "right"                  # right | other | none | hmac_public | tampered
//! alg = "RS256"                   # header alg (none: "none"; hmac_public: HS256)
//! kid = "suite-key"               # default: the signer's key id (stranger-key for other)
//! typ = "at+jwt"
//! iss = "$issuer"                 # $issuer, $main, $second stand for the suite's URIs
//! aud = "$main"                   # a string or a list
//! sub = "suite-user"
//! client_id = "suite-client"
//! scope = "notes:read notes:write"
//! iat = "now"                     # times: now, then +/- seconds or leeway: "now-leeway+10"
//! exp = "now+300"
//! nbf = "now-10"                  # absent unless given
//! omit = ["exp"]                  # header fields or claims to leave out
//! raw = "not-a-jwt"               # send this text instead of a JWT (no other token field)
//! ```
//!
//! Signers: `right` signs with the published key; `other` with the stranger's key; `none`
//! writes `alg` (default `none`) with an empty signature; `hmac_public` signs HMAC with the
//! published key's public JWK, as served, as the secret; `tampered` signs with the published
//! key and then changes `sub` to `mallory`, keeping the signature.
//!
//! Rules are the server's ([`toolgate_mcp::auth::Refusal::rule`]): `no_token`,
//! `token_in_query`, `malformed_header`, `malformed_token`, `algorithm_refused`, `wrong_type`,
//! `unknown_key`, `bad_signature`, `wrong_issuer`, `wrong_audience`, `no_expiry`, `expired`,
//! `not_yet_valid`, `issued_in_future`, `no_subject`, `keys_unavailable`,
//! `insufficient_scope`; and `withheld` for a list that leaves tools out.
//!
//! Refuses ([`CheckError::Cases`], naming the file and the case): an unknown field, a time that
//! does not parse, an unknown `$name`, a field both set and omitted, an algorithm the signer
//! cannot sign, a block without `status` and `rule`, fields that do not fit the request.

pub mod case;
pub mod issuer;
pub mod judge;
pub mod leaks;
pub mod probe;
pub mod servers;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::trace::{JsonlTrace, TraceSink};

use crate::cases::{load_cases, unique_ids};
use crate::{
    CaseResult, CheckError, Expect, Observed, SuiteOptions, SuiteReport, TraceIndex, TraceLine,
    TraceLocation,
};
use case::{Case, CaseFile, Request, ServerName, TokenPlan, marker, resolve};
use issuer::{Issuer, Names};
use judge::{Observation, judge};
use leaks::Scanner;
use servers::Instance;

const SUITE: &str = "auth";

/// The trace both servers write, in the output folder.
pub const TRACE_FILE: &str = "auth-trace.jsonl";
/// The servers' captured log, in the output folder.
pub const LOG_FILE: &str = "auth-server.log";
/// The report as the CLI writes it (scanned for tokens as rendered).
const REPORT_FILE: &str = "auth.json";

/// The longest the suite may run before it gives up (a harness fault, reported as an error).
const SUITE_LIMIT: Duration = Duration::from_secs(120);

/// The repository's own case files, compiled in.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "security/auth/tokens.toml",
        include_str!("../../../../security/auth/tokens.toml"),
    ),
    (
        "security/auth/clock-skew.toml",
        include_str!("../../../../security/auth/clock-skew.toml"),
    ),
    (
        "security/auth/replay.toml",
        include_str!("../../../../security/auth/replay.toml"),
    ),
    (
        "security/auth/scope.toml",
        include_str!("../../../../security/auth/scope.toml"),
    ),
    (
        "security/auth/presentation.toml",
        include_str!("../../../../security/auth/presentation.toml"),
    ),
];

/// Runs the suite: loads and checks every case file, then runs the servers and the cases on a
/// thread of its own (its own runtime, so that the servers' log is captured there), bounded by
/// [`SUITE_LIMIT`].
pub async fn run(options: &SuiteOptions) -> Result<SuiteReport, CheckError> {
    let started = Instant::now();
    let (case_files, cases) = load(&options.extra_cases)?;
    std::fs::create_dir_all(&options.out_dir).map_err(|e| CheckError::io(&options.out_dir, e))?;
    let options = options.clone();
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("toolgate-check-auth".into())
        .spawn(move || {
            let _ = sender.send(run_isolated(&options, case_files, cases, started));
        })
        .map_err(|e| CheckError::setup(SUITE, format!("cannot start the suite's thread: {e}")))?;
    receiver
        .await
        .map_err(|_| CheckError::setup(SUITE, "the suite's thread ended without a report"))?
}

/// The case files (built in, then `extra`) and their cases, each checked.
pub fn load(extra: &[PathBuf]) -> Result<(Vec<String>, Vec<Case>), CheckError> {
    let files = load_cases::<CaseFile>(BUILTIN, extra)?;
    unique_ids(files.iter().flat_map(|f| {
        f.file
            .case
            .iter()
            .map(|c| (f.origin.as_str(), c.id.as_str()))
    }))?;
    let mut cases = Vec::new();
    for file in &files {
        for spec in &file.file.case {
            cases.push(resolve(spec).map_err(|message| CheckError::Cases {
                path: PathBuf::from(&file.origin),
                message: format!("case `{}`: {message}", spec.id),
            })?);
        }
    }
    Ok((files.into_iter().map(|f| f.origin).collect(), cases))
}

fn run_isolated(
    options: &SuiteOptions,
    case_files: Vec<String>,
    cases: Vec<Case>,
    started: Instant,
) -> Result<SuiteReport, CheckError> {
    let log_path = options.out_dir.join(LOG_FILE);
    let log = std::fs::File::create(&log_path).map_err(|e| CheckError::io(&log_path, e))?;
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(log))
        .with_max_level(tracing::Level::TRACE)
        .finish();
    // This thread only: the servers run on this thread's runtime, so their events come here.
    let _log = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CheckError::setup(SUITE, format!("cannot start a runtime: {e}")))?;
    runtime.block_on(async {
        tokio::time::timeout(SUITE_LIMIT, run_cases(options, case_files, cases, started))
            .await
            .map_err(|_| {
                CheckError::setup(
                    SUITE,
                    format!(
                        "the suite did not finish within {} s",
                        SUITE_LIMIT.as_secs()
                    ),
                )
            })?
    })
}

/// Removes `path` if it is there (a trace from an earlier run would shift every line).
fn remove_stale(path: &Path) -> Result<(), CheckError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CheckError::io(path, e)),
    }
}

fn store_files(out_dir: &Path) -> Vec<PathBuf> {
    ["main", "second"]
        .iter()
        .flat_map(|name| {
            ["", "-wal", "-shm"]
                .map(|suffix| out_dir.join(format!("auth-notes-{name}.sqlite{suffix}")))
        })
        .collect()
}

async fn run_cases(
    options: &SuiteOptions,
    case_files: Vec<String>,
    cases: Vec<Case>,
    started: Instant,
) -> Result<SuiteReport, CheckError> {
    let out_dir = &options.out_dir;
    let trace_path = out_dir.join(TRACE_FILE);
    for stale in std::iter::once(trace_path.clone()).chain(store_files(out_dir)) {
        remove_stale(&stale)?;
    }
    let trace: Arc<dyn TraceSink> =
        Arc::new(JsonlTrace::create(&trace_path).map_err(|e| CheckError::io(&trace_path, e))?);
    options.say("auth: making keys and starting the authorization server");
    let mut issuer = Issuer::start().await?;
    let mut main = Instance::start(
        ServerName::Main,
        out_dir,
        &issuer.issuer,
        issuer.port(),
        Arc::clone(&trace),
    )
    .await?;
    let mut second = Instance::start(
        ServerName::Second,
        out_dir,
        &issuer.issuer,
        issuer.port(),
        Arc::clone(&trace),
    )
    .await?;
    let leeway = servers::config(&issuer.issuer, &main.resource).clock_skew_secs;
    let names = Names {
        issuer: issuer.issuer.clone(),
        main: main.resource.clone(),
        second: second.resource.clone(),
    };
    options.say(&format!(
        "auth: {} cases against {} and {} (leeway {leeway} s)",
        cases.len(),
        main.resource,
        second.resource
    ));
    // Every token sent, with the case that sent it.
    let mut tokens: Vec<(String, String)> = Vec::new();
    let mut results = Vec::new();
    for case in &cases {
        let server = match case.server {
            ServerName::Main => &main,
            ServerName::Second => &second,
        };
        let made = match &case.token {
            TokenPlan::Raw(text) => Ok(text.clone()),
            TokenPlan::Jwt(plan) => issuer.mint(plan, &names, unix_now(), leeway),
        };
        let observed = match made {
            Err(message) => Observation {
                answer: Err(format!("the token could not be made: {message}")),
                auth_lines: vec![],
                ran_traced: None,
                stored: None,
            },
            Ok(token) => {
                let observed = observe(case, server, &token, &trace_path).await?;
                tokens.push((case.id.clone(), token));
                observed
            }
        };
        results.push(judge(case, &observed, TRACE_FILE));
    }
    let mut stopped = Vec::new();
    for instance in [&mut main, &mut second] {
        if let Err(e) = instance.stop().await {
            stopped.push(e);
        }
    }
    issuer.stop().await;
    if !stopped.is_empty() {
        return Err(CheckError::setup(SUITE, stopped.join("; ")));
    }
    let counts = issuer.counts();
    let mut figures = json!({
        "leeway_secs": leeway,
        "algorithms_accepted": servers::config(&issuer.issuer, &main.resource).algorithms,
        "signing_key": "RSA 2048, made at run time",
        "servers": 2,
        "requests": cases.len(),
        "metadata_fetches": counts.metadata.load(std::sync::atomic::Ordering::Relaxed),
        "jwks_fetches": counts.jwks.load(std::sync::atomic::Ordering::Relaxed),
        "tokens_looked_for": tokens.len(),
        "by_category": by_category(&results),
    });
    drop((main, second));
    let leak_rows = look_for_tokens(out_dir, &tokens, &case_files, &results, started)?;
    if let Some(map) = figures.as_object_mut() {
        map.insert("leak_check".into(), leak_rows.1);
    }
    results.extend(leak_rows.0);
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(SuiteReport::new(
        SUITE,
        case_files,
        vec![TRACE_FILE.into(), LOG_FILE.into()],
        results,
        duration_ms,
    )
    .with_figures(figures))
}

/// Sends `case`'s request with `token` and reads what it left in the trace and the store.
async fn observe(
    case: &Case,
    server: &Instance,
    token: &str,
    trace_path: &Path,
) -> Result<Observation, CheckError> {
    let before = std::fs::read_to_string(trace_path)
        .map_err(|e| CheckError::io(trace_path, e))?
        .lines()
        .count();
    let answer = probe::send(server.address, &case.request, case.present, token).await;
    let index = TraceIndex::read(trace_path)?;
    let new: Vec<&TraceLine> = index.lines.iter().filter(|l| l.line > before).collect();
    let text = |line: &TraceLine, key: &str| {
        line.event
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let auth_lines = new
        .iter()
        .filter(|l| {
            text(l, "event").as_deref() == Some("auth")
                && text(l, "resource").as_deref() == Some(server.resource.as_str())
        })
        .map(|l| (*l).clone())
        .collect();
    let (ran_traced, stored) = match &case.request {
        Request::Call { tool, .. } => {
            let run = format!("check-auth-{}", server.name.as_str());
            let ran = new
                .iter()
                .find(|l| {
                    text(l, "event").as_deref() == Some("tool_call")
                        && text(l, "gen_ai.tool.name").as_deref() == Some(tool.as_str())
                        && text(l, "run_id").as_deref() == Some(run.as_str())
                        && text(l, "outcome").as_deref() == Some("ok")
                })
                .map(|l| l.line);
            let stored = if tool == "notes_create" {
                Some(
                    server
                        .notes_titled(&marker(&case.id))
                        .map_err(|e| CheckError::setup(SUITE, format!("the store: {e}")))?,
                )
            } else {
                None
            };
            (ran, stored)
        }
        Request::Initialize | Request::List { .. } => (None, None),
    };
    Ok(Observation {
        answer,
        auth_lines,
        ran_traced,
        stored,
    })
}

/// Per category: how many cases, and how many ended each way.
fn by_category(results: &[CaseResult]) -> Value {
    let mut out = serde_json::Map::new();
    for result in results {
        let entry = out
            .entry(result.category.clone())
            .or_insert_with(|| json!({"cases": 0}));
        if let Some(map) = entry.as_object_mut() {
            let bump = |map: &mut serde_json::Map<String, Value>, key: &str| {
                let n = map.get(key).and_then(Value::as_u64).unwrap_or(0);
                map.insert(key.into(), Value::from(n + 1));
            };
            bump(map, "cases");
            bump(map, result.verdict.as_str());
        }
    }
    Value::Object(out)
}

/// One row per source the tokens are looked for in, and the figures of the scan.
fn look_for_tokens(
    out_dir: &Path,
    tokens: &[(String, String)],
    case_files: &[String],
    results: &[CaseResult],
    started: Instant,
) -> Result<(Vec<CaseResult>, Value), CheckError> {
    let texts: Vec<String> = tokens.iter().map(|(_, t)| t.clone()).collect();
    let scanner = Scanner::new(&texts).map_err(|e| CheckError::setup(SUITE, e))?;
    let read = |path: &Path| -> Result<String, CheckError> {
        let bytes = std::fs::read(path).map_err(|e| CheckError::io(path, e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    // The report as it stands before these rows (they hold no token text of their own).
    let so_far = SuiteReport::new(
        SUITE,
        case_files.to_vec(),
        vec![TRACE_FILE.into(), LOG_FILE.into()],
        results.to_vec(),
        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    );
    let rendered = serde_json::to_string_pretty(&so_far)
        .map_err(|e| CheckError::setup(SUITE, format!("cannot render the report: {e}")))?
        + "\n"
        + &so_far.table();
    let mut sources = vec![
        (
            "trace",
            TRACE_FILE.to_string(),
            read(&out_dir.join(TRACE_FILE))?,
        ),
        ("log", LOG_FILE.to_string(), read(&out_dir.join(LOG_FILE))?),
    ];
    for path in store_files(out_dir) {
        if path.exists() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            sources.push(("store", name, read(&path)?));
        }
    }
    sources.push(("report", REPORT_FILE.to_string(), rendered));
    let mut rows = Vec::new();
    let mut scanned = serde_json::Map::new();
    for (kind, file, text) in &sources {
        let lines = text.lines().count().max(1);
        scanned.insert(
            file.clone(),
            json!({"lines": text.lines().count(), "bytes": text.len()}),
        );
        let found = scanner.find(text);
        let id = format!("no-token-in-{}", file.replace('.', "-"));
        let row = match found.first() {
            Some(hit) => {
                let owner = tokens.get(hit.token).map_or("?", |(id, _)| id.as_str());
                CaseResult::new(
                    id,
                    "token-leak",
                    Expect::Block,
                    Observed::Passed,
                    Some(TraceLocation {
                        file: file.clone(),
                        line: hit.line,
                        rule: format!("token_in_{kind}"),
                        hops: vec![],
                    }),
                    format!(
                        "GOT THROUGH: {} of the token of case {owner} is in {file} line {} ({} of \
                         the {} tokens sent are in it)",
                        if hit.whole { "the whole" } else { "a part" },
                        hit.line,
                        found.len(),
                        tokens.len()
                    ),
                )
            }
            None => CaseResult::new(
                id,
                "token-leak",
                Expect::Block,
                Observed::Blocked,
                Some(TraceLocation {
                    file: file.clone(),
                    line: lines,
                    rule: "no_token_found".into(),
                    hops: vec![],
                }),
                format!(
                    "none of the {} tokens sent is in {file}, whole or as any {}-character run of \
                     its payload or signature ({} lines scanned)",
                    tokens.len(),
                    leaks::SUBSTANTIAL,
                    text.lines().count()
                ),
            ),
        };
        rows.push(row);
    }
    Ok((rows, Value::Object(scanned)))
}

fn unix_now() -> u64 {
    toolgate_core::clock::unix_secs(std::time::SystemTime::now())
}
