//! The egress suite: URLs that must be blocked and allowlisted ones that must pass, run against
//! the real egress exit ([`toolgate_egress::Egress`]) and real servers on 127.0.0.1.
//!
//! Contract:
//! - Cases come from `security/egress/*.toml` (compiled in) and any `--cases FILE`, in the
//!   format of [`cases`] (also in `security/egress/README.md`); ids are unique across files.
//! - The world is fixed ([`world`]): three exits (`main`, `tight`, `literal`) built from one
//!   allowlist, one resolver that answers for every test name, a plain HTTP server and an HTTPS
//!   server on 127.0.0.1 (presenting, for `*.badtls.test`, bad certificates made at run time by
//!   [`certs`]) and a trap on 127.0.0.2 ([`server`]). Nothing leaves loopback; the
//!   servers stop when the run ends.
//! - Cases run one at a time, each through one `Egress::get`, and every call writes exactly
//!   one `egress` line to `<out>/egress-trace.jsonl` (a call that wrote none or several is a
//!   case that could not be checked). A case's [`TraceLocation`] is that line: its file and
//!   line number, its `rule`, and its `hops`.
//! - What counts as blocked: a rule of the exit refused the call (the call returned a block and
//!   its trace line says `decision: blocked`). The body caps are rules too: an over-size body,
//!   a content type off the list, a declared content coding, a response framed two ways and a
//!   body still arriving when the time cap runs out all end the call with a block
//!   (`too_large`, `content_type_not_allowed`, `content_encoding_not_allowed`,
//!   `ambiguous_framing`, `timeout`) and no body reaches the caller; the trace line shows the cap and how many bytes had arrived. A call
//!   the rules let out that then failed (a refused connection, a 404) is NOT a block: for a
//!   must-block case it is a leak. For a block decided before sending, the servers must have
//!   seen exactly the hops before the refused one, or the case is not checked.
//! - A `pinned` case (DNS answers that change between check and connect) is blocked when the
//!   exit asked the resolver once, was served at the first answer, and never touched the trap
//!   (the later answer); its trace line is the allowed request, listing only the first answer.
//! - A case's expected `rule` or `hops`, when given, must match the trace line; a mismatch is a
//!   case that could not be checked (the suite fails), not a pass.
//! - Refuses (a [`CheckError`], no report): a malformed case file (named), a duplicate id, no
//!   cases, or local servers that could not start.

pub mod cases;
pub mod certs;
pub mod server;
pub mod world;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Value, json};
use toolgate_core::trace::{JsonlTrace, TraceEvent, TraceSink};
use toolgate_egress::Egress;
use toolgate_egress::canon::url_for_trace;

use crate::cases::{load_cases, unique_ids};
use crate::{
    CaseResult, CheckError, Expect, Observed, SuiteOptions, SuiteReport, TraceIndex, TraceLocation,
};
use cases::{CaseFile, ExitName, Expectation, Ports, Spec, expand, fill};
use server::{Servers, TlsIdentity, Via};
use world::WorldResolver;

/// The repository's own case files.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "security/egress/unlisted.toml",
        include_str!("../../../../security/egress/unlisted.toml"),
    ),
    (
        "security/egress/redirects.toml",
        include_str!("../../../../security/egress/redirects.toml"),
    ),
    (
        "security/egress/ip-literals.toml",
        include_str!("../../../../security/egress/ip-literals.toml"),
    ),
    (
        "security/egress/userinfo.toml",
        include_str!("../../../../security/egress/userinfo.toml"),
    ),
    (
        "security/egress/idn.toml",
        include_str!("../../../../security/egress/idn.toml"),
    ),
    (
        "security/egress/addresses.toml",
        include_str!("../../../../security/egress/addresses.toml"),
    ),
    (
        "security/egress/rebinding.toml",
        include_str!("../../../../security/egress/rebinding.toml"),
    ),
    (
        "security/egress/downgrade.toml",
        include_str!("../../../../security/egress/downgrade.toml"),
    ),
    (
        "security/egress/ports.toml",
        include_str!("../../../../security/egress/ports.toml"),
    ),
    (
        "security/egress/schemes.toml",
        include_str!("../../../../security/egress/schemes.toml"),
    ),
    (
        "security/egress/bodies.toml",
        include_str!("../../../../security/egress/bodies.toml"),
    ),
    (
        "security/egress/controls.toml",
        include_str!("../../../../security/egress/controls.toml"),
    ),
    (
        "security/egress/tls.toml",
        include_str!("../../../../security/egress/tls.toml"),
    ),
    (
        "security/egress/encodings.toml",
        include_str!("../../../../security/egress/encodings.toml"),
    ),
    (
        "security/egress/framing.toml",
        include_str!("../../../../security/egress/framing.toml"),
    ),
    (
        "security/egress/header-injection.toml",
        include_str!("../../../../security/egress/header-injection.toml"),
    ),
];

