//! `toolgate ask` and `toolgate chat`: a model, a toolset and the loop, wired together, with
//! the round trip printed as it happens.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use toolgate_agent::{
    Agent, AgentConfig, AgentEvent, DEFAULT_SYSTEM_PROMPT, Observer, RunResult, StopCause,
    TerminalApprover,
};
use toolgate_core::display::{visible, visible_line};
use toolgate_core::trace::{JsonlTrace, NoTrace, TraceSink};
use toolgate_core::{ApprovalChannel, CallResult, Mode, Principal};
use toolgate_llm::embedded::{
    CodeCalls, EmbeddedConfig, EmbeddedModel, Progress, ProgressFn, fetched_model_path,
};
use toolgate_llm::{
    AnthropicModel, Message, Model, OpenAiChatModel, OpenAiCompatModel, OpenAiResponsesModel,
};

use std::path::Path;

use toolgate_wiring::{CodeOptions, ExtraTools, Seat, ToolsetName};

use super::mcp::server_heading;
use super::{CommandError, audit_file_of, open_located_store, runtime, with_audit};
use crate::cli::{AgentArgs, AskArgs, ModeName};
use crate::config::Config;
use crate::model_spec::{self, ModelSpec};

struct Session {
    agent: Agent,
    model_name: String,
    quiet: bool,
    transcript: Option<std::path::PathBuf>,
    /// Writes its last records when the session ends (dropped after the agent).
    _audit: toolgate_wiring::audit::AuditGuard,
    /// Exports what it still holds when the session ends (`[telemetry]`; `None`: off).
    _telemetry: Option<toolgate_telemetry::export::Exporting>,
}

pub fn ask(config: &Config, mcp_config: Option<&Path>, args: &AskArgs) -> Result<(), CommandError> {
    let rt = runtime()?;
    let session = build(config, mcp_config, &args.agent, &rt)?;
    let question = args.question.join(" ");
    let result = rt.block_on(session.agent.ask(&run_id(), &question));
    finish(&session, &result)
}

pub fn chat(
    config: &Config,
    mcp_config: Option<&Path>,
    args: &AgentArgs,
) -> Result<(), CommandError> {
    let rt = runtime()?;
    let session = build(config, mcp_config, args, &rt)?;
    // Approvals are asked on the terminal itself, never read from this input, where a pasted
    // or typed-ahead `y` would answer a question nobody saw; without a terminal, say so once.
    if TerminalApprover::if_terminal().is_none() {
        eprintln!(
            "toolgate: no terminal to ask on: every call that needs approval will be refused (approvals are never read from the conversation's input)"
        );
    }
    let mut history: Vec<Message> = Vec::new();
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    loop {
        if interactive {
            eprint!("you> ");
            let _ = std::io::stderr().flush();
        }
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        history.push(Message::user_text(line.trim()));
        let result = rt.block_on(session.agent.run(&run_id(), history.clone()));
        finish(&session, &result)?;
        history = result.transcript;
    }
    Ok(())
}

fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("run-{nanos:x}-{}", std::process::id())
}

