//! Reaching the approval inbox from a host that opens URLs but shows no form, every part real:
//! `toolgate serve --http` on 127.0.0.1 behind `[serve.auth]` with `[console]`, oidc-provider
//! (its real login pages), aiosmtpd as the relay, Debian's chromium through the pinned
//! playwright-core (`tests/browser/steps.mjs`), and an HTTP server on 127.0.0.1 of this test's
//! own that receives the webhook.
//!
//! - 2025-11-25: rmcp's client declaring `elicitation: {url: {}}` gets `elicitation/create`
//!   with `mode: "url"` naming the ticket's page; alice opens that page in the browser and
//!   approves; the client hears `notifications/elicitation/complete` for the same elicitation,
//!   its call returns the receipt, the mail goes out once, and the decision record names alice
//!   as `decided_by`. The webhook arrives signed (the HMAC checks with the secret, a tampered
//!   body or signature does not), holds the ticket's link and no argument value; the notice
//!   mail reaches the approvers' address through the relay.
//! - 2026-07-28: a call from a client declaring only URL elicitation is answered
//!   `input_required` with a URL elicitation naming the page and `requestState` the ticket;
//!   the retry carrying it waits, alice approves, and the retry returns the receipt. The same
//!   ticket sent again with the host's own "approve" runs nothing.
//! - A host whose person will not open the page (`decline`) has its call denied at once, and
//!   nothing is left in the inbox for an approver to decide.
//! - A webhook to a port the egress allowlist does not list is never sent (a listener there
//!   hears nothing; the trace says `refused`), and the call still waits in the inbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[allow(clippy::duplicate_mod)]
#[path = "common/console.rs"]
mod console;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::mail_sink::MailSink;
use console::{ConsoleConfig, ServeOptions, Server, payload, walk};
use serde_json::{Value, json};
use toolgate_wiring::notify::{DEFAULT_TOLERANCE_SECS, SIGNATURE_HEADER, verify};

const SECRET: &str = "hook-secret-for-tests";
const RECIPIENT: &str = "ann@example.org";
const BODY_TEXT: &str = "The venue moved to Hall B; bring the signed contract.";