/// The trace file, inside the output folder.
pub const TRACE_FILE: &str = "egress-trace.jsonl";

const CA_DER: &[u8] = include_bytes!("tls/ca.der");
const LEAF_DER: &[u8] = include_bytes!("tls/leaf.der");
const LEAF_KEY_DER: &[u8] = include_bytes!("tls/leaf.key.der");

/// Writes to the trace file and counts the lines written (one per event).
struct CountingSink {
    file: JsonlTrace,
    written: AtomicUsize,
}

impl TraceSink for CountingSink {
    fn record(&self, event: Arc<dyn TraceEvent>) {
        self.file.record(event);
        self.written.fetch_add(1, Ordering::SeqCst);
    }
}

/// How one call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The body reached the caller.
    Fetched { final_url: String, bytes: u64 },
    /// The call failed; `block` when a rule of the exit stopped it.
    Failed {
        block: bool,
        rule: String,
        message: String,
    },
}

/// A case's trace line, as read back from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traced {
    pub file: String,
    pub line: usize,
    pub decision: String,
    pub rule: String,
    pub hops: Vec<String>,
    pub addresses: Vec<String>,
}

impl Traced {
    fn location(&self) -> TraceLocation {
        TraceLocation {
            file: self.file.clone(),
            line: self.line,
            rule: self.rule.clone(),
            hops: self.hops.clone(),
        }
    }
}

/// What the servers and the resolver saw during one case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Requests the 127.0.0.1 servers saw.
    pub served: usize,
    /// Connections the trap (127.0.0.2) accepted.
    pub trap: usize,
    /// Lookups of the `pinned` name.
    pub pinned_lookups: usize,
    /// The pinned name's first answer.
    pub first_answer: Vec<String>,
}

/// Rules that stop a response after it was requested; every other block is decided before the
/// refused hop is sent.
const RESPONSE_RULES: &[&str] = &[
    "too_large",
    "content_type_not_allowed",
    "timeout",
    "content_encoding_not_allowed",
    "ambiguous_framing",
];

