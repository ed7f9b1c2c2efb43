//! The approval inbox end to end, every part real: `toolgate serve --http` on 127.0.0.1 behind
//! `[serve.auth]` with `[console]`, oidc-provider as the authorization server (its real
//! development login and consent pages), aiosmtpd as the mail relay, rmcp's MCP client over
//! Streamable HTTP (a 2025-11-25 session whose host cannot show elicitation forms), and Debian's
//! headless chromium driven by the pinned playwright-core (`tests/browser/steps.mjs`).
//!
//! - Approved: the client's `email_send` waits; alice signs in, sees the exact recipient and
//!   body and the taint warning, approves; exactly one mail reaches the relay and the waiting
//!   call returns the receipt. The hostile markup of the note the body came from is shown as
//!   text and nothing runs.
//! - Refused: a decision posted from another origin (by hand, and by a page on another port
//!   in the browser), one naming no origin, one without the CSRF token, one for a ticket
//!   already decided, one for a tampered ticket id, and eve, whose token holds `approvals` but
//!   not the approver scope `approvals:admin`, and who is not a named approver (403).
//! - Declined: nothing is sent and the client gets `approval_denied`. Expired: the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[allow(clippy::duplicate_mod)]
#[path = "common/console.rs"]
mod console;

use common::mail_sink::MailSink;
use common::team::exchange;
use console::{
    ConsoleConfig, HOSTILE, McpSession, ServeOptions, Server, payload, reads, session_cookie,
    sign_in, walk,
};
use serde_json::{Value, json};

const RECIPIENT: &str = "mallory@evil.example";

/// The server, its authorization server and mail relay, and the note the hostile text is in.
struct Deployment {
    server: Server,
    auth: console::oidc::AuthServer,
    sink: MailSink,
    note_id: i64,
    /// The MCP client's id and secret.
    requester: (String, String),
    _dir: tempfile::TempDir,
}

