//! The command-line surface.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use toolgate_wiring::ToolsetName;

#[derive(Debug, Parser)]
#[command(
    name = "toolgate",
    version,
    about = "Safe, measurable tool use for language-model assistants",
    long_about = "toolgate gives language-model assistants tools that are capability contracts: \
every call goes through one dispatcher that validates, authorizes, asks a human where the risk \
says so, and returns bounded, untrusted-marked results.\n\n\
Start with `toolgate tools` to see every tool, its risk and what its definitions cost in tokens."
)]
pub struct Cli {
    /// Configuration file (TOML). Default: ./toolgate.toml when it exists; a found file that
    /// asks to start MCP servers, rate tools, relax the policy or widen the egress allowlist
    /// is refused until trusted with `toolgate config trust`.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Import the tools of the MCP servers in this `mcpServers` JSON file (as Claude Desktop,
    /// Claude Code and Cursor write it) under our policy; overrides [mcp] config.
    #[arg(long, global = true, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the risk table of a toolset and what its definitions and results cost in tokens.
    Tools(ToolsArgs),
    /// Create or restore the book catalogue database.
    #[command(subcommand)]
    Books(BooksCommand),
    /// Ask one question; print each model turn, tool call and result as it happens, then the
    /// answer.
    Ask(AskArgs),
    /// Like `ask`, in a loop: each line you type continues the conversation (empty line or
    /// end of input ends it).
    Chat(AgentArgs),
    /// Create, restore, import into, index or undo writes in the notes database.
    #[command(subcommand)]
    Notes(NotesCommand),
    /// The notes assistant's round trip, step by step, on the sample notebook with the
    /// embedded model; then an injected note asking for the notes to be emailed out, stopped
    /// at the approval step.
    Demo(DemoArgs),
    /// Run a task suite against one or more toolsets with the same model and loop, and report
    /// success with 95% CIs, tokens and calls per task, and the verdict.
    Eval(EvalCommand),
    /// Serve a toolset to MCP hosts (Claude Desktop, Claude Code, Cursor, ...) over stdio or
    /// Streamable HTTP, both MCP revisions (2025-11-25, 2026-07-28), with or without the tools
    /// imported from other MCP servers (--mcp-config: a gateway in front of them). Every call
    /// goes through the dispatcher; a call that needs a human's approval asks the person at
    /// the host through the protocol, and is denied when the host cannot ask.
    Serve(ServeArgs),
    /// The MCP servers whose tools are imported (--mcp-config or [mcp] config): their tools,
    /// risks, pins and quarantine; review and accept changed tool definitions. And the hosts'
    /// own configuration files: put toolgate in front of them (install) or take it out again
    /// (uninstall).
    #[command(subcommand)]
    Mcp(McpCommands),
    /// Serve exactly one MCP server through the gateway over stdio, so a host's entry becomes
    /// `"command": "toolgate", "args": ["wrap", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/me"]`:
    /// its tools under our names (NAME__tool) and risks (--risk; unrated means high), pinned on
    /// first use (a changed definition is quarantined), each call in the trace and the audit, and
    /// a call that needs approval asked through the host (denied when the host cannot ask).
    Wrap(WrapArgs),
    /// Run the security suites and say what was attempted, what was blocked and which trace
    /// line shows each block; write a JSON report. Exits 1 when anything leaked, a case that
    /// must pass was blocked, a block is missing from the trace or a case could not be checked.
    Check(CheckArgs),
    /// The configuration file: trust a ./toolgate.toml found in the current folder.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The decision records of every tool call (`serve`, `ask` and `chat` record them): search
    /// by principal, tool, outcome, approval and time; show a call with the calls made from
    /// inside it; export as JSON Lines or CSV. Reads the SQLite audit file (audit.sqlite beside
    /// the stores, in the user data folder, or --audit-db), or the team's shared store (--store
    /// or [store] url).
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Shadow replay: run the calls recorded in a trace (its decision records) or an eval's
    /// runs.jsonl again against a toolset, on a copy of a store, with every exit a recorder
    /// (no mail, no web request, no upstream call) and nobody to approve, and report per call:
    /// same, now refused (which step, which code), now asks for approval, different result
    /// (the JSON shape of the result, values left out). Exits 0 when nothing differs or every
    /// difference is accepted (--accept), 1 on a difference, 2 on input it cannot use.
    Replay(ReplayArgs),
    /// Signed receipts: make a signing key ([receipts] signing_key signs every write's
    /// receipt), and verify receipts with the public keys.
    #[command(subcommand)]
    Receipts(ReceiptsCommand),
    /// The catalogue's release gate: snapshot a toolset's tools (schemas, policy, bounds, error
    /// codes, deprecation) and check a new snapshot against the last release's, classifying
    /// each difference as breaking, a policy change to review, or compatible.
    #[command(subcommand)]
    Catalogue(crate::commands::catalogue::CatalogueCommand),
    /// The release manifest: one file naming the versions and digests of the configuration,
    /// every toolset's catalogue and schemas, the eval suites and the last eval results, so a
    /// release is one reviewable unit; and its check against the tree (exit 0 same, 1
    /// changed, 2 unusable manifest).
    #[command(subcommand)]
    Release(crate::commands::release::ReleaseCommand),
}