/// The observation, trace location and detail of a case: a pure function of what it expected,
/// how the call ended, its trace line and what the servers saw.
pub fn judge_case(
    spec: &Spec,
    outcome: &Outcome,
    traced: Result<&Traced, &str>,
    evidence: &Evidence,
) -> (Observed, Option<TraceLocation>, String) {
    let error = |message: String, at: Option<TraceLocation>| {
        (
            Observed::Error {
                message: message.clone(),
            },
            at,
            message,
        )
    };
    let traced = match traced {
        Ok(traced) => traced,
        Err(why) => return error(why.to_string(), None),
    };
    let at = Some(traced.location());
    if let Some(want) = &spec.hops
        && *want != traced.hops
    {
        return error(
            format!(
                "the trace's hop chain is {:?}, the case expects {want:?}",
                traced.hops
            ),
            at,
        );
    }
    if let Outcome::Failed { rule, .. } = outcome
        && *rule != traced.rule
    {
        return error(
            format!(
                "the call ended with `{rule}` but its trace line says `{}`",
                traced.rule
            ),
            at,
        );
    }
    match (spec.expect, outcome) {
        (Expectation::Block, _) if spec.pinned.is_some() => {
            judge_pinned(spec, outcome, traced, evidence)
        }
        (Expectation::Block, Outcome::Fetched { final_url, bytes }) => (
            Observed::Passed,
            at,
            format!("fetched {final_url} ({bytes} bytes): the exit let it out"),
        ),
        (
            Expectation::Block,
            Outcome::Failed {
                block: false,
                rule,
                message,
            },
        ) => (
            Observed::Passed,
            at,
            format!("the exit's rules let it out; it then failed ({rule}): {message}"),
        ),
        (
            Expectation::Block,
            Outcome::Failed {
                block: true,
                rule,
                message,
            },
        ) => {
            if traced.decision != "blocked" {
                return error(
                    format!(
                        "the call was blocked ({rule}) but its trace line says `{}`",
                        traced.decision
                    ),
                    at,
                );
            }
            if let Some(want) = &spec.rule
                && want != rule
            {
                return error(
                    format!("blocked by `{rule}`, the case expects `{want}`: {message}"),
                    at,
                );
            }
            let sent = traced.hops.len().saturating_sub(1);
            if !RESPONSE_RULES.contains(&rule.as_str()) && evidence.served + evidence.trap != sent {
                return error(
                    format!(
                        "blocked by `{rule}` before the last of {} hops, yet the servers saw {} requests (expected {sent})",
                        traced.hops.len(),
                        evidence.served + evidence.trap
                    ),
                    at,
                );
            }
            (
                Observed::Blocked,
                at,
                format!("blocked by {rule}: {message}"),
            )
        }
        (Expectation::Allow, Outcome::Fetched { final_url, bytes }) => {
            if traced.decision != "allowed" {
                return error(
                    format!("fetched, but its trace line says `{}`", traced.decision),
                    at,
                );
            }
            (
                Observed::Passed,
                at,
                format!("fetched {final_url} ({bytes} bytes)"),
            )
        }
        (
            Expectation::Allow,
            Outcome::Failed {
                block: true,
                rule,
                message,
            },
        ) => (
            Observed::Blocked,
            at,
            format!("blocked by {rule}: {message}"),
        ),
        (
            Expectation::Allow,
            Outcome::Failed {
                block: false,
                rule,
                message,
            },
        ) => error(
            format!("the control could not be fetched ({rule}): {message}"),
            at,
        ),
    }
}

fn judge_pinned(
    spec: &Spec,
    outcome: &Outcome,
    traced: &Traced,
    evidence: &Evidence,
) -> (Observed, Option<TraceLocation>, String) {
    let at = Some(traced.location());
    let name = spec.pinned.as_deref().unwrap_or_default();
    match outcome {
        Outcome::Failed { rule, message, .. } => {
            let message = format!(
                "the request to `{name}` itself failed ({rule}: {message}), so the pinning could not be shown"
            );
            (
                Observed::Error {
                    message: message.clone(),
                },
                at,
                message,
            )
        }
        Outcome::Fetched { .. } if evidence.trap > 0 => (
            Observed::Passed,
            at,
            format!(
                "the trap (the later answer for `{name}`) was reached {} time(s)",
                evidence.trap
            ),
        ),
        Outcome::Fetched { .. } if evidence.pinned_lookups != 1 => (
            Observed::Passed,
            at,
            format!(
                "the exit looked `{name}` up {} times; it must ask once and connect to that answer",
                evidence.pinned_lookups
            ),
        ),
        Outcome::Fetched { .. }
            if traced.addresses != evidence.first_answer || evidence.served == 0 =>
        {
            (
                Observed::Passed,
                at,
                format!(
                    "the trace lists {:?} and the servers saw {} request(s); the checked answer was {:?}",
                    traced.addresses, evidence.served, evidence.first_answer
                ),
            )
        }
        Outcome::Fetched { .. } => (
            Observed::Blocked,
            at,
            format!(
                "asked for `{name}` once, connected to the checked {:?} only; the later answer was never reached",
                evidence.first_answer
            ),
        ),
    }
}