impl Deployment {
    /// The server's trace, one JSON object a line.
    fn trace(&self) -> Vec<Value> {
        std::fs::read_to_string(self._dir.path().join("trace.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The trace's line for the inbox's decision on `tool`.
    fn inbox_decision(&self, tool: &str) -> Value {
        self.trace()
            .into_iter()
            .find(|l| l["event"] == "approval_decision" && l["tool"] == tool)
            .unwrap_or_else(|| panic!("no approval_decision for {tool} in the trace"))
    }

    fn origin(&self) -> String {
        format!("http://{}", self.server.address)
    }

    fn resource(&self) -> String {
        format!("{}/mcp", self.origin())
    }

    /// Everything started, the console's tickets waiting `ticket_secs`; the MCP client is
    /// oidc-provider's built-in `client-a`.
    fn start(ticket_secs: u64) -> Deployment {
        Deployment::start_with(ticket_secs, None)
    }

    /// As [`Deployment::start`]; with `requester`, the MCP client is a confidential client of
    /// that id (its tokens' subject), and the console's client and it are the only clients.
    fn start_with(ticket_secs: u64, requester: Option<&str>) -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let sink = MailSink::start();
        let address = format!("127.0.0.1:{}", console::free_port());
        let callback = console::callback(&address);
        let clients = dir.path().join("clients.json");
        let mut extra = Vec::new();
        if let Some(requester) = requester {
            let scope = "notes:all approvals";
            let listed = json!([
                {"client_id": requester, "client_secret": format!("secret-{requester}"),
                 "grant_types": ["client_credentials"], "response_types": [], "redirect_uris": [],
                 "scope": scope},
                {"client_id": "public-client", "token_endpoint_auth_method": "none",
                 "grant_types": ["authorization_code"], "response_types": ["code"],
                 "redirect_uris": [callback], "scope": scope},
            ]);
            std::fs::write(&clients, listed.to_string()).unwrap();
            extra.push("--clients".to_string());
            extra.push(clients.display().to_string());
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let auth = console::start_auth(&address, &extra);
        let db = dir.path().join("notes.sqlite");
        let note_id = console::seed_hostile_note(&db, RECIPIENT);
        let config = ConsoleConfig {
            head: "[policy]\ntainted_high = \"ask\"\n\n",
            ports: format!("{}, {}", console::auth_port(&auth), sink.port()),
            smtp: sink.port(),
            issuer: auth.issuer(),
            resource: console::resource(&address),
            console: format!(
                r#"client_id = "public-client"
ticket_secs = {ticket_secs}
sign_in_scopes = ["approvals"]
[console.approvers]
scopes = ["approvals:admin"]
subjects = ["alice", "bob"]
"#
            ),
        }
        .write(dir.path());
        let server = console::serve(
            dir.path(),
            &config,
            &address,
            &db,
            &ServeOptions {
                trace: true,
                ..ServeOptions::default()
            },
        );
        assert!(
            server.announced.contains("/console"),
            "no console announced: {}",
            server.announced
        );
        Deployment {
            server,
            auth,
            sink,
            note_id,
            requester: requester.map_or(("client-a".into(), "secret-a".into()), |r| {
                (r.to_string(), format!("secret-{r}"))
            }),
            _dir: dir,
        }
    }

    /// A client-credentials token for the MCP client.
    fn requester_token(&self) -> String {
        console::client_token(
            &self.auth,
            &self.requester.0,
            &self.requester.1,
            &self.resource(),
        )
    }
}

/// Reads the hostile note (so the session has seen it), drafts the mail from it, and starts
/// `email_send` on a thread: it waits for the inbox.
fn send_waiting(deployment: &Deployment, subject: &str) -> std::thread::JoinHandle<Value> {
    let mut session = McpSession::open(&deployment.server.address, &deployment.requester_token());
    let note = session.call("notes_get", json!({"note_id": deployment.note_id}));
    assert_ne!(note["isError"], json!(true), "{note}");
    let draft = session.call(
        "email_draft",
        json!({"to": RECIPIENT, "subject": subject, "body": format!("As the note says: {HOSTILE}")}),
    );
    assert_ne!(draft["isError"], json!(true), "{draft}");
    let draft_id = payload(&draft)["draft_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no draft_id in {draft}"));
    std::thread::spawn(move || session.call("email_send", json!({"draft_id": draft_id})))
}

/// A decision posted by hand (not by the page), with the session `cookie`.
fn post_decision(
    address: &str,
    token: &str,
    cookie: &str,
    origin: Option<&str>,
    form: &str,
) -> u16 {
    let cookie = format!("toolgate_console={cookie}");
    let mut headers = vec![
        ("content-type", "application/x-www-form-urlencoded"),
        ("cookie", cookie.as_str()),
    ];
    if let Some(origin) = origin {
        headers.push(("origin", origin));
    }
    exchange(
        address,
        "POST",
        &format!("/console/tickets/{token}/decide"),
        &headers,
        form,
    )
    .unwrap()
    .status
}

#[test]
fn an_approver_signs_in_sees_the_exact_mail_and_its_taint_approves_once_and_forgeries_are_refused()
{
    let deployment = Deployment::start(90);
    let origin = deployment.origin();
    let waiting = send_waiting(&deployment, "Booking");

    let mut steps = sign_in(&origin, "alice");
    steps.extend([
        json!({"reload_until": "a.ticket", "seconds": 30}),
        json!({"text": "#inbox tbody tr", "as": "inbox"}),
        json!({"click": "a.ticket"}),
        json!({"eval": "location.pathname.split('/').pop()", "as": "token"}),
        json!({"text": "#preview pre", "as": "preview"}),
        json!({"text": "#taint li", "as": "taint"}),
        json!({"text": "#arguments", "as": "arguments"}),
        json!({"text": "#requester", "as": "requester"}),
        json!({"eval": "document.querySelector('input[name=csrf]').value", "as": "csrf"}),
        json!({"eval": "document.cookie", "as": "script_cookie"}),
        json!({"eval": "document.querySelector('input[name=binding]').value", "as": "binding"}),
        json!({"eval": "document.querySelector('label[for=decision-reason]').textContent", "as": "label"}),
        json!({"fill": "#decision-reason", "value": "recipient checked with the organiser"}),
        json!({"click": "#approve"}),
        json!({"text": "#state", "as": "state"}),
        json!({"text": "#message", "as": "refusal"}),
        json!({"eval": "window.pwned === undefined && document.querySelectorAll('main script, main img').length === 0", "as": "inert"}),
    ]);
    let report = walk(&Value::from(steps));

    // What the approver saw: the exact recipient and body, and where the recipient came from.
    let inbox = reads(&report, "inbox");
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert!(inbox[0].contains("email_send"), "{inbox:?}");
    assert!(inbox[0].contains("client-a"), "{inbox:?}");
    let preview = reads(&report, "preview").join("\n");
    assert!(preview.contains(RECIPIENT), "{preview}");
    assert!(
        preview.contains(&format!("As the note says: {HOSTILE}")),
        "the body, markup shown as text: {preview}"
    );
    let taint = reads(&report, "taint").join("\n");
    assert!(
        taint.contains(RECIPIENT) && taint.contains("not from you"),
        "the taint warning: {taint}"
    );
    assert!(reads(&report, "requester")[0].contains("client-a"));
    assert!(reads(&report, "arguments")[0].contains("draft_id"));
    assert!(
        report["evals"]["label"]
            .as_str()
            .unwrap()
            .contains("Reason")
    );
    let state = reads(&report, "state").join("");
    assert!(
        state.contains("approved by alice") && state.contains("recipient checked"),
        "{state}: {}",
        report["reads"]["refusal"]
    );
    // Nothing the ticket carried ran: no script, no handler, no dialog, no error.
    assert_eq!(report["evals"]["inert"], json!(true), "{report:#}");
    assert_eq!(report["dialogs"], json!([]));
    assert_eq!(report["page_errors"], json!([]));
    // The only request off this machine is the authorization server's development login page
    // asking for its font (aborted); the console's pages ask for nothing.
    assert!(
        report["blocked"].as_array().unwrap().iter().all(|u| u
            .as_str()
            .unwrap()
            .starts_with("https://fonts.googleapis.com/")),
        "{}",
        report["blocked"]
    );
    // The session cookie: not readable by script, never sent cross-site, on loopback http.
    let cookie = session_cookie(&report);
    assert_eq!(cookie["httpOnly"], json!(true));
    assert_eq!(cookie["sameSite"], json!("Strict"));
    assert_eq!(cookie["path"], json!("/console"));
    assert_eq!(cookie["secure"], json!(false), "plain http on loopback");
    assert_eq!(
        report["evals"]["script_cookie"],
        json!(""),
        "script sees no cookie"
    );
    assert!(
        !report["cookies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "toolgate_console_login"),
        "the sign-in's login cookie is cleared once it is done: {}",
        report["cookies"]
    );

    // The waiting call completed with the receipt, and exactly one mail went out.
    let sent = waiting.join().unwrap();
    assert_ne!(sent["isError"], json!(true), "{sent}");
    assert_eq!(payload(&sent)["sent"], json!(true), "{sent}");
    let mail = deployment.sink.received();
    assert_eq!(mail.len(), 1, "{mail:?}");
    // The trace says who approved the call, beside the dispatcher's record of it.
    let decided = deployment.inbox_decision("email_send");
    assert_eq!(decided["outcome"], json!("approved"), "{decided}");
    assert!(
        decided["decided_by"]
            .as_str()
            .unwrap()
            .contains("\"alice\""),
        "{decided}"
    );
    assert_eq!(
        decided["reason"],
        json!("recipient checked with the organiser")
    );
    assert_eq!(mail[0].rcpt_tos, vec![RECIPIENT.to_string()]);
    assert!(
        mail[0].body.contains("As the note says:"),
        "{:?}",
        mail[0].body
    );

    // Forgeries and replays with alice's real session: each refused, nothing recorded.
    let address = &deployment.server.address;
    let token = report["evals"]["token"].as_str().unwrap();
    let session = cookie["value"].as_str().unwrap();
    let csrf = report["evals"]["csrf"].as_str().unwrap();
    let binding = report["evals"]["binding"].as_str().unwrap();
    let form = format!("csrf={csrf}&binding={binding}&decision=approve&reason=");
    assert_eq!(
        post_decision(address, token, session, Some("http://127.0.0.1:1"), &form),
        403,
        "a decision posted from another origin"
    );
    assert_eq!(
        post_decision(address, token, session, None, &form),
        403,
        "a decision that names no origin"
    );
    assert_eq!(
        post_decision(
            address,
            token,
            session,
            Some(&origin),
            &format!("binding={binding}&decision=approve")
        ),
        403,
        "a decision without the CSRF token"
    );
    assert_eq!(
        post_decision(address, token, session, Some(&origin), &form),
        409,
        "a ticket already decided"
    );
    let mut tampered = token.to_string();
    let last = if tampered.ends_with('0') { "1" } else { "0" };
    tampered.replace_range(tampered.len() - 1.., last);
    assert_eq!(
        post_decision(address, &tampered, session, Some(&origin), &form),
        404,
        "a tampered ticket id"
    );
    assert_eq!(deployment.sink.received().len(), 1, "still one mail");

    // The approver console in a browser, posted from a page on another port of this host.
    let evil = EvilPage::serve(
        &format!("{origin}/console/tickets/{token}/decide"),
        csrf,
        binding,
    );
    let mut steps = sign_in(&origin, "alice");
    steps.extend([
        json!({"goto": evil.url()}),
        json!({"click": "#forge"}),
        json!({"text": "#message", "as": "message"}),
    ]);
    let forged = walk(&Value::from(steps));
    let last = forged["navigations"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["status"], json!(403), "{forged:#}");
    assert!(
        reads(&forged, "message")[0].contains("another site"),
        "{forged:#}"
    );

    // eve signs in with the `approvals` scope, not the approvers' `approvals:admin`: the inbox
    // is refused with 403.
    let mut steps = sign_in(&origin, "eve");
    steps.push(json!({"text": "#message", "as": "message"}));
    let eve = walk(&Value::from(steps));
    let last = eve["navigations"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["status"], json!(403), "{eve:#}");
    assert!(reads(&eve, "message")[0].contains("not an approver"));
    assert_eq!(deployment.sink.received().len(), 1, "still one mail");

    // Sign-out ends alice's session on the server: her cookie then decides nothing.
    let cookie_header = format!("toolgate_console={session}");
    let signed_out = exchange(
        address,
        "POST",
        "/console/signout",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("cookie", cookie_header.as_str()),
            ("origin", origin.as_str()),
        ],
        &format!("csrf={csrf}"),
    )
    .unwrap();
    assert_eq!(signed_out.status, 303, "{signed_out:?}");
    assert!(
        signed_out
            .header("set-cookie")
            .is_some_and(|c| c.contains("Max-Age=0")),
        "{signed_out:?}"
    );
    assert_eq!(
        post_decision(address, token, session, Some(&origin), &form),
        401,
        "a signed-out session"
    );
}

/// A page on another port of this host that posts a decision form to the console.
struct EvilPage {
    url: String,
}

impl EvilPage {
    fn serve(action: &str, csrf: &str, binding: &str) -> EvilPage {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/forge", listener.local_addr().unwrap());
        let html = format!(
            "<!doctype html><title>forge</title><form method=post action=\"{action}\">\
             <input type=hidden name=csrf value=\"{csrf}\"><input type=hidden name=binding \
             value=\"{binding}\"><button id=forge name=decision value=approve>Win</button></form>"
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 4096];
                let _ = std::io::Read::read(&mut stream, &mut buf);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = std::io::Write::write_all(&mut stream, answer.as_bytes());
            }
        });
        EvilPage { url }
    }

    fn url(&self) -> String {
        self.url.clone()
    }
}