/// `toolgate audit ...`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The calls that match every filter given, newest first, one page at a time (the last
    /// line names the next page's --after).
    Search {
        #[command(flatten)]
        filter: AuditFilterArgs,
        #[command(flatten)]
        source: AuditSourceArgs,
        /// Rows per page.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// Start after this row (the cursor a previous page printed, TIME.ID).
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
        /// Print the page as one JSON object (`entries`, `next`) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One call (its newest record with this id) and the calls made from inside it (a
    /// code_execution call's tool calls, a tool's nested calls), as a tree.
    Show {
        /// The call id (as `search` prints it).
        call_id: String,
        /// The run the call belongs to, when the same call id appears in several runs.
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        #[command(flatten)]
        source: AuditSourceArgs,
        /// Print the tree as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Every call that matches the filters, newest first, as JSON Lines (one record per line)
    /// or CSV (text cells that a spreadsheet would run as a formula are prefixed with ').
    Export {
        #[arg(long, value_name = "FORMAT", value_parser = ["jsonl", "csv"])]
        format: String,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        filter: AuditFilterArgs,
        #[command(flatten)]
        source: AuditSourceArgs,
    },
}

/// Which audit to read.
#[derive(Debug, clap::Args)]
pub struct AuditSourceArgs {
    /// The SQLite audit file. Default: audit.sqlite in the user data folder, where the stores
    /// live unless --db named another (then it is beside that file); unused with a shared
    /// store.
    #[arg(long, value_name = "FILE", conflicts_with = "store")]
    pub audit_db: Option<PathBuf>,
    /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store] url
    /// in the config): its audit table holds every instance's calls.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

/// What to search for; every filter given must hold.
#[derive(Debug, Default, clap::Args)]
pub struct AuditFilterArgs {
    /// The caller's principal id.
    #[arg(long, value_name = "ID")]
    pub principal: Option<String>,
    /// The caller's tenant.
    #[arg(long, value_name = "TENANT")]
    pub tenant: Option<String>,
    /// The tool's name (as the model saw it, e.g. notes_search).
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// The run (conversation, session) the calls belong to.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// ok, error (any), approval_required, or one error code (invalid_argument, forbidden,
    /// approval_denied, ...).
    #[arg(long, value_name = "OUTCOME")]
    pub outcome: Option<String>,
    /// not_needed, replayed, approved, pending, denied (any reason) or declined (a person
    /// said no).
    #[arg(long, value_name = "STATE")]
    pub approval: Option<String>,
    /// Who answered the approval, as recorded.
    #[arg(long, value_name = "WHO")]
    pub decided_by: Option<String>,
    /// Recorded at or after: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS]Z (UTC), Unix milliseconds, or
    /// a span back from now (30m, 24h, 7d).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Recorded before (the same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show what the configuration file PATH (default ./toolgate.toml) would do that only a
    /// trusted file may (start MCP servers' commands with your secrets, rate tools, relax the
    /// policy, ...) and the digest to trust it with; with --digest, record that exact file
    /// (and the mcpServers file it names) in your trust list, so it loads when found in the
    /// current folder. A file that changes afterwards is untrusted again.
    Trust {
        /// The file. Default: ./toolgate.toml.
        path: Option<PathBuf>,
        /// The digest this command printed for the file (sha256:...): trusts it only if it is
        /// still that file.
        #[arg(long)]
        digest: Option<String>,
    },
}

/// `toolgate mcp ...`: the imported servers' commands, and the hosts' files.
#[derive(Debug, Subcommand)]
pub enum McpCommands {
    #[command(flatten)]
    Imports(McpCommand),
    /// Put toolgate into a host's MCP configuration file: an entry per toolset
    /// (`toolgate-notes`: `toolgate serve --stdio --toolset notes`) and, with --wrap-all, every
    /// existing server rewritten to `toolgate wrap --name NAME -- COMMAND ARGS` (its env kept and
    /// passed on by name; an HTTP server with --url). Shows the change as a diff and asks before
    /// writing; keeps a byte-for-byte backup (FILE.toolgate-backup-UNIXTIME) for `uninstall`.
    /// A file that is not valid JSON (comments included), or whose servers are not an object, is
    /// refused and left untouched.
    Install(McpInstallArgs),
    /// Restore a host's MCP configuration file from its newest toolgate backup, byte for byte.
    /// Refused when the file changed since toolgate wrote it, unless --force.
    Uninstall(McpUninstallArgs),
}

/// `toolgate mcp install`.
#[derive(Debug, clap::Args)]
pub struct McpInstallArgs {
    #[command(flatten)]
    pub host: HostFileArgs,
    /// A toolset to serve from the host (an entry `toolgate-TOOLSET`); repeatable.
    #[arg(long, value_parser = toolset_parser(), default_value = "notes")]
    pub toolset: Vec<ToolsetName>,
    /// Add no toolset's entry (with --wrap-all: only wrap the existing servers).
    #[arg(long, conflicts_with = "toolset", requires = "wrap_all")]
    pub no_toolset: bool,
    /// Also rewrite every existing server's entry to go through `toolgate wrap`.
    #[arg(long)]
    pub wrap_all: bool,
    /// Write without asking (for scripts); the diff is still shown.
    #[arg(long)]
    pub yes: bool,
    /// The toolgate program the host starts. Default: this one's full path (hosts start
    /// servers with a short PATH).
    #[arg(long, value_name = "PATH")]
    pub program: Option<PathBuf>,
}

/// `toolgate mcp uninstall`.
#[derive(Debug, clap::Args)]
pub struct McpUninstallArgs {
    #[command(flatten)]
    pub host: HostFileArgs,
    /// Restore the backup even though the file changed since toolgate wrote it (those changes
    /// are lost).
    #[arg(long)]
    pub force: bool,
}

/// Which host's file.
#[derive(Debug, clap::Args)]
pub struct HostFileArgs {
    /// The host: claude-desktop (claude_desktop_config.json), claude-code (~/.claude.json, user
    /// scope), cursor (~/.cursor/mcp.json) or vscode (the user's mcp.json, `servers`).
    #[arg(long, value_parser = PossibleValuesParser::new(["claude-desktop", "claude-code", "cursor", "vscode"]))]
    pub host: String,
    /// The file, instead of the host's user-level one (a project's .mcp.json,
    /// .cursor/mcp.json or .vscode/mcp.json, or a copy).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// `toolgate wrap`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("upstream").required(true).args(["url", "command"])))]
pub struct WrapArgs {
    /// The server's name: the namespace of its tools (NAME__tool) and the key of its pins.
    /// Default: derived from the package or script (`npx -y @scope/server-x` → server-x).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Our rating of the server's tools: LEVEL[:EFFECT] for all of them, TOOL=LEVEL[:EFFECT] for
    /// one (by the server's own name); repeatable; over [mcp.servers.NAME]. LEVEL is low,
    /// medium or high; EFFECT read, undoable_write, outbound, irreversible (the default) or
    /// costs_money. A tool the server marks destructive is raised to high; unrated is high.
    #[arg(long, value_name = "RATING")]
    pub risk: Vec<String>,
    /// Pass this variable of toolgate's environment on to the server (by name; repeatable).
    /// The server otherwise gets only HOME, LOGNAME, PATH, SHELL, TERM and USER.
    #[arg(long, value_name = "NAME")]
    pub env: Vec<String>,
    /// A Streamable HTTP server instead of a command.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// With --url: a request header, "NAME: VALUE"; repeatable.
    #[arg(long, value_name = "HEADER", requires = "url")]
    pub header: Vec<String>,
    /// With --url: a request header whose value is the variable VAR of toolgate's environment,
    /// "NAME=VAR" (read when the server starts, never written down); repeatable. How `mcp
    /// install --wrap-all` keeps an entry's tokens in its env, off the command line.
    #[arg(long, value_name = "NAME=VAR", requires = "url")]
    pub header_env: Vec<String>,
    /// The pin lock file. Default: wrap/NAME.lock.json in the user data folder.
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Also write every decision to this JSON Lines trace.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Record every call's decision in this SQLite audit file. Default: audit.sqlite in the
    /// user data folder (or [store] url's audit table).
    #[arg(long, value_name = "FILE")]
    pub audit_db: Option<PathBuf>,
    /// Print the server's tools with our names, risks and pins (as `toolgate mcp list`), then
    /// exit instead of serving.
    #[arg(long)]
    pub list: bool,
    /// The server's command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND", num_args = 1..)]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Connect to every server and show its tools: local name, risk and where it came from,
    /// and whether each is offered, quarantined (changed, new or gone since pinned), refused
    /// (a definition we do not accept) or unreachable.
    List,
    /// Pin the servers not pinned yet (as first use does): record a digest of each tool's
    /// whole definition in the lock file. A pinned server's changes go through diff/accept.
    Pin {
        /// Only this server (its name as the mcpServers file gives it, or its namespace).
        server: Option<String>,
    },
    /// Show how SERVER's tools differ from its pins: each quarantined tool's pinned
    /// definition against the current one.
    Diff {
        /// The server (its name as the mcpServers file gives it, or its namespace).
        server: String,
    },
    /// Record SERVER's current tool definitions as its pins, after `diff` has shown them:
    /// its quarantined tools are offered again from the next start. Refused, pinning
    /// nothing, unless the server still offers exactly the catalogue `diff` showed.
    Accept {
        /// The server (its name as the mcpServers file gives it, or its namespace).
        server: String,
        /// The catalogue digest `toolgate mcp diff SERVER` printed (sha256:...).
        #[arg(long)]
        digest: String,
    },
    /// Log in to the HTTP server SERVER with OAuth, when it asks for it: prints a URL to open
    /// in your browser, waits for the redirect back to 127.0.0.1, and stores the tokens (per
    /// issuer and resource, in a file only you can read: [mcp] tokens). The authorization
    /// server must be on the [egress] allowlist.
    ///
    /// With --as USER, the tokens are USER's own, for a gateway that serves many users behind
    /// [serve.auth]: sealed in the token vault ([mcp.vault]; the team's database with --store
    /// or [store] url), and sent only when USER calls SERVER's tools. USER is the subject the
    /// gateway's authorization server gives them; the person logging in must be USER.
    Login {
        /// The server (its name as the mcpServers file gives it, or its namespace).
        server: String,
        /// How long to wait for the browser to come back, in seconds (default 300).
        #[arg(long = "wait-secs")]
        wait_secs: Option<u64>,
        /// Store the tokens as this user's own (their subject at [serve.auth] issuer).
        #[arg(long = "as", value_name = "USER")]
        as_user: Option<String>,
        /// The team's shared store holding the token vault, postgres://... (default: [store]
        /// url in the config).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Seal every user's stored token again under the current vault key (the first line of
    /// [mcp.vault] keys_file): run after adding a new key first, before removing the old one.
    /// All entries or none: one that does not open is named and nothing changes.
    Rekey {
        /// The team's shared store holding the token vault, postgres://... (default: [store]
        /// url in the config).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
pub struct ServeArgs {
    /// Which toolset to serve (beside the tools imported with --mcp-config, if any).
    #[arg(long, value_parser = toolset_parser(), default_value = "notes")]
    pub toolset: ToolsetName,
    /// Serve no toolset of ours: only the tools imported from the MCP servers of
    /// --mcp-config or [mcp] config (a gateway in front of them).
    #[arg(long, conflicts_with_all = ["toolset", "db"])]
    pub no_toolset: bool,
    /// The toolset's database; created with its initial contents when missing. Default: the
    /// configured one, else the data folder.
    #[arg(long, value_name = "FILE", conflicts_with = "store")]
    pub db: Option<PathBuf>,
    /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store] url
    /// in the config): the toolset's data with its receipts and the approval tickets live there,
    /// so any number of instances serve the same users; the imported tools' forwarded writes
    /// are claimed there too.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Record every tool call's decision in this SQLite audit file (searched with `toolgate
    /// audit`). Default: audit.sqlite beside the toolset's store file (the user data folder
    /// unless --db names another); with a shared store, its audit table instead.
    #[arg(long, value_name = "FILE", conflicts_with = "store")]
    pub audit_db: Option<PathBuf>,
    /// Speak MCP on stdin/stdout (stdout carries protocol messages only; logs go to stderr).
    #[arg(long)]
    pub stdio: bool,
    /// Serve MCP over Streamable HTTP at http://ADDRESS/mcp (both protocol revisions on one
    /// endpoint). Without authorization only a loopback address is accepted, e.g.
    /// 127.0.0.1:8765.
    #[arg(long, value_name = "ADDRESS")]
    pub http: Option<std::net::SocketAddr>,
    /// HTTP only: the largest request body, in bytes (default 1048576).
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,
    /// HTTP only: requests served at once (default 64); one more is answered 503 at once.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent: Option<u16>,
    /// HTTP only: the longest one request may take, a wait for approval included, in seconds
    /// (default 360).
    #[arg(long, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: Option<u64>,
    /// Also write every decision to this JSON Lines trace.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// HTTP only: serve without any authorization on a non-loopback address (anyone who can
    /// connect may call every tool as the one local user). Refused with [serve.auth].
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// HTTP only: require OAuth access tokens from this authorization server (its issuer
    /// identifier); overrides [serve.auth] issuer. Needs --auth-resource and at least one
    /// --auth-scope unless [serve.auth] gives them. Its host must be on the [egress] allowlist.
    #[arg(long, value_name = "ISSUER")]
    pub auth_issuer: Option<String>,
    /// HTTP only: this server's canonical resource URI, which tokens must name in `aud`
    /// (e.g. https://mcp.example.com/mcp); overrides [serve.auth] resource.
    #[arg(long, value_name = "URI")]
    pub auth_resource: Option<String>,
    /// HTTP only: SCOPE=TOOL[,TOOL...]: the tools an OAuth scope grants (a tool name, or the
    /// toolset's name for all of its tools); repeatable; replaces [serve.auth.scopes].
    #[arg(long, value_name = "SCOPE=TOOLS")]
    pub auth_scope: Vec<String>,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalCommand {
    #[command(subcommand)]
    pub action: Option<EvalAction>,
    #[command(flatten)]
    pub run: EvalRunArgs,
}

#[derive(Debug, Subcommand)]
pub enum EvalAction {
    /// Re-render report.md, report.json and chart.svg of a run directory.
    Report {
        /// The eval's output directory.
        run_dir: PathBuf,
        /// Also write the report as one self-contained HTML page: verdict, confidence
        /// intervals, results per task, and each run's transcript (prompts from
        /// evals/<suite>.toml when it is the file the eval ran).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Re-judge a suite eval's recorded runs with today's checks, rewrite its runs.jsonl and
    /// re-render its report; prints, per toolset, successes before -> after and the runs that
    /// flipped, with why. Answer checks are re-judged from the recorded answer and the task's
    /// prompt; state checks (state_sql) keep their recorded outcome, because the run's final
    /// store was not kept. Refused, changing nothing, if the suite is not the file the eval
    /// ran (its digest is in plan.json).
    Rescore {
        /// The eval's output directory.
        run_dir: PathBuf,
        /// The suite file the eval ran. Default: evals/<the plan's suite name>.toml.
        #[arg(long, value_name = "FILE")]
        suite: Option<PathBuf>,
    },
    /// Print a before/after pair of traces in which a model fixed its own arguments after an
    /// error message.
    TracePair {
        /// The eval's output directory.
        run_dir: PathBuf,
    },
    /// Measure tool search: standing definition tokens and tool-selection accuracy at each
    /// catalogue size, with every definition sent and with deferral (tool_search plus the
    /// always-loaded tools, found definitions appended), with 95% CIs. Runs are saved as they
    /// finish; --resume continues, --report-only re-renders the figures.
    ToolSearch(ToolSearchArgs),
    /// Measure code mode: "find every note that mentions the budget" tool by tool (the notes
    /// tools) and as one script (`code_execution` only, in the sandbox), on the sample notebook
    /// and larger ones: tokens in context, calls, turns, wall time, correctness against SQL.
    CodeMode(CodeModeArgs),
}

#[derive(Debug, clap::Args)]
pub struct CodeModeArgs {
    /// Generated notes added to the sample notebook, one notebook per entry (0: the sample).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "N,...",
        default_value = "0,1000"
    )]
    pub extra_notes: Vec<usize>,
    /// Which arms, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "ARM,...",
        default_value = "tool-by-tool,script,reference-script"
    )]
    pub arms: Vec<CodeModeArm>,
    /// The model (as for `ask`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Context window of the embedded model, in tokens.
    #[arg(long, default_value_t = 32_768, value_parser = clap::value_parser!(u32).range(2048..=131_072))]
    pub ctx: u32,
    /// Round cap per arm.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_rounds: u32,
    /// Output directory. Default: evals/runs/code-mode-<time>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Keep the runs already saved in --out and run only the rest.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Only re-render report.md from the runs saved in --out (no model, no sandbox).
    #[arg(long, requires = "out", conflicts_with = "resume")]
    pub report_only: bool,
    /// With a sampling --temperature: runs of each model arm per notebook (the stand-ins run
    /// once); the report counts correct answers and correct scripts out of them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Sampling temperature (default: greedy, one run).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// With a sampling --temperature: the base of every run's seed (each run's seed is derived
    /// from it, the notebook size and the run number, the same for every arm and call form,
    /// and recorded in the run); --resume refuses another one.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How the embedded model writes its scripts: `json` (the script is the JSON string
    /// `code`, as every other argument) or `fenced` (plain Python between fences after the call
    /// object; the model's name then ends in `+fenced-code`).
    #[arg(long, value_enum, default_value = "json")]
    pub code_calls: CodeCallsForm,
    /// Ask for a tool call in each model run's first round (`tool_choice: any`; with the call
    /// grammar the first turn is then a call), recorded in every run.
    #[arg(long)]
    pub first_round_must_call: bool,
    /// Give scripts `<tool>_all(...)` for each paged tool (`notes_search_all(query=...)`: every
    /// page from offset 0, one list of hits) and a worked example that uses it; recorded in
    /// every run, and --resume refuses a folder measured the other way.
    #[arg(long)]
    pub all_pages: bool,
    /// Return a script that fails (an exception, a non-zero exit; not a limit) as a refused
    /// call with its traceback, and let the loop ask once for the corrected call (the
    /// retry of a refused call, its request requiring a `code_execution` call); recorded in
    /// every run, and --resume refuses a folder measured the other way.
    #[arg(long)]
    pub failed_script_errors: bool,
    /// Add to the report the correct scripts against the runs in DIR (the design before, run
    /// with the same --temperature, --seed, --runs and notebooks), paired by run seed, per
    /// notebook size and over all, with a paired bootstrap 95% CI; refused when the seeds differ.
    #[arg(long, value_name = "DIR")]
    pub paired_with: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CodeCallsForm {
    Json,
    Fenced,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CodeModeArm {
    ToolByTool,
    Script,
    /// A stand-in that writes a correct script (what code mode costs when the script is right).
    ReferenceScript,
    /// A stand-in that pages through every search result (what tool by tool costs when done
    /// completely).
    ReferenceToolByTool,
}

#[derive(Debug, clap::Args)]
pub struct ToolSearchArgs {
    /// The selection tasks (TOML: [eval] first, always_loaded; [[task]] id, prompt, tool).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "evals/tool-search/tasks.toml"
    )]
    pub tasks: PathBuf,
    /// The fixture tools (JSON) that fill catalogues past the real tools.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "evals/tool-search/catalogue.json"
    )]
    pub catalogue: PathBuf,
    /// Catalogue sizes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "N,...",
        default_value = "10,50,200"
    )]
    pub sizes: Vec<usize>,
    /// Modes, comma-separated: standing (every definition), deferred (tool_search and the
    /// always-loaded set), preloaded (deferred plus the tools the index ranks first for the
    /// task). A resume may add modes and sizes.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "MODE,...",
        default_value = "standing,deferred"
    )]
    pub modes: Vec<toolgate_eval::tool_search::Mode>,
    /// Runs per task, size and mode.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// The model (as for `ask`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Context window of the embedded model, in tokens (200 tools sent whole need about 25k).
    #[arg(long, default_value_t = 32_768, value_parser = clap::value_parser!(u32).range(2048..=131_072))]
    pub ctx: u32,
    /// Output directory. Default: evals/runs/tool-search-<time>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue an interrupted measurement in --out.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Only re-render report.md and report.json from --out's runs (no model).
    #[arg(long, requires = "out", conflicts_with = "resume")]
    pub report_only: bool,
}

