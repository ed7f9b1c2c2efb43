//! The team deployment of issue 34, with every part real: three `toolgate serve --http`
//! instances on one PostgreSQL (a cluster of the test's own), Debian's nginx in front of them
//! (round robin, no affinity), and 32 clients over both protocol revisions for a bounded time,
//! each sending every write three times with one idempotency key, through nginx, while one
//! instance is killed with SIGKILL. Then the database is read: every write a client saw
//! acknowledged exists exactly once, no other write exists more than once, and reads found
//! what was acknowledged.
//!
//! 2025-11-25 sessions are recorded in the shared store: a request of a session that lands on
//! another instance is served there (rmcp restores the session from the store), including the
//! sessions of the killed instance, so no client has to initialise again (the design in
//! docs/a-teams-shared-store.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
// It loads `common/node.rs` too, for its own sake: the same finder twice, on purpose.
#[allow(clippy::duplicate_mod)]
#[path = "../../toolgate-mcp/tests/support/oidc.rs"]
mod oidc;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::team::{Reply, count, exchange, modern_call, modern_call_as, nginx, serve};
use common::{text, toolgate};
use serde_json::{Value, json};
use toolgate_store::postgres::cluster::TempCluster;

const AUTHORS: [&str; 4] = [
    "Suzanne Collins",
    "Rick Riordan",
    "Dan Brown",
    "Stephen King",
];
const LOAD: Duration = Duration::from_secs(8);
const KILL_AFTER: Duration = Duration::from_secs(3);
const CLIENTS: usize = 32;

/// A 2025-11-25 host: a session opened with `initialize`, opened again when an instance that
/// does not know it answers 404.
struct LegacyHost {
    address: String,
    session: Option<String>,
    /// Sessions it had to open again after a 404 (none while instances share sessions).
    reopened: usize,
}

impl LegacyHost {
    fn headers<'a>(&'a self, method: &'a str) -> Vec<(&'a str, &'a str)> {
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", method),
        ];
        if let Some(session) = &self.session {
            headers.push(("mcp-session-id", session.as_str()));
        }
        headers
    }

    fn initialize(&mut self) -> std::io::Result<()> {
        self.session = None;
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "legacy", "version": "0"}}})
        .to_string();
        let reply = exchange(
            &self.address,
            "POST",
            "/mcp",
            &self.headers("initialize"),
            &body,
        )?;
        let session = reply
            .header("mcp-session-id")
            .ok_or_else(|| std::io::Error::other(format!("no session: {reply:?}")))?;
        self.session = Some(session.to_string());
        let initialized =
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        exchange(
            &self.address,
            "POST",
            "/mcp",
            &self.headers("notifications/initialized"),
            &initialized,
        )?;
        Ok(())
    }

    fn call(&mut self, tool: &str, args: &Value, key: Option<&str>) -> std::io::Result<Reply> {
        if self.session.is_none() {
            self.initialize()?;
        }
        let meta = key.map_or(json!({}), |k| json!({"toolgate/idempotencyKey": k}));
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": meta}})
        .to_string();
        let reply = exchange(
            &self.address,
            "POST",
            "/mcp",
            &self.headers("tools/call"),
            &body,
        )?;
        if reply.status == 404 {
            // The session is unknown here: open one and let the caller resend.
            self.session = None;
            self.reopened += 1;
        }
        Ok(reply)
    }
}

/// One client's host, of either revision.
enum Host {
    Modern(String),
    Legacy(LegacyHost),
}

impl Host {
    fn call(&mut self, tool: &str, args: &Value, key: Option<&str>) -> std::io::Result<Reply> {
        match self {
            Host::Modern(address) => {
                let meta = key.map_or(json!({}), |k| json!({"toolgate/idempotencyKey": k}));
                modern_call(address, tool, args, json!({}), meta)
            }
            Host::Legacy(host) => host.call(tool, args, key),
        }
    }

