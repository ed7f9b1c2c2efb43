//! The SMTP relay sender against a loopback SMTP sink written here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{SlowTalker, SmtpSink};
use toolgate_core::trace::MemoryTrace;
use toolgate_egress::{
    AddressClass, AllowEntry, BlockReason, ConfigError, EgressConfig, EgressError, OutgoingEmail,
    Policy, SmtpConfig, SmtpRelay, SmtpSecurity, StaticResolver,
};

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
        .block_on(future)
}

fn policy(allow: Vec<AllowEntry>) -> Policy {
    EgressConfig {
        allow,
        ..EgressConfig::default()
    }
    .validate()
    .unwrap_or_else(|e| panic!("{e}"))
}

fn smtp_entry(host: &str, port: u16, allow_private: bool) -> AllowEntry {
    AllowEntry {
        host: host.into(),
        schemes: vec!["smtp".into()],
        ports: Some(vec![port]),
        allow_private,
    }
}

fn config(host: &str, port: u16) -> SmtpConfig {
    SmtpConfig {
        host: host.into(),
        port,
        security: SmtpSecurity::None,
        from: "Notes Assistant <assistant@example.org>".into(),
        timeout_secs: 10,
        hello_name: None,
    }
}

fn resolver() -> Arc<StaticResolver> {
    let lo: IpAddr = [127, 0, 0, 1].into();
    Arc::new(StaticResolver::new().with("relay.test", &[lo]))
}

/// A relay to `host:port`, the only entry on the allowlist.
fn relay_to(host: &str, port: u16, allow_private: bool, trace: Arc<MemoryTrace>) -> SmtpRelay {
    SmtpRelay::new(
        config(host, port),
        &policy(vec![smtp_entry(host, port, allow_private)]),
        resolver(),
        trace,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn email() -> OutgoingEmail {
    OutgoingEmail {
        to: vec!["Bob <bob@example.org>".into(), "carol@example.org".into()],
        subject: "Budget from the design meeting".into(),
        body: "We settled on 40k.\r\n.A line that starts with a dot.\r\nThanks".into(),
    }
}

#[test]
fn smtp_relay_delivers_to_the_local_sink() {
    let sink = SmtpSink::start();
    let port = sink.port();
    let trace = Arc::new(MemoryTrace::default());
    let relay = relay_to("127.0.0.1", port, true, trace.clone());

    let id = block_on(relay.send(&email())).unwrap_or_else(|e| panic!("{e}"));
    assert!(id.ends_with("@example.org>"), "{id}");
    drop(relay);

    let got = sink.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    let message = &got[0];
    assert!(message.mail_from.contains("<assistant@example.org>"));
    assert_eq!(message.rcpt_to.len(), 2);
    assert!(message.rcpt_to[0].contains("<bob@example.org>"));
    assert!(message.rcpt_to[1].contains("<carol@example.org>"));
    assert!(
        message
            .data
            .contains("Subject: Budget from the design meeting"),
        "{}",
        message.data
    );
    assert!(
        message.data.contains("We settled on 40k."),
        "{}",
        message.data
    );
    assert!(message.data.contains("\r\n.A line that starts with a dot."));
    assert!(message.data.contains(&format!("Message-ID: {id}")));

    let events = trace.of_kind("egress");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["scheme"], "smtp");
    assert_eq!(events[0]["decision"], "allowed");
    assert_eq!(events[0]["rule"], "allow[0]:127.0.0.1");
    assert_eq!(events[0]["message_id"], id.as_str());
    let shown = events[0].to_string();
    assert!(!shown.contains("40k"), "the body stays out of the trace");
}

#[test]
fn a_body_ending_in_a_line_break_arrives_without_an_extra_blank_line() {
    let sink = SmtpSink::start();
    let port = sink.port();
    let relay = relay_to("127.0.0.1", port, true, Arc::new(MemoryTrace::default()));
    let bodies = ["Thanks", "Thanks\n", "Thanks\r\n", "Thanks\n\n"];
    for body in bodies {
        let mail = OutgoingEmail {
            body: body.into(),
            ..email()
        };
        block_on(relay.send(&mail)).unwrap_or_else(|e| panic!("{e}"));
    }
    drop(relay);
    let got = sink.received();
    let endings: Vec<bool> = got
        .iter()
        .map(|m| m.data.ends_with("\r\n\r\nThanks\r\n"))
        .collect();
    // (One line; one line; one line; a line and the blank line the writer put there.)
    assert_eq!(endings, [true, true, true, false], "{got:#?}");
    assert!(
        got[3].data.ends_with("\r\n\r\nThanks\r\n\r\n"),
        "{:?}",
        got[3].data
    );
}

#[test]
fn smtp_relay_not_on_the_allowlist_is_refused_at_load() {
    let trace = Arc::new(MemoryTrace::default());
    let cases = [
        // No entry at all.
        (policy(vec![]), "127.0.0.1", 2525),
        // An entry for http, not smtp.
        (
            policy(vec![AllowEntry {
                host: "127.0.0.1".into(),
                schemes: vec!["http".into()],
                ports: Some(vec![2525]),
                allow_private: true,
            }]),
            "127.0.0.1",
            2525,
        ),
        // The wrong port.
        (
            policy(vec![smtp_entry("relay.test", 587, true)]),
            "relay.test",
            2525,
        ),
        // A non-canonical spelling of a listed address.
        (
            policy(vec![smtp_entry("127.0.0.1", 2525, true)]),
            "0x7f.1",
            2525,
        ),
    ];
    for (policy, host, port) in cases {
        let result = SmtpRelay::new(config(host, port), &policy, resolver(), trace.clone());
        assert!(
            matches!(result, Err(ConfigError::RelayNotAllowed { .. })),
            "{host}:{port}: {result:?}"
        );
    }
}

#[test]
fn smtp_relay_resolving_to_loopback_without_allow_private_sends_nothing() {
    let sink = SmtpSink::start();
    let port = sink.port();
    let trace = Arc::new(MemoryTrace::default());
    let relay = relay_to("relay.test", port, false, trace.clone());
    let result = block_on(relay.send(&email()));
    assert_eq!(
        result,
        Err(EgressError::Blocked(BlockReason::ForbiddenAddress {
            addr: [127, 0, 0, 1].into(),
            class: AddressClass::Loopback
        }))
    );
    drop(relay);
    assert!(sink.received().is_empty());
    let events = trace.of_kind("egress");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["decision"], "blocked");
    assert_eq!(events[0]["rule"], "forbidden_address");
}