#[derive(Debug, clap::Args)]
pub struct EvalRunArgs {
    /// The suite file (TOML).
    #[arg(long, value_name = "FILE", default_value = "evals/books.toml")]
    pub suite: PathBuf,
    /// A toolset to evaluate; give it twice to compare (the second against the first).
    /// Default: books-v1 and books-v2 for a books suite, notes for a notes suite.
    #[arg(long = "toolset", value_parser = toolset_parser())]
    pub toolsets: Vec<ToolsetName>,
    /// Runs per task and toolset.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Which tasks: dev, heldout or all.
    #[arg(long, value_enum, default_value = "all")]
    pub split: SplitName,
    /// Only these task ids (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    pub tasks: Option<Vec<String>>,
    /// The model (as for `ask`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Most model turns per run.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_rounds: u32,
    /// Sampling temperature (default: greedy for the embedded model, the provider's default
    /// otherwise).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// With a sampling --temperature: the base of every run's seed (each run's seed is
    /// derived from it, the task and the run number, and recorded in the run), so a run
    /// can be repeated exactly; --resume refuses another one.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Turn off the embedded model's call grammar: calls are parsed as the model wrote them
    /// (as with an API whose strict mode is off), so invalid arguments reach the tools and
    /// their error messages. The model's name ends in `+unconstrained` in the plan and report.
    #[arg(long)]
    pub unconstrained: bool,
    /// Context window of the embedded model, in tokens (v1's full listing needs about 20k).
    #[arg(long, default_value_t = 32_768, value_parser = clap::value_parser!(u32).range(2048..=131_072))]
    pub ctx: u32,
    /// Output directory. Default: evals/runs/<suite>-<time>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue an interrupted eval in --out.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Run on PostgreSQL instead of a SQLite file: postgres://USER:PASSWORD@HOST:PORT/DATABASE
    /// names a server and a role that may create databases (CREATEDB). The eval creates a
    /// database of its own beside DATABASE (toolgate_eval_...), restores it before every run
    /// and drops it at the end; DATABASE itself is never changed. Not read from [store] url.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SplitName {
    Dev,
    Heldout,
    All,
}