    /// Sends until an answer comes back (a 502 from nginx, a dropped connection or a 404 of
    /// a session another instance opened are resent), at most 40 times; the tool result and
    /// how many sends were not answered.
    fn answered(&mut self, tool: &str, args: &Value, key: Option<&str>) -> (Option<Value>, usize) {
        for resent in 0..40 {
            if let Ok(reply) = self.call(tool, args, key)
                && reply.status == 200
                && let Some(message) = reply.message()
                && message.get("result").is_some()
            {
                return (Some(message["result"].clone()), resent);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (None, 40)
    }
}

#[derive(Default)]
struct Tally {
    /// tag → acknowledged (a result without error for at least one of its three sends).
    writes: BTreeMap<String, bool>,
    /// Reads of an acknowledged tag that did not find it.
    stale_reads: Vec<String>,
    answered: usize,
    /// Sends that got no answer (nginx's 502 for the killed instance, a session's 404).
    resent: usize,
    /// Sessions hosts had to open again (a 404 for a session the instance did not know).
    reopened: usize,
}

fn client(mut host: Host, index: usize, stop: Arc<AtomicBool>, tally: Arc<Mutex<Tally>>) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let tag = format!("c{index} w{n}");
        let key = format!("client-{index}-write-{n}");
        let args = json!({"author": AUTHORS[(index + n) % AUTHORS.len()], "limit": 1, "tag": tag});
        let mut acknowledged = false;
        for _ in 0..3 {
            let (result, resent) = host.answered("books_tag", &args, Some(&key));
            let mut tally = tally.lock().unwrap();
            tally.resent += resent;
            if let Some(result) = result {
                acknowledged |= result["isError"] == false;
                tally.answered += 1;
            }
        }
        if acknowledged {
            let (found, _) = host.answered("books_search", &json!({"has_tag": tag}), None);
            let seen = found.is_some_and(|r| r.to_string().contains("\\\"total_matches\\\":1"));
            if !seen {
                tally.lock().unwrap().stale_reads.push(tag.clone());
            }
        }
        tally.lock().unwrap().writes.insert(tag, acknowledged);
        n += 1;
    }
    if let Host::Legacy(legacy) = &host {
        tally.lock().unwrap().reopened += legacy.reopened;
    }
}

#[test]
fn three_instances_behind_nginx_write_once_through_a_killed_instance_on_both_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    let init = toolgate(&["books", "init", "--store", &url], dir.path());
    assert!(init.status.success(), "{}", text(&init.stderr));
    let mut instances: Vec<_> = (0..3).map(|_| serve(dir.path(), &url, None)).collect();
    let backends: Vec<&str> = instances.iter().map(|i| i.address.as_str()).collect();
    let balancer = nginx(&backends);

    // A 2025-11-25 session opened on one instance continues on another.
    let mut opened = LegacyHost {
        address: instances[0].address.clone(),
        session: None,
        reopened: 0,
    };
    opened.initialize().unwrap();
    let elsewhere = LegacyHost {
        address: instances[2].address.clone(),
        session: opened.session.clone(),
        reopened: 0,
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let continued = exchange(
        &elsewhere.address,
        "POST",
        "/mcp",
        &elsewhere.headers("tools/list"),
        &body,
    )
    .unwrap();
    assert_eq!(continued.status, 200, "{continued:?}");
    let listed = continued.message().unwrap();
    assert!(
        listed["result"]["tools"]
            .to_string()
            .contains("books_search"),
        "{listed}"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|index| {
            let host = if index % 4 == 0 {
                Host::Legacy(LegacyHost {
                    address: balancer.address.clone(),
                    session: None,
                    reopened: 0,
                })
            } else {
                Host::Modern(balancer.address.clone())
            };
            let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
            std::thread::spawn(move || client(host, index, stop, tally))
        })
        .collect();
    let started = Instant::now();
    std::thread::sleep(KILL_AFTER);
    instances[1].kill();
    std::thread::sleep(LOAD.saturating_sub(started.elapsed()));
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }

    let tally = tally.lock().unwrap();
    let acknowledged = tally.writes.values().filter(|a| **a).count();
    eprintln!(
        "{} writes by {CLIENTS} clients, {acknowledged} acknowledged, {} answers, {} sends resent",
        tally.writes.len(),
        tally.answered,
        tally.resent
    );
    // The load reached all three instances, the killed one included, before the kill.
    assert_eq!(
        count(&url, "SELECT count(DISTINCT instance) FROM decisions"),
        3
    );
    assert!(
        acknowledged >= CLIENTS,
        "every client got writes through: {acknowledged}"
    );
    // Sessions of the killed instance, and every session landing on an instance that did not
    // open it, continued: no host had to initialise again.
    assert_eq!(tally.reopened, 0, "sessions lost");
    assert!(
        tally.stale_reads.is_empty(),
        "reads missed acknowledged writes: {:?}",
        tally.stale_reads
    );
    for (tag, acked) in tally.writes.iter() {
        let present = count(
            &url,
            &format!("SELECT count(*) FROM books WHERE (',' || my_tags || ',') LIKE '%,{tag},%'"),
        );
        if *acked {
            assert_eq!(present, 1, "acknowledged {tag} exists once");
        } else {
            assert!(present <= 1, "{tag} exists at most once");
        }
    }
    // One receipt per effect, and no write the audit saw run twice.
    let effects = count(
        &url,
        "SELECT count(*) FROM tool_receipts WHERE tool = 'books_tag'",
    );
    assert!(
        effects >= acknowledged as i64 && effects <= tally.writes.len() as i64,
        "{effects}"
    );
    let most = count(
        &url,
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM decisions WHERE tool = 'books_tag' AND outcome = 'ok' AND NOT duplicate GROUP BY record->'arguments'->>'tag') runs",
    );
    assert!(most <= 1, "a write ran {most} times");
    drop(balancer);
    drop(instances);
}