#[test]
fn a_declined_call_sends_nothing_and_the_client_gets_approval_denied() {
    let deployment = Deployment::start(90);
    let origin = deployment.origin();
    let waiting = send_waiting(&deployment, "Declined booking");
    let mut steps = sign_in(&origin, "alice");
    steps.extend([
        json!({"reload_until": "a.ticket", "seconds": 30}),
        json!({"click": "a.ticket"}),
        json!({"fill": "#decision-reason", "value": "not from our organiser"}),
        json!({"click": "#decline"}),
        json!({"text": "#state", "as": "state"}),
    ]);
    let report = walk(&Value::from(steps));
    let state = reads(&report, "state").join("");
    assert!(state.contains("declined by alice"), "{state}");
    let answer = waiting.join().unwrap();
    assert_eq!(answer["isError"], json!(true), "{answer}");
    assert!(answer.to_string().contains("approval_denied"), "{answer}");
    assert!(
        answer.to_string().contains("not from our organiser"),
        "{answer}"
    );
    assert!(deployment.sink.received().is_empty(), "nothing was sent");
    let decided = deployment.inbox_decision("email_send");
    assert_eq!(decided["outcome"], json!("declined"), "{decided}");
    assert!(
        decided["decided_by"]
            .as_str()
            .unwrap()
            .contains("\"alice\""),
        "{decided}"
    );
}