#[derive(Debug, clap::Args)]
pub struct AskArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// The question.
    #[arg(required = true, num_args = 1.., value_name = "QUESTION")]
    pub question: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// Which toolset the model gets.
    #[arg(long, value_parser = toolset_parser(), default_value = "books-v2")]
    pub toolset: ToolsetName,
    /// Books database (created from the embedded catalogue if missing). Default: [books] db
    /// in the config, else the user data folder.
    #[arg(long, value_name = "FILE", conflicts_with = "store")]
    pub db: Option<PathBuf>,
    /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store] url
    /// in the config): the toolset's data, its receipts, the approval tickets and the audit
    /// table in one PostgreSQL database.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Write the run's trace (JSON Lines: model turns, tool decisions, run end) here.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Record every tool call's decision in this SQLite audit file (searched with `toolgate
    /// audit`). Default: audit.sqlite beside the toolset's store file (the user data folder
    /// unless --db names another); with a shared store, its audit table instead.
    #[arg(long, value_name = "FILE", conflicts_with = "store")]
    pub audit_db: Option<PathBuf>,
    /// Write the conversation (JSON) here when the run ends.
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,
    /// The model: embedded, embedded:FILE.gguf, anthropic:NAME, openai:NAME,
    /// openai-responses:NAME or openai-compat:URL[#MODEL]. Default: anthropic when
    /// ANTHROPIC_API_KEY is set, else openai when OPENAI_API_KEY is set, else embedded.
    /// An openai-compat server is sent a key only from OPENAI_COMPAT_API_KEY (never
    /// OPENAI_API_KEY), and a key never goes over plain http to a host other than this
    /// machine (127.0.0.1, ::1, localhost): use https there.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Most model turns before the run stops without an answer.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_rounds: u32,
    /// Stop once input + output tokens across the run exceed this.
    #[arg(long, value_name = "TOKENS")]
    pub token_budget: Option<u64>,
    /// `auto` runs medium-risk writes (logged with an undo handle); `ask` asks for them too.
    /// High-risk calls always ask. Without a terminal, every question is answered no.
    #[arg(long, value_enum)]
    pub mode: Option<ModeName>,
    /// Sampling temperature (default: the model's greedy or provider default).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Context window of the embedded model, in tokens.
    #[arg(long, default_value_t = 32_768, value_parser = clap::value_parser!(u32).range(2048..=131_072))]
    pub ctx: u32,
    /// Replace the default system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Print only the answer.
    #[arg(long, short)]
    pub quiet: bool,
    /// Offer `tool_search`: past 30 tools the model gets a small standing set plus the 8
    /// tools the search index ranks first for the question (found before the first request),
    /// and searches for the rest, whose definitions are appended (never swapped in). Measured
    /// on the embedded model at 50 and 200 tools: the right tool in 12 of 12 tasks with a
    /// quarter to a tenth of the definition tokens (README, "Tool search").
    #[arg(long)]
    pub tool_search: bool,
    /// Offer `code_execution`: the model may write a Python script that runs in the sandbox
    /// (bubblewrap namespaces, no network, seccomp, Landlock, rlimits; `[sandbox]` in the
    /// config) and calls the toolset's tools as functions, each through the same checks and
    /// approvals. With the notes toolset the notebook is mounted read-only at /sandbox/data.
    /// Refused at start when the sandbox cannot be set up.
    #[arg(long)]
    pub code: bool,
    /// With --code: show the model only `code_execution`; the toolset's tools are reachable
    /// only as functions of its scripts ("code mode").
    #[arg(long, requires = "code")]
    pub code_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeName {
    Auto,
    Ask,
}

