//! `toolgate serve`: one toolset, the tools imported from other MCP servers, or both, to MCP
//! hosts, through one dispatcher (the gateway: our risk levels, approvals asked through the
//! protocol, pins, untrusted results and one trace in front of third-party servers).
//!
//! With `[console]` (over HTTP, behind `[serve.auth]`), the web console is served under
//! `/console` on the same listener, and a call whose host cannot ask its user waits in the
//! console's approval inbox for an approver instead of being denied at once: a host that opens
//! URLs is sent to the ticket's page (URL elicitation, or a URL `input_required` on 2026-07-28),
//! and the notifications `[console]` names (a signed webhook, an email) say that it waits.

use std::sync::Arc;

use toolgate_core::ApprovalLedger;
use toolgate_core::Principal;
use toolgate_core::approval::{InboxApprover, TicketLinks, TicketNotifier};
use toolgate_core::health::HealthCheck;
use toolgate_core::trace::{JsonlTrace, NoTrace, TraceSink};
use toolgate_mcp::auth::{AUTH_CONTENT_TYPES, AuthConfig, ResourceServer};
use toolgate_mcp::http::{Access, Pages, serve_http_with_pages};
use toolgate_mcp::{HttpLimits, McpServer, ServeError, serve_stdio};
use toolgate_mcp_client::imports::Imports;
use toolgate_wiring::notify::{EmailNotice, Webhook};
use toolgate_wiring::shared::PgAudit;
use toolgate_wiring::{ExtraTools, Seat, SharedStore, Store};

use super::mcp::server_heading;
use super::{CommandError, open_store, server_runtime};
use crate::cli::ServeArgs;
use crate::config::{Config, NotifyConfig};

/// What to do about a refused non-loopback address.
const AUTH_REMEDY: &str = "configure [serve.auth] (or --auth-issuer), or pass --insecure-no-auth \
                           to serve without authorization";

/// The embedded model's context for servers' sampling: one short conversation each.
const SAMPLING_CTX: u32 = 8_192;

/// Our model, loaded only when a configured server may sample (`[mcp.servers.NAME] sampling =
/// "allow"`): `[model] name`, else the model the environment's keys select. Announced on
/// stderr, never on stdout (which may be the MCP stream).
fn sampler_if_allowed(
    config: &Config,
) -> Result<Option<Arc<dyn toolgate_mcp_client::server_requests::Sampler>>, CommandError> {
    if !toolgate_wiring::imports::sampling_allowed(&config.mcp) {
        return Ok(None);
    }
    let spec = super::ask::choose_model(config.model.name.as_deref())?;
    let model = super::ask::load_model(&spec, SAMPLING_CTX, true)?;
    eprintln!(
        "toolgate: servers allowed to sample run on {}",
        model.name()
    );
    Ok(Some(Arc::new(
        toolgate_wiring::sampling::ModelSampler::new(model),
    )))
}