/// Also: the console refuses a request for another host name, and its pages forbid script.
#[test]
fn a_ticket_nobody_decides_expires_as_a_decline() {
    let deployment = Deployment::start(2);
    let answer = send_waiting(&deployment, "Unanswered booking")
        .join()
        .unwrap();
    assert_eq!(answer["isError"], json!(true), "{answer}");
    assert!(answer.to_string().contains("approval_denied"), "{answer}");
    assert!(answer.to_string().contains("expired"), "{answer}");
    assert!(deployment.sink.received().is_empty(), "nothing was sent");
    let expired = deployment.inbox_decision("email_send");
    assert_eq!(expired["outcome"], json!("expired"), "{expired}");
    assert!(expired.get("decided_by").is_none(), "{expired}");

    // The console answers only for its own host name (a rebound DNS name reaches nothing), and
    // every page forbids script.
    let raw = |host: &str| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&deployment.server.address).unwrap();
        write!(
            stream,
            "GET /console HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let rebound = raw("rebinding.example:80");
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    let own = raw(&deployment.server.address);
    assert!(own.starts_with("HTTP/1.1 200"), "{own}");
    assert!(
        own.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'"),
        "{own}"
    );
}

/// The four-eyes rule in the browser: the MCP client here acts as `alice` (a confidential
/// client of that id: its tokens' subject is `alice`, as a person's would be), so when alice
/// signs in to the console, the call in the inbox is her own. Her approval is refused with 403
/// and nothing is sent; bob, another approver, then approves it and the mail goes out once.
#[test]
fn nobody_approves_their_own_call_and_another_approver_can() {
    let deployment = Deployment::start_with(90, Some("alice"));
    let origin = deployment.origin();
    let waiting = send_waiting(&deployment, "My own booking");
    let mut steps = sign_in(&origin, "alice");
    steps.extend([
        json!({"reload_until": "a.ticket", "seconds": 30}),
        json!({"text": "#inbox tbody tr", "as": "inbox"}),
        json!({"click": "a.ticket"}),
        json!({"click": "#approve"}),
        json!({"text": "#message", "as": "message"}),
    ]);
    let own = walk(&Value::from(steps));
    assert!(reads(&own, "inbox")[0].contains("alice"), "{own:#}");
    let last = own["navigations"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["status"], json!(403), "{own:#}");
    assert!(reads(&own, "message")[0].contains("four eyes"), "{own:#}");
    assert!(
        deployment.sink.received().is_empty(),
        "nothing sent on her own word"
    );

    let mut steps = sign_in(&origin, "bob");
    steps.extend([
        json!({"reload_until": "a.ticket", "seconds": 30}),
        json!({"click": "a.ticket"}),
        json!({"click": "#approve"}),
        json!({"text": "#state", "as": "state"}),
    ]);
    let bob = walk(&Value::from(steps));
    assert!(
        reads(&bob, "state")[0].contains("approved by bob"),
        "{bob:#}"
    );
    let sent = waiting.join().unwrap();
    assert_ne!(sent["isError"], json!(true), "{sent}");
    assert_eq!(deployment.sink.received().len(), 1);
}