#[derive(Debug, clap::Args)]
pub struct ToolsArgs {
    /// Which toolset to show; all of them when omitted.
    #[arg(long, value_parser = toolset_parser())]
    pub toolset: Option<ToolsetName>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
    /// Also print each tool's exact model view (name, description, input schema).
    #[arg(long)]
    pub schema: bool,
    /// Books database to measure result sizes on. Default: a fresh catalogue in a temporary
    /// folder, so the figures describe the initial state.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Instead of the table, run every tool's examples on a fresh seeded store (writes
    /// approved, nothing sent out) and check each result against what the example declares;
    /// prints passed / failed (why) per example and exits 1 on any failure.
    #[arg(long, conflicts_with_all = ["schema", "db"])]
    pub check: bool,
}

/// `--toolset`: the toolsets the wiring knows, each with its summary in the help.
pub(crate) fn toolset_parser() -> impl TypedValueParser<Value = ToolsetName> {
    PossibleValuesParser::new(
        ToolsetName::ALL.map(|t| PossibleValue::new(t.as_str()).help(t.summary())),
    )
    .try_map(|name| name.parse::<ToolsetName>())
}

#[derive(Debug, Subcommand)]
pub enum NotesCommand {
    /// Create a notes database: the bundled sample notebook (default) or an empty one. With
    /// --store, fill the shared PostgreSQL store's notebook with the sample when it is empty.
    Init {
        /// The notes database. Default: [notes] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE", conflicts_with = "store")]
        db: Option<PathBuf>,
        /// Start empty instead of with the sample notebook.
        #[arg(long, conflicts_with = "store")]
        empty: bool,
        /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store]
        /// url in the config): its schema is brought up to date and an empty notebook filled
        /// with the sample.
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Restore the database to what it was created with (sample or empty). With --store,
    /// restore the shared store's notebook to the sample (its notes, drafts and the notes
    /// tools' receipts; nothing else of the database).
    Reset {
        /// The notes database. Default: [notes] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE", conflicts_with = "store")]
        db: Option<PathBuf>,
        /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store]
        /// url in the config).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Import a folder of Markdown notes (optional front matter: title, notebook, tags, due,
    /// created, kind, source_url, untrusted).
    Import {
        /// The folder to read.
        dir: PathBuf,
        /// The notes database. Default: [notes] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE", conflicts_with = "store")]
        db: Option<PathBuf>,
        /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store]
        /// url in the config): the notes are imported into its notebook.
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Prepare a notebook file's search index now, showing progress. A notebook of 20,000
    /// notes or more gets one anyway (beside the file, FILE.search-index) when a command or
    /// server opens it, built in the background while searches are ranked without it; this
    /// builds it in the foreground, whatever the notebook's size, or opens and catches up the
    /// one there is.
    Index {
        /// The notes database. Default: [notes] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE")]
        db: Option<PathBuf>,
    },
    /// Revert the last N undoable writes (notes created, tags changed, to-dos made), newest
    /// first.
    Undo {
        /// How many writes to revert.
        #[arg(default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        count: u32,
        /// The notes database. Default: [notes] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE", conflicts_with = "store")]
        db: Option<PathBuf>,
        /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store]
        /// url in the config): the writes reverted are its notebook's, by whichever instance
        /// made them.
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Notes database for the demo. Default: a fresh sample notebook in a temporary folder.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// The model (as for `ask`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Context window of the embedded model, in tokens.
    #[arg(long, default_value_t = 16_384, value_parser = clap::value_parser!(u32).range(2048..=131_072))]
    pub ctx: u32,
    /// Write the demo's trace (JSON Lines) here.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The notes toolset to run the demo on, with the loop it was designed with: any of
    /// `notes` (the first design), `notes-v2` (its search returns the best match whole, its loop
    /// corrects an answer that describes a call) to `notes-v10`;
    /// docs/raising-the-embedded-models-success.md says what each changed and what it measured.
    #[arg(long, default_value = "notes-v2", value_name = "TOOLSET")]
    pub toolset: ToolsetName,
    /// Sampling temperature (default: greedy for the embedded model).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// With a sampling --temperature: the seed of the sampler, so a run can be repeated exactly.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run only the first step (the question about the design team's budget).
    #[arg(long)]
    pub first_step_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
    /// The risk table as Markdown (what docs/risk-table.md holds; a test compares them).
    Markdown,
}