/// `toolgate serve`, stage by stage: check the flags, open the trace and the imports, build the
/// server, serve it over stdio or HTTP until the host or a signal ends it, close the imports.
pub fn run(
    config: &Config,
    mcp_config: Option<&std::path::Path>,
    args: &ServeArgs,
) -> Result<(), CommandError> {
    let auth_config = check_flags(config, args)?;
    // Exports what it holds when the server stops (`[telemetry]`; `None`: off, at no cost).
    let exporting = config.telemetry()?;
    let telemetry = exporting
        .as_ref()
        .map(toolgate_telemetry::export::Exporting::telemetry)
        .unwrap_or_default();
    let trace = open_trace(args)?;
    let runtime = server_runtime()?;
    let shared = match config.shared_store_url(args.store.as_deref(), args.db.as_deref()) {
        Some(url) => Some(runtime.block_on(open_shared(&url, args))?),
        None => None,
    };
    // One ledger for every dispatcher this process builds and for the inbox: the shared
    // store's, else this process's own. A ticket outlives a rebuild of the dispatcher, and the
    // tickets waiting for a person are counted from one place.
    let ledger = match &shared {
        Some(shared) => Arc::clone(&shared.ledger),
        None => {
            Arc::new(ApprovalLedger::in_memory().map_err(|e| ServeError::Start(e.to_string()))?)
        }
    };
    if let Some(exporting) = &exporting {
        exporting.observe_open_tickets(Arc::clone(&ledger), runtime.handle().clone());
    }
    // With a shared store, forwarded writes are claimed there, so a retry at any instance
    // finds the claim, and each user's downstream tokens are kept there. Behind
    // [serve.auth], a server that asks for OAuth is called with each user's own token.
    let placement = toolgate_wiring::Placement {
        receipts: shared.as_ref().map(|s| s.mcp_receipts.clone()),
        vault: shared.as_ref().map(|s| s.token_vault.clone()),
        many_users: args.http.is_some() && auth_config.is_some(),
        sampler: sampler_if_allowed(config)?,
    };
    let imports = runtime.block_on(toolgate_wiring::open_imports_placed(
        &config.mcp,
        mcp_config,
        &config.exits(),
        Arc::clone(&trace),
        &placement,
    ))?;
    announce_imports(args, imports.as_ref())?;
    if let Some(imports) = &imports {
        imports.report_states_to(&telemetry);
    }
    // Every decision record also goes to the audit: the shared store's table, else the file.
    let shared_audit = shared.as_ref().map(|s| s.audit.clone());
    let store = (!args.no_toolset).then(|| (args.toolset.store(), args.db.as_deref()));
    let audit_file = || super::audit_file_of(config, args.audit_db.as_deref(), store);
    let (trace, audit) = super::with_audit(trace, shared_audit, audit_file, "serve")?;
    // The console's audit pages read what this server records into: a reader of the same
    // file or table, never a second writer.
    let audit_reader = match (&audit, &shared) {
        _ if config.console.is_none() => None,
        (_, Some(shared)) => Some(shared.audit_store.clone()),
        (toolgate_wiring::audit::AuditGuard::File(file), None) => {
            let reader = toolgate_wiring::audit::AuditStore::open_file(file.path())
                .map_err(|e| ServeError::Start(e.to_string()))?;
            // A write call's page shows its receipt, kept in the toolset's store file.
            match store {
                Some((kind, db)) => Some(reader.with_receipts_file(&config.store_path(kind, db)?)),
                None => Some(reader),
            }
        }
        (toolgate_wiring::audit::AuditGuard::Shared(_), None) => None,
    };
    // What /readyz reports: the shared database (required) and each imported server.
    let mut checks = imports
        .as_ref()
        .map(Imports::health_checks)
        .unwrap_or_default();
    if let Some(shared) = &shared {
        checks.push(Arc::clone(&shared.health));
    }
    let sessions = shared.as_ref().map(|s| s.mcp_sessions.clone());
    let inbox = inbox(
        config,
        args,
        auth_config.as_ref(),
        (shared.as_ref(), &ledger),
        &trace,
    )?
    .map(|inbox| Inbox {
        audit: audit_reader,
        ..inbox
    });
    let (server, served) = build_server(
        config,
        args,
        imports.as_ref(),
        (&trace, &telemetry),
        (shared, ledger),
        inbox.as_ref(),
    )?;
    let mut server = server.checking(checks);
    // With a shared store, a 2025-11-25 session continues at any instance (and after a
    // restart), and a call is checked against what its session was shown at every instance.
    if let Some(sessions) = sessions {
        server = server.shared_across_instances(sessions);
    }
    // Imported tools whose server is down and set to hide leave tools/list until it is back;
    // those quarantined or withdrawn when their server's catalogue changes leave it and are
    // refused with the reason.
    if let Some(imports) = &imports {
        server = server
            .hiding(imports.availability())
            .withholding(imports.withholding());
    }
    match args.http {
        None => {
            eprintln!("toolgate: serving {served} over stdio");
            runtime.block_on(serve_stdio(server))?;
        }
        Some(address) => runtime.block_on(serve_over_http(
            config,
            (args, address),
            auth_config.as_ref(),
            server,
            &served,
            trace,
            inbox,
        ))?,
    }
    if let Some(imports) = imports {
        runtime.block_on(imports.close());
    }
    if let Some(exporting) = exporting {
        // Spans a slow or absent collector could not take were dropped by design: the server
        // stopped as asked, so this is said, not failed on.
        let ended = exporting.shutdown();
        let (exported, dropped) = (exporting.spans_exported(), exporting.spans_dropped());
        if let Err(e) = ended {
            eprintln!("toolgate: telemetry: {e}");
        }
        if dropped > 0 {
            eprintln!(
                "toolgate: telemetry: {dropped} spans were dropped (the collector was slow, failing or not there), {exported} exported"
            );
        }
    }
    Ok(())
}