/// A delete's preview names the note by its title and first line, both written by whoever
/// wrote the (clipped, untrusted) note: the ticket page shows the markup as text, nothing in it
/// runs (no script, no handler, no dialog, no console error, no request), and once approved
/// the note is gone.
#[test]
fn a_hostile_note_title_in_a_deletes_preview_is_shown_as_text_and_nothing_runs() {
    let deployment = Deployment::start(90);
    let origin = deployment.origin();
    let mut session = McpSession::open(&deployment.server.address, &deployment.requester_token());
    let note_id = deployment.note_id;
    let waiting =
        std::thread::spawn(move || session.call("notes_delete", json!({"note_id": note_id})));
    let mut steps = sign_in(&origin, "alice");
    steps.extend([
        json!({"reload_until": "a.ticket", "seconds": 30}),
        json!({"click": "a.ticket"}),
        json!({"text": "#preview pre", "as": "preview"}),
        json!({"html": "#preview", "as": "markup"}),
        json!({"eval": "window.pwned === undefined && document.querySelectorAll('main script, main img').length === 0", "as": "inert"}),
        json!({"click": "#approve"}),
        json!({"text": "#state", "as": "state"}),
    ]);
    let report = walk(&Value::from(steps));
    let preview = reads(&report, "preview").join("\n");
    assert!(
        preview.contains(&format!("Conference booking {HOSTILE}")),
        "the title as written: {preview}"
    );
    let markup = reads(&report, "markup").join("");
    assert!(
        markup.contains("&lt;script&gt;") && !markup.contains("<script"),
        "escaped in the page: {markup}"
    );
    assert_eq!(report["evals"]["inert"], json!(true), "{report:#}");
    assert_eq!(report["dialogs"], json!([]));
    assert_eq!(report["page_errors"], json!([]));
    let errors = console::console_errors(&report);
    assert!(errors.is_empty(), "console errors: {errors:?}");
    assert!(reads(&report, "state")[0].contains("approved by alice"));
    let deleted = waiting.join().unwrap();
    assert_ne!(deleted["isError"], json!(true), "{deleted}");
    assert!(
        deleted.to_string().contains(&note_id.to_string()),
        "{deleted}"
    );
}