#[test]
fn bad_recipient_is_refused_before_connecting() {
    let sink = SmtpSink::start();
    let port = sink.port();
    let relay = relay_to("127.0.0.1", port, true, Arc::new(MemoryTrace::default()));
    let result = block_on(relay.send(&OutgoingEmail {
        to: vec!["bob@example.org\r\nRCPT TO:<mallory@evil.test>".into()],
        subject: "x".into(),
        body: "y".into(),
    }));
    let error = result.err().unwrap_or_else(|| panic!("sent"));
    assert_eq!(
        error.to_tool_error().code,
        toolgate_core::ErrorCode::InvalidArgument
    );
    drop(relay);
    assert!(sink.received().is_empty());
}

#[test]
fn smtp_relay_that_greets_one_byte_a_second_is_cut_at_the_deadline() {
    // Each byte comes well within any per-read timeout; only a deadline on the whole send
    // stops this relay. The greeting would take about 40 s.
    let talkers = [
        (
            "one byte a second",
            SlowTalker::start(
                b"220 slow.test ESMTP a greeting that never ends\r\n",
                Duration::from_secs(1),
            ),
        ),
        ("silent", SlowTalker::start(b"", Duration::from_secs(1))),
    ];
    for (label, talker) in &talkers {
        let port = talker.port();
        let trace = Arc::new(MemoryTrace::default());
        let mut settings = config("127.0.0.1", port);
        settings.timeout_secs = 2;
        let relay = SmtpRelay::new(
            settings,
            &policy(vec![smtp_entry("127.0.0.1", port, true)]),
            resolver(),
            trace.clone(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let result = block_on(relay.send(&email()));
        let took = started.elapsed();
        assert_eq!(
            result,
            Err(EgressError::Timeout {
                after: Duration::from_secs(2)
            }),
            "{label}"
        );
        assert!(took < Duration::from_secs(4), "{label}: {took:?}");
        assert_eq!(talker.connections(), 1, "{label}");
        let events = trace.of_kind("egress");
        assert_eq!(events.len(), 1, "{label}");
        assert_eq!(events[0]["decision"], "blocked", "{label}");
        assert_eq!(events[0]["rule"], "timeout", "{label}");
        assert_eq!(
            error_code(&result),
            Some(toolgate_core::ErrorCode::DeadlineExceeded),
            "{label}"
        );
    }
}

fn error_code(result: &Result<String, EgressError>) -> Option<toolgate_core::ErrorCode> {
    result.as_ref().err().map(|e| e.to_tool_error().code)
}

#[test]
fn line_breaks_in_a_subject_or_name_inject_no_header_or_recipient() {
    let sink = SmtpSink::start();
    let port = sink.port();
    let relay = relay_to("127.0.0.1", port, true, Arc::new(MemoryTrace::default()));
    let subjects = [
        "Budget\r\nBcc: mallory@evil.test",
        "Budget\nBcc: mallory@evil.test",
        "Budget\rBcc: mallory@evil.test",
        "Budget\r\n\r\nInjected body",
        "Budget\0\r\nX-Injected: 1",
    ];
    for subject in subjects {
        let mail = OutgoingEmail {
            subject: subject.into(),
            to: vec!["bob@example.org".into()],
            body: "the body".into(),
        };
        block_on(relay.send(&mail)).unwrap_or_else(|e| panic!("{subject:?}: {e}"));
    }
    // A display name with a line break is refused as a bad address, before connecting.
    let named = OutgoingEmail {
        to: vec!["Bob\r\nBcc: mallory@evil.test <bob@example.org>".into()],
        ..email()
    };
    let refused = block_on(relay.send(&named));
    drop(relay);
    let got = sink.received();
    assert_eq!(got.len(), subjects.len(), "{got:#?}");
    for (message, subject) in got.iter().zip(subjects) {
        assert_eq!(message.rcpt_to.len(), 1, "{subject:?}");
        let head = message.data.split("\r\n\r\n").next().unwrap_or_default();
        for line in head.split("\r\n") {
            let lower = line.to_ascii_lowercase();
            assert!(
                !lower.starts_with("bcc:") && !lower.starts_with("x-injected"),
                "{subject:?} injected a header: {:?}",
                message.data
            );
        }
        assert!(
            message.data.ends_with("\r\n\r\nthe body\r\n"),
            "{subject:?}: {:?}",
            message.data
        );
    }
    match refused {
        Ok(id) => panic!("sent {id} to a name with a line break"),
        Err(error) => assert_eq!(
            error.to_tool_error().code,
            toolgate_core::ErrorCode::InvalidArgument
        ),
    }
}