fn build(
    config: &Config,
    mcp_config: Option<&Path>,
    args: &AgentArgs,
    rt: &tokio::runtime::Runtime,
) -> Result<Session, CommandError> {
    let trace: Arc<dyn TraceSink> = match &args.trace {
        Some(file) => Arc::new(JsonlTrace::create(file)?),
        None => Arc::new(NoTrace),
    };
    let kind = args.toolset.store();
    let (store, shared) =
        open_located_store(config, kind, args.db.as_deref(), args.store.as_deref(), rt)?;
    // Every decision goes to the audit as well: the shared store's table, else the audit file.
    let shared_audit = shared
        .as_ref()
        .map(|s| rt.block_on(async { s.audit(format!("ask/{}", std::process::id())) }));
    let audit_file = || {
        audit_file_of(
            config,
            args.audit_db.as_deref(),
            Some((kind, args.db.as_deref())),
        )
    };
    let (trace, audit) = with_audit(trace, shared_audit, audit_file, "ask")?;
    // A person at a terminal is asked; without one, nobody can be, and every call that needs
    // approval is denied.
    let approval = match TerminalApprover::if_terminal() {
        Some(terminal) => ApprovalChannel::Ask(Arc::new(terminal)),
        None => ApprovalChannel::None,
    };
    let mode = match args.mode {
        Some(ModeName::Auto) => Mode::Auto,
        Some(ModeName::Ask) => Mode::Ask,
        None => config.mode.unwrap_or_default(),
    };
    let mut seat = Seat::new(Principal::local("local-user", &[]))
        .with_approval(approval)
        .with_mode(mode)
        .with_taint_policy(config.policy)
        .with_trace(Arc::clone(&trace))
        .with_receipt_signer(config.receipt_signer()?);
    if let Some(shared) = &shared {
        seat = seat.with_ledger(shared.ledger());
    }
    if let Some(budgets) = config.budgets() {
        seat = seat.with_budgets(budgets);
    }
    if let Some(gate) = config.phases() {
        seat = seat.with_phases(gate);
    }
    let telemetry = config.telemetry()?;
    if let Some(exporting) = &telemetry {
        seat = seat.with_telemetry(exporting.telemetry());
    }
    // A server allowed to sample (`[mcp.servers.NAME] sampling = "allow"`) runs on the model
    // this command loads below, after everything that may refuse to start has been checked.
    let sampler = toolgate_wiring::imports::sampling_allowed(&config.mcp)
        .then(|| Arc::new(toolgate_wiring::sampling::ModelSampler::later()));
    let placement = toolgate_wiring::Placement {
        sampler: sampler
            .clone()
            .map(|s| s as Arc<dyn toolgate_mcp_client::server_requests::Sampler>),
        ..toolgate_wiring::Placement::default()
    };
    let imports = rt.block_on(toolgate_wiring::open_imports_placed(
        &config.mcp,
        mcp_config,
        &config.exits(),
        Arc::clone(&trace),
        &placement,
    ))?;
    let extra = match &imports {
        Some(imports) => {
            if let Some(exporting) = &telemetry {
                imports.report_states_to(&exporting.telemetry());
            }
            if !args.quiet {
                for server in &imports.servers {
                    println!("mcp: {}", server_heading(server));
                }
            }
            toolgate_wiring::extra_tools(imports, args.tool_search)
        }
        None => ExtraTools {
            with_search: args.tool_search,
            ..ExtraTools::default()
        },
    };
    let extra = ExtraTools {
        code: args
            .code
            .then(|| code_options(config, args.toolset))
            .transpose()?,
        ..extra
    };
    let path = store.path().to_path_buf();
    let ready =
        toolgate_wiring::dispatcher_with(args.toolset, &store, &config.exits(), seat, extra)?;
    let spec = choose_model(args.model.as_deref().or(config.model.name.as_deref()))?;
    let model = load_model(&spec, args.ctx, !args.quiet)?;
    if let Some(sampler) = &sampler {
        sampler.provide(Arc::clone(&model));
    }
    let model_name = model.name();
    if !args.quiet {
        println!(
            "model: {model_name}   toolset: {} ({} tools)   db: {}",
            args.toolset,
            ready.registry.names().count(),
            path.display()
        );
    }
    let mut agent = Agent::new(model, ready.caller, ready.principal)
        .with_config(AgentConfig {
            max_rounds: args.max_rounds,
            token_budget: args.token_budget,
            max_tokens_per_turn: 1024,
            temperature: args.temperature,
            system: Some(
                args.system
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.into()),
            ),
            offered: args
                .code_only
                .then(|| vec![toolgate_sandbox::tool::TOOL_NAME.to_owned()]),
            ..args.toolset.agent_config()
        })
        .with_trace(trace);
    if !args.quiet {
        agent = agent.with_observer(printer());
    }
    Ok(Session {
        agent,
        model_name,
        quiet: args.quiet,
        transcript: args.transcript.clone(),
        _audit: audit,
        _telemetry: telemetry,
    })
}

/// `--model` parsed, or the model the environment's keys select.
pub(super) fn choose_model(flag: Option<&str>) -> Result<ModelSpec, CommandError> {
    Ok(match flag {
        Some(text) => text.parse::<ModelSpec>()?,
        None => model_spec::from_environment(
            std::env::var("ANTHROPIC_API_KEY").ok().as_deref(),
            std::env::var("OPENAI_API_KEY").ok().as_deref(),
        ),
    })
}

pub(super) fn load_model(
    spec: &ModelSpec,
    ctx: u32,
    announce: bool,
) -> Result<Arc<dyn Model>, CommandError> {
    load_model_with(spec, ctx, announce, true)
}