/// One request the webhook receiver heard.
#[derive(Debug, Clone)]
struct Heard {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Heard {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP server on 127.0.0.1 that answers 204 to every request and keeps what it heard.
struct HookReceiver {
    port: u16,
    heard: Arc<Mutex<Vec<Heard>>>,
}

impl HookReceiver {
    fn start() -> HookReceiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&heard);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut headers = Vec::new();
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                loop {
                    line.clear();
                    reader.read_line(&mut line).unwrap();
                    let trimmed = line.trim_end();
                    if trimmed.is_empty() {
                        break;
                    }
                    let (name, value) = trimmed.split_once(':').unwrap();
                    headers.push((name.trim().to_string(), value.trim().to_string()));
                }
                let length: usize = headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |(_, v)| v.parse().unwrap());
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                keep.lock().unwrap().push(Heard { headers, body });
                let _ = stream.write_all(
                    b"HTTP/1.1 204 No Content\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
                );
            }
        });
        HookReceiver { port, heard }
    }

    fn heard(&self) -> Vec<Heard> {
        self.heard.lock().unwrap().clone()
    }

    /// What it heard, once it heard something (within `seconds`).
    fn wait_for_one(&self, seconds: u64) -> Heard {
        let started = Instant::now();
        loop {
            if let Some(first) = self.heard().into_iter().next() {
                return first;
            }
            assert!(
                started.elapsed() < Duration::from_secs(seconds),
                "no webhook arrived"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Where the webhook goes: to a port the allowlist lists, or one it does not.
enum Hook {
    Allowed,
    Refused,
}

struct Deployment {
    server: Server,
    auth: console::oidc::AuthServer,
    sink: MailSink,
    hook: HookReceiver,
    dir: tempfile::TempDir,
}

impl Deployment {
    fn start(ticket_secs: u64, hook: Hook) -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let sink = MailSink::start();
        let receiver = HookReceiver::start();
        let address = format!("127.0.0.1:{}", console::free_port());
        let auth = console::start_auth(&address, &[]);
        let as_port = console::auth_port(&auth);
        let allowed_ports = match hook {
            Hook::Allowed => format!("{as_port}, {}, {}", sink.port(), receiver.port),
            Hook::Refused => format!("{as_port}, {}", sink.port()),
        };
        let db = dir.path().join("notes.sqlite");
        toolgate_notes::NotesStore::open_or_init_sample(&db).unwrap();
        let config = ConsoleConfig {
            head: "",
            ports: allowed_ports,
            smtp: sink.port(),
            issuer: auth.issuer(),
            resource: console::resource(&address),
            console: format!(
                r#"client_id = "public-client"
ticket_secs = {ticket_secs}
sign_in_scopes = ["approvals"]
webhook_url = "http://127.0.0.1:{hook_port}/hooks/toolgate"
webhook_secret_env = "TOOLGATE_TEST_HOOK_SECRET"
notify_email = ["approvers@example.org"]
[console.approvers]
subjects = ["alice"]
"#,
                hook_port = receiver.port,
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
                env: &[("TOOLGATE_TEST_HOOK_SECRET", SECRET)],
                ..ServeOptions::default()
            },
        );
        Deployment {
            server,
            auth,
            sink,
            hook: receiver,
            dir,
        }
    }

    fn origin(&self) -> String {
        format!("http://{}", self.server.address)
    }

    fn token(&self) -> String {
        console::client_token(
            &self.auth,
            "client-a",
            "secret-a",
            &format!("{}/mcp", self.origin()),
        )
    }

    fn trace(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("trace.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The dispatcher's decision record for the call of `tool` that ran (`outcome` ok).
    fn record_of(&self, tool: &str) -> Value {
        self.trace()
            .into_iter()
            .find(|l| l["gen_ai.tool.name"] == tool && l["outcome"] == "ok")
            .unwrap_or_else(|| panic!("no decision record of {tool} that ran"))
    }

    /// The tools of the records `toolgate audit search --json` with `filters` finds in the
    /// server's audit file (run from a folder of its own: the server's config stays out).
    fn audit_search(&self, filters: &[&str]) -> Vec<String> {
        let elsewhere = tempfile::tempdir().unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["audit", "search", "--json"])
            .args(filters)
            .arg("--audit-db")
            .arg(self.dir.path().join("audit.sqlite"))
            .current_dir(elsewhere.path())
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("HOME", elsewhere.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let found: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        found["entries"]
            .as_array()
            .unwrap_or_else(|| panic!("no entries in {found}"))
            .iter()
            .map(|entry| entry["tool"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The notices about tickets, once `count` arrived (within 30 s).
    fn notices(&self, count: usize) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let notices: Vec<Value> = self
                .trace()
                .into_iter()
                .filter(|l| l["event"] == "approval_notification")
                .collect();
            if notices.len() >= count {
                return notices;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{notices:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// alice signs in, opens `page` (the link the host was given) and approves; what the page
/// then says of the ticket.
fn approve_at(origin: &str, page: &str) -> String {
    let steps = json!([
        {"goto": format!("{origin}/console")},
        {"click": "#sign-in"},
        {"login": "alice"},
        {"goto": page},
        {"text": "#requester", "as": "requester"},
        {"click": "#approve"},
        {"text": "#state", "as": "state"},
    ]);
    let report = walk(&steps);
    report["reads"]["state"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("")
}

/// A host that opens URLs and shows no form: it accepts every URL elicitation (the person
/// consented to open it) and keeps what it was asked and told.
#[derive(Clone, Default)]
struct UrlHost {
    asked: Arc<Mutex<Vec<Value>>>,
    told: Arc<Mutex<Vec<Value>>>,
    /// Answer `decline` instead: the person would not open the page.
    declines: bool,
}

type Session = rmcp::service::RunningService<rmcp::RoleClient, UrlHost>;

/// rmcp's client over Streamable HTTP as `host`: a 2025-11-25 session with a bearer token.
fn open_session(address: &str, token: &str, host: &UrlHost) -> (tokio::runtime::Runtime, Session) {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = {
        let _inside = runtime.enter();
        let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"))
            .auth_header(token.to_string());
        runtime
            .block_on(
                host.clone()
                    .serve(StreamableHttpClientTransport::from_config(config)),
            )
            .unwrap()
    };
    (runtime, client)
}

impl rmcp::ClientHandler for UrlHost {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities: rmcp::model::ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {"url": {}}})).unwrap();
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("url-only-host", "1.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        Ok(rmcp::model::ElicitResult::new(if self.declines {
            rmcp::model::ElicitationAction::Decline
        } else {
            rmcp::model::ElicitationAction::Accept
        }))
    }

    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.told.lock().unwrap().push(json!({
            "method": notification.method,
            "params": notification.params,
        }));
    }
}

fn draft(address: &str, token: &str) -> i64 {
    draft_about(address, token, "Venue")
}

/// A new draft with `subject` (the same arguments would replay the earlier draft).
fn draft_about(address: &str, token: &str, subject: &str) -> i64 {
    let reply = common::team::modern_call_as(
        address,
        "email_draft",
        &json!({"to": RECIPIENT, "subject": subject, "body": BODY_TEXT}),
        json!({}),
        json!({}),
        Some(token),
    )
    .unwrap();
    let result = reply.message().unwrap()["result"].clone();
    payload(&result)["draft_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no draft_id in {result}"))
}

/// The webhook as heard: signed with the secret over exactly its body, recent, naming the
/// ticket's page, and holding no value of the call's arguments or preview.
fn check_webhook(heard: &Heard, page: &str) {
    let signature = heard
        .header(SIGNATURE_HEADER)
        .unwrap_or_else(|| panic!("unsigned: {heard:?}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    verify(
        SECRET.as_bytes(),
        signature,
        &heard.body,
        now,
        DEFAULT_TOLERANCE_SECS,
    )
    .unwrap();
    // Tampering is detectable: another body, another signature, another secret.
    let mut body = heard.body.clone();
    body.extend_from_slice(b" ");
    assert!(
        verify(
            SECRET.as_bytes(),
            signature,
            &body,
            now,
            DEFAULT_TOLERANCE_SECS
        )
        .is_err()
    );
    let forged = signature.replace("v1=", "v1=00");
    assert!(
        verify(
            SECRET.as_bytes(),
            &forged,
            &heard.body,
            now,
            DEFAULT_TOLERANCE_SECS
        )
        .is_err()
    );
    assert!(
        verify(
            b"guess",
            signature,
            &heard.body,
            now,
            DEFAULT_TOLERANCE_SECS
        )
        .is_err()
    );
    let notice: Value = serde_json::from_slice(&heard.body).unwrap();
    assert_eq!(notice["event"], "approval_ticket_opened", "{notice}");
    assert_eq!(notice["ticket"]["tool"], "email_send", "{notice}");
    assert_eq!(notice["ticket"]["link"], page, "{notice}");
    // The requesting client, from its token's client_id.
    assert_eq!(
        notice["ticket"]["client"], "OAuth client client-a",
        "{notice}"
    );
    let text = String::from_utf8_lossy(&heard.body);
    for secret_of_the_call in [RECIPIENT, BODY_TEXT, "draft_id", "Venue", SECRET] {
        assert!(
            !text.contains(secret_of_the_call),
            "{secret_of_the_call} in {text}"
        );
    }
}

#[test]
fn a_host_that_opens_urls_is_sent_to_the_ticket_page_and_told_when_it_is_decided() {
    let deployment = Deployment::start(90, Hook::Allowed);
    let token = deployment.token();
    let address = deployment.server.address.clone();
    let draft_id = draft(&address, &token);

    // rmcp's client over Streamable HTTP, a 2025-11-25 session declaring only URL elicitation.
    let host = UrlHost::default();
    let (runtime, client) = open_session(&address, &token, &host);
    let peer = client.peer().clone();
    let handle = runtime.handle().clone();
    let waiting = std::thread::spawn(move || {
        let params = rmcp::model::CallToolRequestParams::new("email_send")
            .with_arguments(json!({"draft_id": draft_id}).as_object().cloned().unwrap());
        let result = handle.block_on(peer.call_tool(params)).unwrap();
        serde_json::to_value(result).unwrap()
    });

    // The host is asked to open the ticket's page, and told nothing of the call's arguments.
    let started = Instant::now();
    let asked = loop {
        if let Some(first) = host.asked.lock().unwrap().first().cloned() {
            break first;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "never asked");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(asked["mode"], "url", "{asked}");
    let page = asked["url"].as_str().unwrap().to_string();
    let id = asked["elicitationId"].as_str().unwrap().to_string();
    assert_eq!(
        page,
        format!("{}/console/tickets/{id}", deployment.origin()),
        "{asked}"
    );
    assert!(!asked.to_string().contains(RECIPIENT), "{asked}");
    assert!(
        host.told.lock().unwrap().is_empty(),
        "nothing completes before a person decides"
    );

    // The webhook and the notice mail say a ticket waits, and where.
    check_webhook(&deployment.hook.wait_for_one(30), &page);

    let state = approve_at(&deployment.origin(), &page);
    assert!(state.contains("approved by alice"), "{state}");
    let answer = waiting.join().unwrap();
    assert_ne!(answer["isError"], json!(true), "{answer}");
    assert_eq!(
        payload(&answer)["sent"],
        json!(true),
        "the receipt: {answer}"
    );

    // The host heard that the page's interaction is over, for the same elicitation.
    let started = Instant::now();
    let told = loop {
        if let Some(first) = host.told.lock().unwrap().first().cloned() {
            break first;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never told");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(told["method"], "notifications/elicitation/complete");
    assert_eq!(told["params"]["elicitationId"], json!(id), "{told}");

    // One mail to the recipient, one notice to the approvers (no argument in it).
    let mails = deployment.sink.received();
    let sent: Vec<_> = mails
        .iter()
        .filter(|m| m.rcpt_tos.contains(&RECIPIENT.to_string()))
        .collect();
    assert_eq!(sent.len(), 1, "{mails:?}");
    let notices: Vec<_> = mails
        .iter()
        .filter(|m| m.rcpt_tos.contains(&"approvers@example.org".to_string()))
        .collect();
    assert_eq!(notices.len(), 1, "{mails:?}");
    assert!(notices[0].body.contains(&page), "{}", notices[0].body);
    assert!(!notices[0].body.contains(BODY_TEXT), "{}", notices[0].body);

    // The audit's record names who approved; the notices were traced as sent.
    let record = deployment.record_of("email_send");
    assert!(
        record["decided_by"].as_str().unwrap().contains("\"alice\""),
        "{record}"
    );
    let notices = deployment.notices(2);
    assert!(
        notices.iter().all(|n| n["outcome"] == "sent"),
        "{notices:?}"
    );
    // The audit file finds the call by who approved it.
    let approver = json!([deployment.auth.issuer(), "alice"]).to_string();
    let started = Instant::now();
    loop {
        let found = deployment.audit_search(&["--decided-by", &approver]);
        if found.iter().any(|tool| tool == "email_send") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{found:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let nobody = json!([deployment.auth.issuer(), "bob"]).to_string();
    let none = deployment.audit_search(&["--decided-by", &nobody]);
    assert!(none.is_empty(), "{none:?}");
    drop(client);
}

#[test]
fn a_2026_client_that_opens_urls_gets_the_page_and_its_retry_completes_once_approved() {
    let deployment = Deployment::start(90, Hook::Allowed);
    let token = deployment.token();
    let address = deployment.server.address.clone();
    let draft_id = draft(&address, &token);
    let call = |draft_id: i64, extra: Value| url_only_send(&address, &token, draft_id, extra);
    let asked = call(draft_id, json!({}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = &asked["inputRequests"]["approval"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["mode"], "url", "{asked}");
    let page = question["params"]["url"].as_str().unwrap().to_string();
    let ticket = asked["requestState"].as_str().unwrap().to_string();
    assert_eq!(
        page,
        format!("{}/console/tickets/{ticket}", deployment.origin())
    );
    assert!(!asked.to_string().contains(RECIPIENT), "{asked}");
    check_webhook(&deployment.hook.wait_for_one(30), &page);

    // The host's own "approve" with the ticket is not a person's decision: the retry waits.
    let accepted = json!({"action": "accept", "content": {"approve": true}});
    let retry = json!({"requestState": ticket, "inputResponses": {"approval": accepted}});
    let retried = {
        let (address, token, retry) = (address.clone(), token.clone(), retry.clone());
        std::thread::spawn(move || url_only_send(&address, &token, draft_id, retry))
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(!retried.is_finished(), "the retry waits for a person");
    assert!(
        deployment
            .sink
            .received()
            .iter()
            .all(|m| !m.rcpt_tos.contains(&RECIPIENT.to_string()))
    );

    let state = approve_at(&deployment.origin(), &page);
    assert!(state.contains("approved by alice"), "{state}");
    let answer = retried.join().unwrap();
    assert_ne!(answer["isError"], json!(true), "{answer}");
    assert_eq!(
        payload(&answer)["sent"],
        json!(true),
        "the receipt: {answer}"
    );
    let record = deployment.record_of("email_send");
    assert!(
        record["decided_by"].as_str().unwrap().contains("\"alice\""),
        "{record}"
    );

    // The approved ticket approves no other call: another draft sent with it is refused.
    let other = draft_about(&address, &token, "Venue, again");
    assert_ne!(other, draft_id);
    let refused = call(other, retry);
    assert_eq!(refused["isError"], json!(true), "{refused}");
    assert!(refused.to_string().contains("approval_denied"), "{refused}");
    let sent = deployment
        .sink
        .received()
        .into_iter()
        .filter(|m| m.rcpt_tos.contains(&RECIPIENT.to_string()))
        .count();
    assert_eq!(sent, 1);
}

#[test]
fn a_2026_host_whose_person_declines_is_denied_at_once_and_nothing_waits() {
    let deployment = Deployment::start(90, Hook::Allowed);
    let token = deployment.token();
    let address = deployment.server.address.clone();
    let draft_id = draft(&address, &token);
    let asked = url_only_send(&address, &token, draft_id, json!({}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let ticket = asked["requestState"].as_str().unwrap().to_string();
    // The retry says the person would not open the page: denied now, not at the ticket's
    // expiry, and the ticket is spent.
    let declined = json!({"requestState": ticket,
        "inputResponses": {"approval": {"action": "decline"}}});
    let answer = url_only_send(&address, &token, draft_id, declined);
    assert_eq!(answer["isError"], json!(true), "{answer}");
    assert!(answer.to_string().contains("approval_denied"), "{answer}");
    assert!(
        answer
            .to_string()
            .contains("would not open the approval page (declined)"),
        "{answer}"
    );
    nothing_waits_and_nothing_was_sent(&deployment);
}

/// Alice's inbox shows no call waiting, and no mail reached the recipient.
fn nothing_waits_and_nothing_was_sent(deployment: &Deployment) {
    let steps = json!([
        {"goto": format!("{}/console", deployment.origin())},
        {"click": "#sign-in"},
        {"login": "alice"},
        {"text": "#empty", "as": "empty"},
    ]);
    let inbox = walk(&steps);
    assert_eq!(
        inbox["reads"]["empty"],
        json!(["No call is waiting for a person."]),
        "{inbox:#}"
    );
    assert!(
        deployment
            .sink
            .received()
            .iter()
            .all(|m| !m.rcpt_tos.contains(&RECIPIENT.to_string())),
        "nothing was sent"
    );
}

/// A 2026-07-28 `tools/call` of `email_send` for `draft_id` from a host declaring only URL
/// elicitation, with `extra` in its params; the result.
fn url_only_send(address: &str, token: &str, draft_id: i64, extra: Value) -> Value {
    let url_only = json!({
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "url-only-host", "version": "1"}
    });
    let reply = common::team::modern_call_as(
        address,
        "email_send",
        &json!({"draft_id": draft_id}),
        extra,
        url_only,
        Some(token),
    )
    .unwrap();
    reply.message().unwrap()["result"].clone()
}

#[test]
fn a_webhook_the_allowlist_refuses_is_never_sent_and_the_call_still_waits() {
    let deployment = Deployment::start(3, Hook::Refused);
    let token = deployment.token();
    let address = deployment.server.address.clone();
    let draft_id = draft(&address, &token);
    // A host that declares no elicitation: its call waits in the inbox until the ticket
    // expires (nobody decides), which declines it.
    let started = Instant::now();
    let reply = common::team::modern_call_as(
        &address,
        "email_send",
        &json!({"draft_id": draft_id}),
        json!({}),
        json!({"io.modelcontextprotocol/clientCapabilities": {}}),
        Some(&token),
    )
    .unwrap();
    let answer = reply.message().unwrap()["result"].clone();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the call waited for the inbox"
    );
    assert!(answer.to_string().contains("approval_denied"), "{answer}");
    assert!(answer.to_string().contains("expired"), "{answer}");
    let notices = deployment.notices(2);
    let webhook = notices.iter().find(|n| n["channel"] == "webhook").unwrap();
    assert_eq!(webhook["outcome"], "refused", "{webhook}");
    let port = format!("port {} is not allowed", deployment.hook.port);
    assert!(
        webhook["detail"].as_str().unwrap().contains(&port),
        "{webhook}"
    );
    let email = notices.iter().find(|n| n["channel"] == "email").unwrap();
    assert_eq!(email["outcome"], "sent", "{email}");
    assert!(
        deployment.hook.heard().is_empty(),
        "nothing reached the refused port"
    );
}

/// The person at the host will not open the page: the call is denied at once, nothing is sent,
/// and nothing is left waiting in the inbox for an approver to decide.
#[test]
fn a_host_whose_person_will_not_open_the_page_is_denied_and_nothing_waits() {
    let deployment = Deployment::start(90, Hook::Allowed);
    let token = deployment.token();
    let address = deployment.server.address.clone();
    let draft_id = draft(&address, &token);
    let host = UrlHost {
        declines: true,
        ..UrlHost::default()
    };
    let (runtime, client) = open_session(&address, &token, &host);
    let params = rmcp::model::CallToolRequestParams::new("email_send")
        .with_arguments(json!({"draft_id": draft_id}).as_object().cloned().unwrap());
    let answer =
        serde_json::to_value(runtime.block_on(client.peer().call_tool(params)).unwrap()).unwrap();
    assert_eq!(answer["isError"], json!(true), "{answer}");
    assert!(answer.to_string().contains("approval_denied"), "{answer}");
    assert!(
        answer
            .to_string()
            .contains("would not open the approval page"),
        "{answer}"
    );
    assert_eq!(host.asked.lock().unwrap().len(), 1);
    nothing_waits_and_nothing_was_sent(&deployment);
    drop(client);
}