/// One case as run, before its trace line is read back.
struct Ran {
    spec: Spec,
    url: String,
    outcome: Outcome,
    /// 1-based number of the trace line the call wrote, or why there is none.
    line: Result<usize, String>,
    evidence: Evidence,
    asked: Vec<String>,
    seen: Vec<server::Seen>,
}

/// Runs the suite on the repository's case files and `options.extra_cases`; see the module doc.
pub async fn run(options: &SuiteOptions) -> Result<SuiteReport, CheckError> {
    run_with(BUILTIN, options).await
}

/// Runs the suite on `builtin` (as `(origin, text)` pairs) and `options.extra_cases`: the same
/// run as [`run`] with other built-in files (tests pass none, to run only their own files).
pub async fn run_with(
    builtin: &[(&str, &str)],
    options: &SuiteOptions,
) -> Result<SuiteReport, CheckError> {
    let started = Instant::now();
    let files = load_cases::<CaseFile>(builtin, &options.extra_cases)?;
    let specs = expand(&files)?;
    unique_ids(specs.iter().map(|s| (s.origin.as_str(), s.id.as_str())))?;
    let case_files: Vec<String> = files.iter().map(|f| f.origin.clone()).collect();

    std::fs::create_dir_all(&options.out_dir).map_err(|e| CheckError::io(&options.out_dir, e))?;
    let trace_path = options.out_dir.join(TRACE_FILE);
    if trace_path.exists() {
        std::fs::remove_file(&trace_path).map_err(|e| CheckError::io(&trace_path, e))?;
    }
    let sink = Arc::new(CountingSink {
        file: JsonlTrace::create(&trace_path).map_err(|e| CheckError::io(&trace_path, e))?,
        written: AtomicUsize::new(0),
    });

    let hostile = certs::make()
        .map_err(|e| CheckError::setup("egress", format!("test certificates: {e}")))?;
    let servers = Servers::start(
        TlsIdentity {
            cert_der: LEAF_DER.to_vec(),
            key_pkcs8_der: LEAF_KEY_DER.to_vec(),
        },
        hostile.by_name,
    )
    .await
    .map_err(|e| CheckError::setup("egress", format!("local servers: {e}")))?;
    let ports = Ports {
        http: servers.http.addr.port(),
        tls: servers.https.addr.port(),
    };
    let resolver = Arc::new(WorldResolver::new());
    let build = |exit: ExitName| {
        Egress::new(world::config(exit, ports), resolver.clone(), sink.clone())
            .and_then(|e| e.with_root_certificate(CA_DER))
            .and_then(|e| e.with_root_certificate(&hostile.ca_der))
            .map_err(|e| CheckError::setup("egress", format!("the {} exit: {e}", exit.as_str())))
    };
    let (main, tight, literal) = (
        build(ExitName::Main)?,
        build(ExitName::Tight)?,
        build(ExitName::Literal)?,
    );
    options.say(&format!(
        "egress: {} cases from {} files; servers on 127.0.0.1:{} (http), 127.0.0.1:{} (https), trap on {}:{}",
        specs.len(),
        case_files.len(),
        ports.http,
        ports.tls,
        server::TRAP_IP,
        ports.http
    ));

    let mut ran = Vec::with_capacity(specs.len());
    for spec in specs {
        let egress = match spec.exit {
            ExitName::Main => &main,
            ExitName::Tight => &tight,
            ExitName::Literal => &literal,
        };
        ran.push(run_one(spec, ports, egress, &servers, &resolver, &sink).await);
    }
    // The servers stop here, before the trace is read back.
    drop(servers);

    let index = TraceIndex::read(&trace_path)?;
    let mut results = Vec::with_capacity(ran.len());
    for case in &ran {
        let traced = case
            .line
            .clone()
            .and_then(|line| traced_at(&index, line, &case.url));
        let (observed, at, detail) = judge_case(
            &case.spec,
            &case.outcome,
            traced.as_ref().map_err(String::as_str),
            &case.evidence,
        );
        let expect = match case.spec.expect {
            Expectation::Block => Expect::Block,
            Expectation::Allow => Expect::Allow,
        };
        let facts = json!({
            "url": case.url,
            "exit": case.spec.exit.as_str(),
            "file": case.spec.origin,
            "note": case.spec.note,
            "decision": traced.as_ref().ok().map(|t| t.decision.clone()),
            "addresses": traced.as_ref().ok().map(|t| t.addresses.clone()),
            "servers_saw": case.seen,
            "resolver_asked": case.asked,
        });
        results.push(
            CaseResult::new(
                case.spec.id.clone(),
                case.spec.category.clone(),
                expect,
                observed,
                at,
                detail,
            )
            .with_facts(facts),
        );
    }
    let figures = figures(&results, index.lines.len());
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(SuiteReport::new(
        "egress",
        case_files,
        vec![TRACE_FILE.to_string()],
        results,
        duration_ms,
    )
    .with_figures(figures))
}