/// As [`load_model`]; `constrain_calls` false turns the embedded model's call grammar off
/// (refused for other models, whose strictness is the provider's).
pub(super) fn load_model_with(
    spec: &ModelSpec,
    ctx: u32,
    announce: bool,
    constrain_calls: bool,
) -> Result<Arc<dyn Model>, CommandError> {
    load_model_configured(spec, ctx, announce, constrain_calls, CodeCalls::default())
}

/// As [`load_model_with`]; `code_calls` is how the embedded model writes scripts (another
/// model's wire format is the provider's, so anything but the default is refused for it).
pub(super) fn load_model_configured(
    spec: &ModelSpec,
    ctx: u32,
    announce: bool,
    constrain_calls: bool,
    code_calls: CodeCalls,
) -> Result<Arc<dyn Model>, CommandError> {
    if code_calls != CodeCalls::default() && !matches!(spec, ModelSpec::Embedded(_)) {
        return Err(CommandError::Usage(
            "--code-calls applies to the embedded model only (a remote model's call format is the provider's)".into(),
        ));
    }
    if !constrain_calls && !matches!(spec, ModelSpec::Embedded(_)) {
        return Err(CommandError::Usage(
            "--unconstrained applies to the embedded model only (a remote model's strict mode is the provider's setting)".into(),
        ));
    }
    Ok(match spec {
        ModelSpec::Embedded(path) => {
            let path = match path {
                Some(p) => p.clone(),
                None => fetched_model_path()?,
            };
            let mut config = EmbeddedConfig::new(path);
            config.n_ctx = ctx;
            config.constrain_calls = constrain_calls;
            config.code_calls = code_calls;
            // The system prompt and tool definitions' KV state, kept on disk between processes
            // (TOOLGATE_PREFIX_CACHE=off turns it off, for measuring).
            config.prefix_cache = toolgate_llm::embedded::prefix_cache_dir_from_env();
            if announce {
                eprintln!(
                    "toolgate: loading the embedded model from {}",
                    config.model_path.display()
                );
            }
            Arc::new(EmbeddedModel::load(config, progress_line())?)
        }
        ModelSpec::Anthropic(name) => Arc::new(AnthropicModel::from_env(name.clone())?),
        ModelSpec::OpenAiChat(name) => Arc::new(OpenAiChatModel::from_env(name.clone())?),
        ModelSpec::OpenAiResponses(name) => Arc::new(OpenAiResponsesModel::from_env(name.clone())?),
        // A compatible server gets only the key named for it (OPENAI_COMPAT_API_KEY), never
        // OpenAI's; a key over plain http to another machine is refused.
        ModelSpec::OpenAiCompat { base_url, model } => {
            Arc::new(OpenAiCompatModel::from_env(base_url, model.clone())?)
        }
    })
}

/// A progress line on stderr while the local model works (only on a terminal).
fn progress_line() -> Option<ProgressFn> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(Arc::new(|progress: Progress| {
        let text = match progress {
            Progress::Prefill { done, total } => {
                format!("  reading the prompt: {done}/{total} tokens")
            }
            Progress::Generate { tokens } => format!("  writing: {tokens} tokens"),
        };
        eprint!("\r\x1b[2K{text}");
        let _ = std::io::stderr().flush();
    }))
}

const SHOWN_RESULT_CHARS: usize = 240;

/// `text` on one line, cut to `max` characters, every character that could act on a terminal
/// shown by name (tool results and arguments carry text from anywhere).
pub(crate) fn abbreviate(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    let count = flat.chars().count();
    if count <= max {
        return visible_line(&flat).into_owned();
    }
    let cut: String = flat.chars().take(max).collect();
    format!("{}… ({count} chars)", visible_line(&cut))
}