/// Two users of one deployment behind `[serve.auth]` (tokens from a real oidc-provider): each
/// sends the same write with the same idempotency key three times through nginx, landing on
/// both instances. Each user's write takes effect once, and the two users' writes are two
/// effects: the effect identity holds the principal, whichever instance answers.
#[test]
fn two_users_through_nginx_each_write_once_and_the_same_write_is_two_effects() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    let init = toolgate(&["books", "init", "--store", &url], dir.path());
    assert!(init.status.success(), "{}", text(&init.stderr));
    let resource = "http://toolgate.team.test/mcp";
    let keys = oidc::TestKey::generate_many(&["k1"]);
    let auth = oidc::AuthServer::start(&[resource], &["books:all"], &keys, 300);
    let issuer = auth.issuer();
    let config = common::write_auth_config(dir.path(), &issuer, resource, "books:all", "books-v4");
    let instances: Vec<_> = (0..2)
        .map(|_| serve(dir.path(), &url, Some(&config)))
        .collect();
    let backends: Vec<&str> = instances.iter().map(|i| i.address.as_str()).collect();
    let balancer = nginx(&backends);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let alice = runtime.block_on(auth.token("client-a", "secret-a", resource, "books:all"));
    let bob = runtime.block_on(auth.token("client-b", "secret-b", resource, "books:all"));

    let address = balancer.address.clone();
    let (alice, bob) = (&alice, &bob);
    let outcomes = {
        let write = json!({"author": "Dan Brown", "limit": 1, "tag": "shared-by-two"});
        let meta = json!({"toolgate/idempotencyKey": "the-same-key"});
        let mut outcomes = Vec::new();
        for _ in 0..3 {
            for (who, token) in [("alice", alice), ("bob", bob)] {
                let reply = modern_call_as(
                    &address,
                    "books_tag",
                    &write,
                    json!({}),
                    meta.clone(),
                    Some(token),
                )
                .unwrap();
                outcomes.push((who, reply.status, reply.message()));
            }
        }
        // Without a token nothing is called.
        let anonymous =
            modern_call(&address, "books_tag", &write, json!({}), meta.clone()).unwrap();
        (outcomes, anonymous.status)
    };
    let (outcomes, anonymous) = outcomes;
    for (who, status, message) in &outcomes {
        assert_eq!(*status, 200, "{who}: {message:?}");
        let result = &message.as_ref().unwrap()["result"];
        assert_ne!(result["isError"], json!(true), "{who}: {result}");
    }
    assert_eq!(anonymous, 401);

    // alice's 2025-11-25 session, opened at one instance, continues at the other for her, and
    // only for her.
    let legacy = |address: &str, method: &str, token: &str, session: Option<&str>, body: &str| {
        let bearer = format!("Bearer {token}");
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", method),
            ("authorization", bearer.as_str()),
        ];
        if let Some(session) = session {
            headers.push(("mcp-session-id", session));
        }
        exchange(address, "POST", "/mcp", &headers, body).unwrap()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "alice", "version": "0"}}})
    .to_string();
    let opened = legacy(
        &instances[0].address,
        "initialize",
        alice,
        None,
        &initialize,
    );
    let session = opened.header("mcp-session-id").unwrap().to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    legacy(
        &instances[0].address,
        "notifications/initialized",
        alice,
        Some(&session),
        &initialized,
    );
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let hers = legacy(
        &instances[1].address,
        "tools/list",
        alice,
        Some(&session),
        &list,
    );
    assert_eq!(hers.status, 200, "{hers:?}");
    assert!(hers.body.contains("books_search"), "{hers:?}");
    let not_his = legacy(
        &instances[1].address,
        "tools/list",
        bob,
        Some(&session),
        &list,
    );
    assert_eq!(not_his.status, 404, "{not_his:?}");

    // Two effects (a receipt each), each user's two retries replayed, on both instances.
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM tool_receipts WHERE tool = 'books_tag'"
        ),
        2
    );
    assert_eq!(
        count(
            &url,
            "SELECT count(DISTINCT principal) FROM decisions WHERE tool = 'books_tag' AND outcome = 'ok' AND NOT duplicate"
        ),
        2
    );
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM decisions WHERE tool = 'books_tag' AND outcome = 'ok' AND NOT duplicate"
        ),
        2
    );
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM decisions WHERE tool = 'books_tag' AND duplicate"
        ),
        4
    );
    assert_eq!(
        count(&url, "SELECT count(DISTINCT instance) FROM decisions"),
        2,
        "round robin reached both instances"
    );
    drop(balancer);
    drop(instances);
}