/// The authorization to serve with, once the flags agree with each other and with the
/// address. Checked before anything is opened, created or bound, so a refused address changes
/// nothing (the server checks its listener's address again).
fn check_flags(config: &Config, args: &ServeArgs) -> Result<Option<AuthConfig>, CommandError> {
    if args.http.is_none()
        && (args.max_body_bytes.is_some()
            || args.max_concurrent.is_some()
            || args.request_timeout.is_some()
            || args.insecure_no_auth
            || args.auth_issuer.is_some()
            || args.auth_resource.is_some()
            || !args.auth_scope.is_empty())
    {
        return Err(CommandError::Usage(
            "--max-body-bytes, --max-concurrent, --request-timeout, --insecure-no-auth and \
             --auth-* apply to --http only"
                .into(),
        ));
    }
    let auth_config = auth_config(config.serve.auth.as_ref(), args)?;
    if auth_config.is_some() && args.insecure_no_auth {
        return Err(CommandError::Usage(
            "--insecure-no-auth contradicts the configured authorization ([serve.auth] or \
             --auth-*): remove one"
                .into(),
        ));
    }
    if let Some(address) = args.http
        && auth_config.is_none()
        && !args.insecure_no_auth
        && let Some(refusal) = toolgate_mcp::http::non_loopback_refusal(address)
    {
        return Err(CommandError::Usage(format!("{refusal}; {AUTH_REMEDY}")));
    }
    Ok(auth_config)
}

/// The approval inbox the console decides in, with `[console]` over HTTP: the shared store's
/// tickets (any instance's console decides any instance's call), else this process's. Refused
/// without authorization: the console signs people in through the authorization server.
fn inbox(
    config: &Config,
    args: &ServeArgs,
    auth_config: Option<&AuthConfig>,
    (shared, ledger): (Option<&Shared>, &Arc<ApprovalLedger>),
    trace: &Arc<dyn TraceSink>,
) -> Result<Option<Inbox>, CommandError> {
    let Some(console) = &config.console else {
        return Ok(None);
    };
    let settings = &console.settings;
    let Some(auth) = auth_config.filter(|_| args.http.is_some()) else {
        return Err(CommandError::Usage(
            "[console] needs `serve --http` with [serve.auth]: people sign in to it through the \
             authorization server"
                .into(),
        ));
    };
    let ttl = settings
        .ticket_time()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let ledger = Arc::clone(ledger);
    // Who decided each call is recorded beside the dispatcher's record of it. The tickets'
    // pages are linked once the console's origin is known (after the listener is bound).
    let links = TicketLinks::new();
    let approver = InboxApprover::new(Arc::clone(&ledger), &auth.issuer, ttl)
        .with_trace(Arc::clone(trace))
        .with_notifiers(links.clone(), notifiers(config, &console.notify, trace)?);
    Ok(Some(Inbox {
        settings: settings.clone(),
        ledger,
        approver: Arc::new(approver),
        audit: None,
        links,
        // The shared database's pool (the one the MCP sessions use): the console's statements
        // are single autocommit statements and take no store's writer lock.
        sessions: shared.map(|s| s.mcp_sessions.clone()),
    }))
}

