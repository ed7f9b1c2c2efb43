//! The approval console of a team deployment, every part real: two `toolgate serve --http`
//! instances with `[serve.auth]` and `[console]` on one PostgreSQL store (a cluster of the
//! test's own), Debian's nginx in front of them round robin with no affinity (one worker, so
//! consecutive requests go to the instances in turn), oidc-provider with its login pages,
//! aiosmtpd as the relay, and Debian's chromium through the pinned playwright-core
//! (`tests/browser/steps.mjs`).
//!
//! An MCP client's `email_send` waits for the inbox; alice signs in through nginx (her
//! sign-in is started at one instance and its callback reaches the other), sees the ticket
//! and approves it while her requests alternate between the instances; the call returns its
//! receipt and the mail goes out once. The database holds her session only as a digest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[allow(clippy::duplicate_mod)]
#[path = "common/console.rs"]
mod console;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::mail_sink::MailSink;
use common::team::{count, nginx_at};
use console::{ConsoleConfig, McpSession, payload, reads, session_cookie, sign_in, walk};
use serde_json::{Value, json};
use toolgate_store::postgres::cluster::TempCluster;

/// A `toolgate serve --http` process, killed when dropped.
struct Instance {
    child: Child,
    address: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `toolgate --config CONFIG serve --http 127.0.0.1:0 --toolset notes --store URL` in `dir`,
/// once it says where it serves; what it printed if it stops first.
fn serve(dir: &Path, config: &Path, url: &str) -> Instance {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--config")
        .arg(config)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--toolset",
            "notes",
            "--store",
            url,
        ])
        .current_dir(dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    let address = loop {
        let Some(Ok(line)) = lines.next() else {
            panic!("the server stopped: {seen}");
        };
        seen.push_str(&line);
        seen.push('\n');
        if let Some(rest) = line.split(" at http://").nth(1) {
            break rest.split("/mcp").next().unwrap().to_string();
        }
    };
    // Keep reading stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Instance { child, address }
}

#[test]
fn an_approver_signs_in_and_approves_through_nginx_while_her_requests_alternate_instances() {
    let cluster = TempCluster::start().unwrap();
    let url = cluster.fresh_database().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sink = MailSink::start();
    // The address people and hosts use: nginx's.
    let front = format!("127.0.0.1:{}", console::free_port());
    let origin = format!("http://{front}");
    let auth = console::start_auth(&front, &[]);
    let config = ConsoleConfig {
        head: "",
        ports: format!("{}, {}", console::auth_port(&auth), sink.port()),
        smtp: sink.port(),
        issuer: auth.issuer(),
        resource: console::resource(&front),
        console: format!(
            r#"client_id = "public-client"
origin = "{origin}"
ticket_secs = 90
sign_in_scopes = ["approvals"]
[console.approvers]
subjects = ["alice"]
"#
        ),
    }
    .write(dir.path());
    let a = serve(dir.path(), &config, &url);
    let b = serve(dir.path(), &config, &url);
    let _nginx = nginx_at(&front, &[a.address.as_str(), b.address.as_str()]);

    // The MCP client, through nginx, drafts a mail and sends it: the send waits for the inbox.
    let token = console::client_token(&auth, "client-a", "secret-a", &console::resource(&front));
    let mut session = McpSession::open(&front, &token);
    let draft = session.call(
        "email_draft",
        json!({"to": "dana@example.org", "subject": "Booking", "body": "Room 4 on Tuesday."}),
    );
    assert_ne!(draft["isError"], json!(true), "{draft}");
    let draft_id = payload(&draft)["draft_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no draft_id in {draft}"));
    let waiting =
        std::thread::spawn(move || session.call("email_send", json!({"draft_id": draft_id})));

    // Every page load, redirect and form post goes through nginx to the next instance in turn:
    // the sign-in starts at one and its callback lands on the other, and the signed-in pages
    // and the decision are served by both.
    let mut steps = sign_in(&origin, "alice");
    steps.extend([
        json!({"reload_until": "a.ticket", "seconds": 30}),
        json!({"text": "#inbox tbody tr", "as": "inbox"}),
        json!({"goto": format!("{origin}/console")}),
        json!({"goto": format!("{origin}/console")}),
        json!({"click": "a.ticket"}),
        json!({"text": "#requester", "as": "requester"}),
        json!({"fill": "#decision-reason", "value": "booked with the organiser"}),
        json!({"click": "#approve"}),
        json!({"text": "#state", "as": "state"}),
        json!({"text": "#message", "as": "refusal"}),
    ]);
    let report = walk(&Value::from(steps));

    let inbox = reads(&report, "inbox");
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert!(inbox[0].contains("email_send"), "{inbox:?}");
    assert!(reads(&report, "requester")[0].contains("client-a"));
    let state = reads(&report, "state").join("");
    assert!(
        state.contains("approved by alice") && state.contains("booked with the organiser"),
        "{state}: {}",
        report["reads"]["refusal"]
    );
    let navigations = report["navigations"].as_array().unwrap();
    assert!(
        navigations.iter().all(|n| n["status"] != json!(421)
            && n["status"] != json!(400)
            && n["status"] != json!(401)),
        "no page was refused at either instance: {navigations:#?}"
    );

    // The waiting call completed with the receipt, and exactly one mail went out.
    let sent = waiting.join().unwrap();
    assert_ne!(sent["isError"], json!(true), "{sent}");
    assert_eq!(payload(&sent)["sent"], json!(true), "{sent}");
    assert_eq!(sink.received().len(), 1);

    // Her session is in the shared database as a digest of its id, never the id itself.
    let cookie = session_cookie(&report);
    let id = cookie["value"].as_str().unwrap();
    assert_eq!(
        count(
            &url,
            &format!(
                "SELECT count(*) FROM console_sessions WHERE id_hash = '{}'",
                toolgate_core::canonical::sha256_hex(id.as_bytes())
            )
        ),
        1
    );
    assert_eq!(
        count(
            &url,
            &format!(
                "SELECT count(*) FROM console_sessions WHERE id_hash = '{id}' OR csrf = '{id}'"
            )
        ),
        0,
        "the raw session id is stored nowhere"
    );
}