/// Prints the round trip as it happens.
fn printer() -> Observer {
    Arc::new(|event: &AgentEvent<'_>| {
        let clear = if std::io::stderr().is_terminal() {
            "\r\x1b[2K"
        } else {
            ""
        };
        eprint!("{clear}");
        match event {
            AgentEvent::Request { round, request } => println!(
                "[round {round}] → model: {} messages, {} tools",
                request.messages.len(),
                request.tools.len()
            ),
            AgentEvent::Response { round, response } => {
                let usage = &response.usage;
                let what = if response.tool_calls.is_empty() {
                    "answer".to_string()
                } else {
                    let names: Vec<&str> = response
                        .tool_calls
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect();
                    format!("tool_use {}", names.join(", "))
                };
                println!(
                    "[round {round}] ← {what} ({} input tokens, {} from cache, {} output)",
                    usage.input_tokens, usage.cached_input_tokens, usage.output_tokens
                );
            }
            AgentEvent::ToolCall { call } => println!(
                "    call  {} {}",
                visible_line(&call.name),
                visible_line(&call.arguments.to_string())
            ),
            AgentEvent::ToolResult { call, outcome } => {
                let status = match &outcome.result {
                    CallResult::Done(_) => "ok",
                    CallResult::Failed(e) => e.code.as_str(),
                    CallResult::ApprovalRequired(_) => "approval_required",
                };
                println!(
                    "    result {} [{status}, {} bytes]: {}",
                    call.name,
                    outcome.record.result_bytes,
                    abbreviate(&outcome.model_text(), SHOWN_RESULT_CHARS)
                );
            }
            AgentEvent::RepeatAnswered { call, earlier } => println!(
                "    repeat {} {} [answered from round {}, not run again]",
                visible_line(&call.name),
                visible_line(&call.arguments.to_string()),
                earlier.round
            ),
            AgentEvent::DescribedCallCorrected { round, call } => println!(
                "[{round}] the answer describes a call to {} instead of making it: one corrective turn",
                visible_line(&call.tool)
            ),
            AgentEvent::EchoedAnswerCorrected { round, echo } => println!(
                "[{round}] the answer is raw tool output ({} of its {} characters): one corrective turn",
                echo.copied_chars, echo.answer_chars
            ),
            AgentEvent::UnfoundedAnswerCorrected { round, unfounded } => println!(
                "[{round}] the answer states no figure or name from the {} tool result(s): one corrective turn",
                unfounded.results
            ),
            AgentEvent::RefusedCallRetried { round, call } => println!(
                "[{round}] the answer makes no call after {} was refused ({}): one corrective turn",
                visible_line(&call.tool),
                visible_line(&call.code)
            ),
            AgentEvent::ToolsEnded { round } => println!(
                "[{round}] a read repeated twice with nothing written since: tool use ends, the model must answer"
            ),
            AgentEvent::Finished { .. } => {}
        }
    })
}

fn finish(session: &Session, result: &RunResult) -> Result<(), CommandError> {
    if let Some(path) = &session.transcript {
        let text = serde_json::to_string_pretty(&result.transcript).unwrap_or_default();
        std::fs::write(path, text)?;
    }
    match &result.answer {
        Some(answer) if session.quiet => println!("{}", visible(answer)),
        Some(answer) => println!("answer: {}", visible(answer)),
        None => {}
    }
    if !session.quiet {
        println!(
            "stopped: {} after {} round(s); {} input tokens ({} from cache), {} output tokens, {} tool call(s); model {}",
            result.stop.describe(),
            result.rounds,
            result.usage.input_tokens,
            result.usage.cached_input_tokens,
            result.usage.output_tokens,
            result.calls.len(),
            session.model_name
        );
    }
    match &result.stop {
        StopCause::FinalAnswer => Ok(()),
        other => Err(CommandError::RunFailed(other.describe())),
    }
}

/// `code_execution` for `--code`: the sandbox from `[sandbox]`, started through this binary's
/// `sandbox-init`; the notebook exported into it for the notes toolset.
fn code_options(config: &Config, toolset: ToolsetName) -> Result<CodeOptions, CommandError> {
    let init = toolgate_sandbox::InitProgram::this_executable(crate::SANDBOX_INIT)?;
    Ok(CodeOptions {
        sandbox: config.sandbox.config(init),
        export_notes: toolset.store() == toolgate_wiring::StoreKind::Notes,
        paging: toolgate_sandbox::Paging::ByPage,
        failed_scripts: toolgate_sandbox::FailedScripts::Reported,
    })
}

#[cfg(test)]
mod tests {
    use super::abbreviate;

    #[test]
    fn progress_lines_cannot_be_rewritten_by_what_a_tool_returned() {
        let cases: &[(&str, usize, &str)] = &[
            ("plain", 10, "plain"),
            ("two\nlines", 20, "two lines"),
            ("ok\x1b[1A\x1b[2Kfake", 40, "ok<ESC>[1A<ESC>[2Kfake"),
            ("a\rb", 10, "a<CR>b"),
            ("\u{202e}txt.exe", 20, "<U+202E>txt.exe"),
            ("abcdef\x1b", 3, "abc… (7 chars)"),
            ("ab\x1bcdef", 3, "ab<ESC>… (7 chars)"),
        ];
        for (text, max, shown) in cases {
            assert_eq!(abbreviate(text, *max), *shown, "{text:?}");
        }
    }
}