/// Who is told when a ticket is opened: the webhook (through the egress exit, signed with the
/// secret in the environment variable named) and the mail (through `[smtp]`).
fn notifiers(
    config: &Config,
    notify: &NotifyConfig,
    trace: &Arc<dyn TraceSink>,
) -> Result<Vec<Arc<dyn TicketNotifier>>, CommandError> {
    let mut notifiers: Vec<Arc<dyn TicketNotifier>> = Vec::new();
    if let Some(url) = &notify.webhook_url {
        let Some(variable) = &notify.webhook_secret_env else {
            return Err(CommandError::Usage(
                "[console] webhook_url needs webhook_secret_env: the environment variable that \
                 holds the secret its notices are signed with"
                    .into(),
            ));
        };
        let secret = std::env::var(variable).ok().filter(|s| !s.is_empty());
        let Some(secret) = secret else {
            return Err(CommandError::Usage(format!(
                "[console] webhook_secret_env names {variable}, which is not set in the \
                 environment: set it to the webhook's secret"
            )));
        };
        let egress = config
            .exits()
            .egress(Arc::clone(trace))
            .map_err(|e| ServeError::Start(format!("the [egress] allowlist is refused: {e}")))?;
        notifiers.push(Arc::new(Webhook::new(url, secret.as_bytes(), egress)));
    }
    if !notify.notify_email.is_empty() {
        let relay = config
            .exits()
            .build(Arc::clone(trace))?
            .relay
            .ok_or_else(|| {
                CommandError::Usage(
                    "[console] notify_email needs [smtp]: the relay the notices are mailed through"
                        .into(),
                )
            })?;
        notifiers.push(Arc::new(EmailNotice::new(
            notify.notify_email.clone(),
            relay,
        )));
    }
    Ok(notifiers)
}

/// The console's settings, its ledger, and the approver that waits on it.
struct Inbox {
    settings: toolgate_console::ConsoleSettings,
    ledger: Arc<ApprovalLedger>,
    approver: Arc<InboxApprover>,
    /// The audit the console's audit pages read.
    audit: Option<toolgate_wiring::audit::AuditStore>,
    /// Where its tickets' pages are (the console's origin, set once it is known).
    links: TicketLinks,
    /// With a shared store, where the console's sessions and sign-ins under way are kept, so
    /// any instance behind the load balancer serves a person signed in at another; else they
    /// stay in this process's memory.
    sessions: Option<toolgate_wiring::shared::SharedConnection>,
}

/// What an instance keeps in the shared database.
struct Shared {
    /// The toolset's store (none for `--no-toolset`).
    store: Option<Store>,
    ledger: Arc<ApprovalLedger>,
    audit: PgAudit,
    audit_store: toolgate_wiring::audit::AuditStore,
    health: Arc<dyn HealthCheck>,
    mcp_receipts: toolgate_wiring::shared::SharedConnection,
    token_vault: toolgate_wiring::shared::SharedConnection,
    mcp_sessions: toolgate_wiring::shared::SharedConnection,
}