/// A host that can show its user a form keeps today's path with `[console]` configured: a
/// 2026-07-28 call from a client declaring elicitation is answered `input_required` at once
/// (the question goes to the host), and no ticket waits in the inbox.
#[test]
fn a_host_that_can_ask_its_user_is_asked_and_nothing_waits_in_the_inbox() {
    let deployment = Deployment::start(90);
    let token = deployment.requester_token();
    let address = &deployment.server.address;
    let call = |tool: &str, args: Value| {
        let reply =
            common::team::modern_call_as(address, tool, &args, json!({}), json!({}), Some(&token))
                .unwrap();
        reply.message().unwrap()["result"].clone()
    };
    let draft = call(
        "email_draft",
        json!({"to": "ann@example.org", "subject": "Hello", "body": "Hi Ann"}),
    );
    let draft_id = payload(&draft)["draft_id"].as_i64().unwrap();
    let asked = call("email_send", json!({"draft_id": draft_id}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let mut steps = sign_in(&deployment.origin(), "alice");
    steps.push(json!({"text": "#empty", "as": "empty"}));
    let inbox = walk(&Value::from(steps));
    assert_eq!(
        reads(&inbox, "empty"),
        ["No call is waiting for a person."],
        "{inbox:#}"
    );
    assert!(deployment.sink.received().is_empty());
}