#[derive(Debug, Subcommand)]
pub enum BooksCommand {
    /// Create a new catalogue database (300 goodbooks-10k rows); refuses to overwrite a file.
    /// With --store, fill the shared PostgreSQL store's empty catalogue instead.
    Init {
        /// Database file. Default: [books] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE", conflicts_with = "store")]
        db: Option<PathBuf>,
        /// A team's shared store, postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: [store]
        /// url in the config): its schema is brought up to date, and its catalogue filled when
        /// empty.
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Restore a catalogue database to its initial state (no statuses, tags or receipts).
    Reset {
        /// Database file. Default: [books] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE", conflicts_with = "store")]
        db: Option<PathBuf>,
        /// A team's shared store (as for init): its catalogue and the books tools' receipts
        /// are restored, nothing else.
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Which suite: injection (user tasks crossed with injection goals, through the real loop
    /// and model), egress (URLs that must be blocked and ones that must pass, against the real
    /// egress exit), auth (token cases against the MCP server over HTTP), robustness
    /// (malformed JSON-RPC over stdio and HTTP, a load run), or all of them in that order.
    #[arg(value_parser = PossibleValuesParser::new(["injection", "egress", "auth", "robustness", "all"]))]
    pub suite: String,

    /// More cases, in the suite's own format (see `security/<suite>/` for examples), run
    /// beside the built-in ones. Repeatable. With `all`, give each file to one suite instead.
    #[arg(long = "cases", value_name = "FILE")]
    pub cases: Vec<PathBuf>,

    /// Where the report (`<suite>.json`) and the trace files the table cites are written.
    #[arg(long, value_name = "DIR", default_value = "toolgate-check")]
    pub out: PathBuf,

    /// Print nothing but the tables (no progress lines on stderr).
    #[arg(long)]
    pub quiet: bool,

    /// Injection suite: the model (embedded, embedded:FILE, anthropic:NAME, openai:NAME,
    /// openai-responses:NAME, openai-compat:URL#MODEL). Default: [model] in the config, else
    /// the embedded model.
    #[arg(long, value_name = "SPEC")]
    pub model: Option<String>,

    /// Injection suite: context window of the embedded model, in tokens.
    #[arg(long, default_value_t = 32_768, value_parser = clap::value_parser!(u32).range(2048..=131_072))]
    pub ctx: u32,

    /// Injection suite: at most N attack cases per configuration, spread over goals, tasks
    /// and phrasings (the full suite is 240 cases x 3 configurations, hours on the embedded
    /// model).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,

    /// Injection suite: at most N clean runs (tasks without an attack) per configuration.
    #[arg(long, value_name = "N")]
    pub clean_limit: Option<u64>,

    /// Injection suite: only these configurations (deny-all, fatigued, fatigued+taint),
    /// comma-separated. Default: all three.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub configs: Vec<String>,

    /// Injection suite: the notes toolset the user's tasks run on, with the loop it was
    /// designed with; repeatable. Each configuration runs once per toolset; runs on another
    /// toolset than `notes` are named `CONFIG@TOOLSET` (`deny-all@notes-v6`) and the report
    /// pairs their utility and attack success with `notes`' by case. The gates are the same.
    #[arg(long, value_parser = toolset_parser(), default_value = "notes")]
    pub toolset: Vec<ToolsetName>,

    /// Injection suite: only the cases whose id starts with one of these (comma-separated),
    /// e.g. `note-starter.` or `page-focaccia.email-out.base64`; ids are task.goal.phrasing.
    #[arg(long, value_name = "PREFIX,...", value_delimiter = ',')]
    pub only: Vec<String>,

    /// Injection suite: keep the runs already saved in --out (each run is saved as it
    /// finishes) and run only the rest; refused when they were made with another model.
    #[arg(long)]
    pub resume: bool,

    /// Injection suite: run nothing; report the runs already saved in --out for this
    /// selection (runs not made yet are counted as missing).
    #[arg(long)]
    pub report_only: bool,

    /// Injection suite: run on PostgreSQL instead of a SQLite file:
    /// postgres://USER:PASSWORD@HOST:PORT/DATABASE names a server and a role that may create
    /// databases (CREATEDB). The suite creates a database of its own beside DATABASE, restores
    /// it before every run and drops it at the end; DATABASE itself is never changed. Not read
    /// from [store] url.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

/// `toolgate receipts ...`.
#[derive(Debug, Subcommand)]
pub enum ReceiptsCommand {
    /// Make a new Ed25519 signing key: FILE (PEM PKCS#8, mode 0600, never overwritten) and
    /// FILE.pub (the public key, for verifiers); prints the key id and the public key.
    Keygen {
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Verify a receipt (JSON) or JSON lines of receipts (or of decision records or audit
    /// export entries holding one) from FILE, or standard input with `-`; prints each verified
    /// or failed and why. Exits 1 when any failed, 2 when the input or keys are unusable.
    Verify {
        /// The receipt file, or `-` for standard input.
        #[arg(value_name = "FILE|-")]
        file: PathBuf,
        /// A public key (base64) or key file to verify with, instead of [receipts]'s keys
        /// (repeatable).
        #[arg(long = "key", value_name = "PUBLIC_KEY_OR_FILE")]
        keys: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
toolgate replay evals/runs/books-v3-dev-embedded/runs.jsonl --toolset books-v2\n      \
the books-v2 runs against books-v2 itself: no difference expected\n  \
toolgate replay evals/runs/books-v3-dev-embedded/runs.jsonl --recorded books-v2 --toolset books-v3\n      \
which of books-v2's calls books-v3 answers differently\n  \
toolgate replay trace.jsonl --toolset notes --store ~/.local/share/toolgate/notes.sqlite\n      \
a session's trace, on a copy of the notebook it ran on\n\n\
Accept file (JSON): {\"accept\": [{\"call\": \"books-v2/king-count/0#1\", \"reason\": \"...\"}, \
{\"tool\": \"books_search\", \"kind\": \"different_result\", \"reason\": \"...\"}]}; \
kinds: now_refused, now_asks_approval, different_result. See docs/shadow-replay.md.")]
pub struct ReplayArgs {
    /// The recording: a trace (JSON Lines; its `tool_call` lines are decision records, other
    /// events are left out) or an eval's runs.jsonl (each run replayed on a fresh store).
    #[arg(value_name = "TRACE.jsonl")]
    pub trace: PathBuf,

    /// The toolset to replay against.
    #[arg(long, value_parser = toolset_parser())]
    pub toolset: ToolsetName,

    /// Of an eval's runs.jsonl, replay the runs recorded with this toolset. Default: the only
    /// toolset it holds, else --toolset's runs.
    #[arg(long, value_name = "TOOLSET", value_parser = toolset_parser())]
    pub recorded: Option<ToolsetName>,

    /// Replay on a copy of this store file (it is never written). Default: a fresh store with
    /// the toolset's initial contents, as the eval seeds it.
    #[arg(long, value_name = "COPY")]
    pub store: Option<PathBuf>,

    /// Known differences that do not fail the replay (JSON; see below).
    #[arg(long, value_name = "FILE")]
    pub accept: Option<PathBuf>,

    /// Replay against this catalogue snapshot (`toolgate catalogue snapshot`): its views decide
    /// whether each tool exists, whether the arguments fit and whether the call asks a human;
    /// what they let through runs --toolset's handler.
    #[arg(long, value_name = "CATALOGUE.json")]
    pub against: Option<PathBuf>,

    /// Print the whole report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
}