/// The toolset's store in the shared database, the approval tickets every instance shares, the
/// audit table's writer for this instance, and the database as a health check.
async fn open_shared(url: &str, args: &ServeArgs) -> Result<Shared, CommandError> {
    let shared = SharedStore::connect(url).await?;
    let store = if args.no_toolset {
        None
    } else {
        Some(shared.store(args.toolset.store()).await?)
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let instance = format!("{}/{}", host.trim(), std::process::id());
    Ok(Shared {
        store,
        ledger: shared.ledger(),
        audit: shared.audit(instance),
        audit_store: shared.audit_store(),
        health: shared.health_check(),
        mcp_receipts: shared.mcp_receipts(),
        token_vault: shared.token_vault(),
        mcp_sessions: shared.mcp_sessions(),
    })
}

/// The trace `--trace` names, or none.
fn open_trace(args: &ServeArgs) -> Result<Arc<dyn TraceSink>, CommandError> {
    Ok(match &args.trace {
        Some(path) => Arc::new(JsonlTrace::create(path)?),
        None => Arc::new(NoTrace),
    })
}

/// Says which servers' tools are imported; refuses `--no-toolset` with nothing to import.
fn announce_imports(args: &ServeArgs, imports: Option<&Imports>) -> Result<(), CommandError> {
    if args.no_toolset && imports.is_none() {
        return Err(CommandError::Usage(
            "--no-toolset serves only imported tools, and no MCP servers are configured: pass \
             --mcp-config FILE or set [mcp] config"
                .into(),
        ));
    }
    if let Some(imports) = imports {
        for server in &imports.servers {
            eprintln!("toolgate: importing {}", server_heading(server));
        }
    }
    Ok(())
}

/// The MCP server over the toolset (with what it offers besides tools) and the imported tools,
/// or over the imported tools alone (`--no-toolset`), and what it serves, in words.
fn build_server(
    config: &Config,
    args: &ServeArgs,
    imports: Option<&Imports>,
    (trace, telemetry): (&Arc<dyn TraceSink>, &toolgate_core::telemetry::Telemetry),
    (shared, ledger): (Option<Shared>, Arc<ApprovalLedger>),
    inbox: Option<&Inbox>,
) -> Result<(McpServer, String), CommandError> {
    // The MCP server asks the host through the protocol, per call; a call whose host cannot
    // ask waits in the console's inbox when there is one, and is denied otherwise.
    let shared_store = shared.and_then(|shared| shared.store);
    let approver =
        inbox.map(|inbox| Arc::clone(&inbox.approver) as Arc<dyn toolgate_core::Approver>);
    let (mode, policy, trace_for_seats) = (
        config.mode.unwrap_or_default(),
        config.policy,
        Arc::clone(trace),
    );
    let receipt_signer = config.receipt_signer()?;
    // One set of counters for every dispatcher this process builds: a rebuild keeps counting.
    let budgets = config.budgets();
    // One gate likewise: a plan approved before a rebuild still opens its call.
    let phases = config.phases();
    let telemetry = telemetry.clone();
    // The same seat each time the dispatcher is built (again, when imported tools change).
    let make_seat = move || {
        let mut seat = Seat::new(Principal::local("local-user", &[]))
            .with_mode(mode)
            .with_taint_policy(policy)
            .with_trace(Arc::clone(&trace_for_seats))
            .with_telemetry(telemetry.clone())
            .with_receipt_signer(receipt_signer.clone())
            .with_ledger(Arc::clone(&ledger));
        if let Some(approver) = &approver {
            seat = seat.with_approver(Arc::clone(approver));
        }
        if let Some(budgets) = &budgets {
            seat = seat.with_budgets(Arc::clone(budgets));
        }
        if let Some(gate) = &phases {
            seat = seat.with_phases(Arc::clone(gate));
        }
        seat
    };
    let seat = make_seat();
    let extra = imports.map_or_else(ExtraTools::default, |i| {
        toolgate_wiring::extra_tools(i, false)
    });
    // One run per server process: a host's retried write (a new JSON-RPC id) replays its
    // receipt instead of running again.
    let transport = if args.http.is_some() { "http" } else { "stdio" };
    let run_id = format!("mcp-{transport}-{}-{}", std::process::id(), unix_now());
    if args.no_toolset {
        let assembled = toolgate_wiring::assemble(extra.tools, extra.withheld, seat)?;
        let mut server = McpServer::serving(
            &assembled.registry,
            assembled.caller,
            assembled.principal,
            &run_id,
        );
        // A tool pinned while it runs (`toolgate mcp accept`) is offered without a restart:
        // the dispatcher is built again over the imported tools offered now.
        if let Some(imports) = imports {
            let rebuild =
                move |tools: Vec<toolgate_core::Tool>,
                      withheld: std::collections::BTreeMap<String, String>| {
                    toolgate_wiring::assemble(tools, withheld, make_seat())
                        .map_err(|e| e.to_string())
                };
            server = server.admitting(imports.admitting(), Arc::new(rebuild));
        }
        return Ok((with_inbox(server, inbox), "the imported tools".to_string()));
    }
    let kind = args.toolset.store();
    let store = match shared_store {
        Some(store) => store,
        None => open_store(kind, &config.store_path(kind, args.db.as_deref())?)?,
    };
    let path = store.path().to_path_buf();
    let ready =
        toolgate_wiring::dispatcher_with(args.toolset, &store, &config.exits(), seat, extra)?;
    let imported = if imports.is_some() {
        " and the imported tools"
    } else {
        ""
    };
    let mut server = McpServer::new(ready, &run_id);
    // As above, beside the toolset: the toolset's tools over the same store, and the imported
    // tools offered now.
    if let Some(imports) = imports {
        let (toolset, exits, store) = (args.toolset, config.exits(), Arc::new(store));
        let rebuild =
            move |tools: Vec<toolgate_core::Tool>,
                  withheld: std::collections::BTreeMap<String, String>| {
                let extra = ExtraTools {
                    tools,
                    withheld,
                    ..ExtraTools::default()
                };
                toolgate_wiring::dispatcher_with(toolset, &store, &exits, make_seat(), extra)
                    .map_err(|e| e.to_string())
            };
        server = server.admitting(imports.admitting(), Arc::new(rebuild));
    }
    let server = with_inbox(server, inbox);
    Ok((
        server,
        format!("{} ({}){imported}", args.toolset, path.display()),
    ))
}

/// `server` sending calls whose host shows no form to the inbox, when there is one.
fn with_inbox(server: McpServer, inbox: Option<&Inbox>) -> McpServer {
    match inbox {
        Some(inbox) => server.with_inbox(Arc::clone(&inbox.approver)),
        None => server,
    }
}

/// Serves `server` over Streamable HTTP on `address` until SIGTERM or Ctrl-C, then drains.
async fn serve_over_http(
    config: &Config,
    (args, address): (&ServeArgs, std::net::SocketAddr),
    auth_config: Option<&AuthConfig>,
    server: McpServer,
    served: &str,
    trace: Arc<dyn TraceSink>,
    inbox: Option<Inbox>,
) -> Result<(), CommandError> {
    let access = access(config, args, auth_config, &server, Arc::clone(&trace)).await?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| ServeError::Start(format!("cannot listen on {address}: {e}")))?;
    let bound = listener.local_addr()?;
    let pages = match (inbox, &access, auth_config) {
        (Some(inbox), Access::OAuth(resource_server), Some(auth)) => {
            let egress = config
                .exits()
                .egress_answering(&AUTH_CONTENT_TYPES, trace)
                .map_err(|e| {
                    ServeError::Start(format!("the [egress] allowlist is refused: {e}"))
                })?;
            let console = toolgate_console::Console::new(
                inbox.settings,
                &format!("http://{bound}"),
                inbox.ledger,
                toolgate_console::Authority {
                    issuer: auth.issuer.clone(),
                    resource: auth.resource.clone(),
                    resource_server: Arc::clone(resource_server),
                    egress,
                },
            )
            .map_err(|e| CommandError::Usage(e.to_string()))?;
            let console = match inbox.audit {
                Some(audit) => console.with_audit(audit),
                None => console,
            };
            let console = match inbox.sessions {
                Some(sessions) => console.with_shared_sessions(sessions),
                None => console,
            };
            inbox.links.set_origin(console.origin());
            eprintln!(
                "toolgate: the console (approval inbox) is served under {}/console",
                console.origin()
            );
            Some(Arc::new(console) as Arc<dyn Pages>)
        }
        _ => None,
    };
    eprintln!(
        "toolgate: serving {served} at http://{bound}/mcp, {}",
        access_in_words(&access)
    );
    serve_http_with_pages(
        server,
        listener,
        http_limits(args),
        access,
        pages,
        toolgate_mcp::http::sigterm_or_ctrl_c(),
    )
    .await?;
    eprintln!("toolgate: stopped after draining in-flight requests");
    Ok(())
}