async fn run_one(
    spec: Spec,
    ports: Ports,
    egress: &Egress,
    servers: &Servers,
    resolver: &WorldResolver,
    sink: &CountingSink,
) -> Ran {
    let url = fill(&spec.url, ports);
    let spec = Spec {
        redirects: spec.redirects.iter().map(|r| fill(r, ports)).collect(),
        hops: spec
            .hops
            .as_ref()
            .map(|hops| hops.iter().map(|h| fill(h, ports)).collect()),
        ..spec
    };
    resolver.reset();
    servers.shared.set_script(spec.redirects.clone());
    let seen_before = servers.shared.seen_count();
    let lines_before = sink.written.load(Ordering::SeqCst);

    let result = egress.get(&url).await;

    servers.shared.set_script(Vec::new());
    let lines_after = sink.written.load(Ordering::SeqCst);
    let seen: Vec<server::Seen> = servers
        .shared
        .seen()
        .into_iter()
        .skip(seen_before)
        .collect();
    let asked = resolver.asked();
    let outcome = match result {
        Ok(page) => Outcome::Fetched {
            final_url: page.final_url,
            bytes: page.bytes,
        },
        Err(e) => Outcome::Failed {
            block: e.is_block(),
            rule: e.rule().to_string(),
            message: e.to_string(),
        },
    };
    let line = match lines_after - lines_before {
        1 => Ok(lines_after),
        0 => Err("the call wrote no trace line".to_string()),
        n => Err(format!("the call wrote {n} trace lines, not one")),
    };
    let first_answer = spec
        .pinned
        .as_deref()
        .and_then(|name| resolver.first_answer(name))
        .unwrap_or_default()
        .iter()
        .map(IpAddr::to_string)
        .collect();
    let evidence = Evidence {
        served: seen.iter().filter(|s| s.via != Via::Trap).count(),
        trap: seen.iter().filter(|s| s.via == Via::Trap).count(),
        pinned_lookups: spec
            .pinned
            .as_deref()
            .map(|name| asked.iter().filter(|a| a.as_str() == name).count())
            .unwrap_or(0),
        first_answer,
    };
    Ran {
        spec,
        url,
        outcome,
        line,
        evidence,
        asked,
        seen,
    }
}

/// The trace line numbered `line`, if it is the `egress` record of `url`.
fn traced_at(index: &TraceIndex, line: usize, url: &str) -> Result<Traced, String> {
    let event = index
        .lines
        .iter()
        .find(|l| l.line == line)
        .map(|l| &l.event)
        .ok_or_else(|| format!("{TRACE_FILE} has no line {line}"))?;
    let text = |key: &str| {
        event
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let list = |key: &str| -> Vec<String> {
        event
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    if text("event") != "egress" {
        return Err(format!("{TRACE_FILE}:{line} is not an egress record"));
    }
    let want = url_for_trace(url);
    if text("url") != want {
        return Err(format!(
            "{TRACE_FILE}:{line} records {:?}, not this case's {want:?}",
            text("url")
        ));
    }
    Ok(Traced {
        file: TRACE_FILE.to_string(),
        line,
        decision: text("decision"),
        rule: text("rule"),
        hops: list("hops"),
        addresses: list("addresses"),
    })
}

fn figures(results: &[CaseResult], trace_lines: usize) -> Value {
    let mut by_category: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut rules: BTreeMap<String, usize> = BTreeMap::new();
    for case in results {
        let row = by_category.entry(case.category.as_str()).or_default();
        *row.entry("cases").or_default() += 1;
        *row.entry(match case.expect {
            Expect::Allow => "must_pass",
            Expect::Block | Expect::Measure => "must_block",
        })
        .or_default() += 1;
        *row.entry(case.verdict.as_str()).or_default() += 1;
        if case.expect == Expect::Block
            && let Some(at) = &case.at
        {
            *rules.entry(at.rule.clone()).or_default() += 1;
        }
    }
    json!({
        "by_category": by_category,
        "block_rules": rules,
        "trace_lines": trace_lines,
        "exits": {
            "main": {"max_bytes": world::MAX_BYTES, "timeout_secs": world::TIMEOUT_SECS, "max_redirects": world::MAX_REDIRECTS},
            "tight": {"max_bytes": world::MAX_BYTES, "timeout_secs": world::TIGHT_TIMEOUT_SECS, "max_redirects": world::MAX_REDIRECTS},
            "literal": "main plus 127.0.0.1 (http, the plain server's port)",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(expect: Expectation) -> Spec {
        Spec {
            id: "c".into(),
            origin: "f.toml".into(),
            category: "x".into(),
            expect,
            url: "http://evil.test:1/".into(),
            exit: ExitName::Main,
            redirects: vec![],
            rule: None,
            hops: None,
            pinned: None,
            note: None,
        }
    }

    fn traced(decision: &str, rule: &str, hops: usize) -> Traced {
        Traced {
            file: TRACE_FILE.into(),
            line: 7,
            decision: decision.into(),
            rule: rule.into(),
            hops: (0..hops).map(|i| format!("http://h{i}.test/")).collect(),
            addresses: vec!["127.0.0.1".into()],
        }
    }

    fn blocked(rule: &str) -> Outcome {
        Outcome::Failed {
            block: true,
            rule: rule.into(),
            message: "m".into(),
        }
    }

    fn kind(o: &Observed) -> &'static str {
        match o {
            Observed::Blocked => "blocked",
            Observed::Passed => "passed",
            Observed::Error { .. } => "error",
        }
    }

    #[test]
    fn a_block_counts_only_with_a_matching_blocked_trace_line_and_no_traffic() {
        let fetched = Outcome::Fetched {
            final_url: "u".into(),
            bytes: 3,
        };
        let failed = Outcome::Failed {
            block: false,
            rule: "transport_failed".into(),
            message: "refused".into(),
        };
        let none = Evidence::default();
        let one_served = Evidence {
            served: 1,
            ..Evidence::default()
        };
        let with_rule = |rule: &str| Spec {
            rule: Some(rule.into()),
            ..spec(Expectation::Block)
        };
        let table: Vec<(&str, Spec, Outcome, Traced, Evidence, &str)> = vec![
            (
                "stopped",
                spec(Expectation::Block),
                blocked("unlisted_host"),
                traced("blocked", "unlisted_host", 1),
                none.clone(),
                "blocked",
            ),
            (
                "leak: fetched",
                spec(Expectation::Block),
                fetched.clone(),
                traced("allowed", "allow[0]:a", 1),
                one_served.clone(),
                "passed",
            ),
            (
                "leak: let out, then failed",
                spec(Expectation::Block),
                failed.clone(),
                traced("allowed", "transport_failed", 1),
                none.clone(),
                "passed",
            ),
            (
                "trace says allowed",
                spec(Expectation::Block),
                blocked("unlisted_host"),
                traced("allowed", "unlisted_host", 1),
                none.clone(),
                "error",
            ),
            (
                "trace names another rule",
                spec(Expectation::Block),
                blocked("unlisted_host"),
                traced("blocked", "userinfo", 1),
                none.clone(),
                "error",
            ),
            (
                "case expects another rule",
                with_rule("userinfo"),
                blocked("unlisted_host"),
                traced("blocked", "unlisted_host", 1),
                none.clone(),
                "error",
            ),
            (
                "refused hop was sent anyway",
                spec(Expectation::Block),
                blocked("unlisted_host"),
                traced("blocked", "unlisted_host", 1),
                one_served.clone(),
                "error",
            ),
            (
                "redirect: earlier hop sent",
                spec(Expectation::Block),
                blocked("unlisted_host"),
                traced("blocked", "unlisted_host", 2),
                one_served.clone(),
                "blocked",
            ),
            (
                "cap after the response",
                spec(Expectation::Block),
                blocked("too_large"),
                traced("blocked", "too_large", 1),
                one_served.clone(),
                "blocked",
            ),
            (
                "control passes",
                spec(Expectation::Allow),
                fetched.clone(),
                traced("allowed", "allow[0]:a", 1),
                one_served.clone(),
                "passed",
            ),
            (
                "control blocked",
                spec(Expectation::Allow),
                blocked("port_not_allowed"),
                traced("blocked", "port_not_allowed", 1),
                none.clone(),
                "blocked",
            ),
            (
                "control broken",
                spec(Expectation::Allow),
                failed,
                traced("allowed", "transport_failed", 1),
                none.clone(),
                "error",
            ),
        ];
        for (name, spec, outcome, traced, evidence, want) in table {
            let (observed, at, _) = judge_case(&spec, &outcome, Ok(&traced), &evidence);
            assert_eq!(kind(&observed), want, "{name}: {observed:?}");
            assert_eq!(at.map(|a| a.line), Some(7), "{name}");
        }
        let (observed, at, _) = judge_case(
            &spec(Expectation::Block),
            &blocked("x"),
            Err("no line"),
            &none,
        );
        assert_eq!(kind(&observed), "error");
        assert!(at.is_none());
    }

    #[test]
    fn an_unexpected_hop_chain_is_not_a_pass() {
        let want = Spec {
            hops: Some(vec!["http://h0.test/".into(), "http://other.test/".into()]),
            ..spec(Expectation::Block)
        };
        let (observed, _, detail) = judge_case(
            &want,
            &blocked("unlisted_host"),
            Ok(&traced("blocked", "unlisted_host", 2)),
            &Evidence {
                served: 1,
                ..Evidence::default()
            },
        );
        assert_eq!(kind(&observed), "error", "{detail}");
    }

    #[test]
    fn a_rebinding_is_stopped_only_if_asked_once_and_the_trap_is_untouched() {
        let pinned = Spec {
            pinned: Some("rebind.test".into()),
            ..spec(Expectation::Block)
        };
        let fetched = Outcome::Fetched {
            final_url: "u".into(),
            bytes: 1,
        };
        let good = Evidence {
            served: 1,
            trap: 0,
            pinned_lookups: 1,
            first_answer: vec!["127.0.0.1".into()],
        };
        let table = [
            (good.clone(), "blocked"),
            (
                Evidence {
                    trap: 1,
                    ..good.clone()
                },
                "passed",
            ),
            (
                Evidence {
                    pinned_lookups: 2,
                    ..good.clone()
                },
                "passed",
            ),
            (
                Evidence {
                    served: 0,
                    ..good.clone()
                },
                "passed",
            ),
            (
                Evidence {
                    first_answer: vec!["127.0.0.2".into()],
                    ..good.clone()
                },
                "passed",
            ),
        ];
        let line = traced("allowed", "allow[6]:rebind.test", 1);
        for (evidence, want) in table {
            let (observed, _, _) = judge_case(&pinned, &fetched, Ok(&line), &evidence);
            assert_eq!(kind(&observed), want, "{evidence:?}");
        }
        let (observed, _, _) = judge_case(
            &pinned,
            &blocked("forbidden_address"),
            Ok(&traced("blocked", "forbidden_address", 1)),
            &good,
        );
        assert_eq!(kind(&observed), "error");
    }
}