/// Who may reach the server: an OAuth resource server for `auth_config` (its keys fetched
/// through the `[egress]` exit), anyone (`--insecure-no-auth`), or this machine only.
async fn access(
    config: &Config,
    args: &ServeArgs,
    auth_config: Option<&AuthConfig>,
    server: &McpServer,
    trace: Arc<dyn TraceSink>,
) -> Result<Access, CommandError> {
    let Some(auth) = auth_config else {
        return Ok(if args.insecure_no_auth {
            Access::InsecureNoAuth
        } else {
            // Refused above when not loopback (and again by the server on its listener).
            Access::LoopbackOnly
        });
    };
    let egress = config
        .exits()
        .egress_answering(&AUTH_CONTENT_TYPES, Arc::clone(&trace))
        .map_err(|e| ServeError::Start(format!("the [egress] allowlist is refused: {e}")))?;
    let tools: Vec<String> = server.tools().iter().map(|t| t.name.to_string()).collect();
    let grants_name = if args.no_toolset {
        IMPORTED_GRANT.to_string()
    } else {
        args.toolset.to_string()
    };
    let resource_server = ResourceServer::start(auth, &grants_name, &tools, egress)
        .await
        .map_err(|e| ServeError::Start(e.to_string()))?
        .with_trace(trace);
    if auth.issuer.starts_with("http://") {
        // Only a loopback issuer passes `ResourceServer::start` over plain http; said once so
        // that nobody mistakes a test set-up for a real one.
        eprintln!(
            "toolgate: the authorization server {} is reached over plain http on this machine: \
             acceptable for tests only (any other http issuer or key set is refused)",
            auth.issuer
        );
    }
    Ok(Access::OAuth(Arc::new(resource_server)))
}

/// The HTTP limits, the defaults but for what the flags set.
fn http_limits(args: &ServeArgs) -> HttpLimits {
    let defaults = HttpLimits::default();
    HttpLimits {
        max_body_bytes: args.max_body_bytes.unwrap_or(defaults.max_body_bytes),
        max_concurrent: args
            .max_concurrent
            .map_or(defaults.max_concurrent, usize::from),
        request_time: args
            .request_timeout
            .map_or(defaults.request_time, std::time::Duration::from_secs),
        ..defaults
    }
}

/// Who may reach the server, as the start-up line says it.
fn access_in_words(access: &Access) -> String {
    match access {
        Access::LoopbackOnly => "loopback only: no authorization is configured, so other \
                                 machines cannot reach it"
            .to_string(),
        Access::InsecureNoAuth => "WITHOUT AUTHORIZATION (--insecure-no-auth): anyone who can \
                                   connect may call every tool"
            .to_string(),
        Access::OAuth(auth) => format!(
            "OAuth access tokens required (resource {}, metadata at {})",
            auth.resource(),
            auth.metadata_paths()[0]
        ),
    }
}

/// What an OAuth scope names to grant every tool of a gateway that serves no toolset.
const IMPORTED_GRANT: &str = "imported";

/// `[serve.auth]` with the `--auth-*` flags over it; `None` when neither asks for authorization.
fn auth_config(
    configured: Option<&AuthConfig>,
    args: &ServeArgs,
) -> Result<Option<AuthConfig>, CommandError> {
    let flagged =
        args.auth_issuer.is_some() || args.auth_resource.is_some() || !args.auth_scope.is_empty();
    if configured.is_none() && !flagged {
        return Ok(None);
    }
    let missing = |what: &str| {
        CommandError::Usage(format!(
            "authorization needs {what}: set it in [serve.auth] or pass it as a flag"
        ))
    };
    let issuer = args
        .auth_issuer
        .clone()
        .or_else(|| configured.map(|c| c.issuer.clone()))
        .ok_or_else(|| missing("the issuer (--auth-issuer)"))?;
    let resource = args
        .auth_resource
        .clone()
        .or_else(|| configured.map(|c| c.resource.clone()))
        .ok_or_else(|| missing("this server's resource URI (--auth-resource)"))?;
    let scopes = if args.auth_scope.is_empty() {
        configured.map(|c| c.scopes.clone()).unwrap_or_default()
    } else {
        let mut table = std::collections::BTreeMap::new();
        for grant in &args.auth_scope {
            let (scope, tools) = grant.split_once('=').ok_or_else(|| {
                CommandError::Usage(format!(
                    "--auth-scope {grant:?} is not SCOPE=TOOL[,TOOL...]"
                ))
            })?;
            table.insert(
                scope.trim().to_string(),
                tools.split(',').map(|t| t.trim().to_string()).collect(),
            );
        }
        table
    };
    let base = configured
        .cloned()
        .unwrap_or_else(|| AuthConfig::new(&issuer, &resource, Default::default()));
    Ok(Some(AuthConfig {
        issuer,
        resource,
        scopes,
        ..base
    }))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
