//! `toolgate tools`: the risk table, the model views, and what they cost in tokens; with
//! `--check`, every tool's examples run on a fresh store as contract tests.

use serde_json::{Value, json};
use toolgate_core::{CallRequest, Principal, ToolSpec};
use toolgate_eval::tokens;
use toolgate_wiring::examples::{self, ExampleReport, Verdict};
use toolgate_wiring::{Seat, ToolsetName};

use std::path::Path;
use std::sync::Arc;

use toolgate_core::trace::NoTrace;
use toolgate_mcp_client::imports::Imports;

use super::mcp::{TOOL_HEADER, open_imports, server_heading, tool_rows};
use super::{CommandError, open_store, runtime};
use crate::cli::{OutputFormat, ToolsArgs};
use crate::config::Config;
use crate::table;

/// Calls whose result sizes are reported for each toolset: the v1 full listing against the
/// v2 (v3, v4) searches that answer the same questions.
fn measured_calls(toolset: ToolsetName) -> Vec<(&'static str, Value)> {
    match toolset {
        ToolsetName::Notes => vec![
            ("notes_search", json!({"query": "design team budget"})),
            (
                "notes_search",
                json!({"query": "design team budget", "response_format": "detailed"}),
            ),
            ("notes_get", json!({"note_id": 5})),
        ],
        ToolsetName::NotesV2
        | ToolsetName::NotesV3
        | ToolsetName::NotesV4
        | ToolsetName::NotesV5
        | ToolsetName::NotesV6
        | ToolsetName::NotesV7
        | ToolsetName::NotesV8
        | ToolsetName::NotesV9
        | ToolsetName::NotesV10 => vec![
            ("notes_search", json!({"query": "design team budget"})),
            ("notes_get", json!({"note_id": 5})),
        ],
        ToolsetName::BooksV1 => vec![("list_items", json!({})), ("get_item", json!({"id": 1}))],
        ToolsetName::BooksV2 | ToolsetName::BooksV3 => vec![
            ("books_search", json!({})),
            ("books_search", json!({"author": "Rowling"})),
            (
                "books_search",
                json!({"author": "Rowling", "response_format": "detailed"}),
            ),
            ("books_get", json!({"ids": [1]})),
        ],
        // books-v4 has no books_get and no response_format.
        ToolsetName::BooksV4 | ToolsetName::BooksV5 | ToolsetName::BooksV6 => vec![
            ("books_search", json!({})),
            ("books_search", json!({"author": "Rowling"})),
        ],
    }
}

struct Report {
    toolset: &'static str,
    digest: String,
    specs: Vec<ToolSpec>,
    definition_tokens: usize,
    results: Vec<(String, usize)>,
}

pub fn run(
    config: &Config,
    mcp_config: Option<&Path>,
    args: &ToolsArgs,
) -> Result<(), CommandError> {
    let toolsets: Vec<ToolsetName> = match args.toolset {
        Some(one) => vec![one],
        None => ToolsetName::ALL.to_vec(),
    };
    if args.check {
        return check(&toolsets, args.format);
    }
    // Measure on the given database, or on fresh ones that disappear afterwards.
    let scratch = tempfile::tempdir()?;
    let rt = runtime()?;
    let mut reports = Vec::new();
    for toolset in toolsets {
        let db = match &args.db {
            Some(path) => path.clone(),
            None => scratch.path().join(format!("{toolset}.sqlite")),
        };
        let store = open_store(toolset.store(), &db)?;
        let seat = Seat::new(Principal::local("toolgate-cli", &[]));
        let ready = toolgate_wiring::dispatcher(toolset, &store, &config.exits(), seat)?;
        let (registry, dispatcher) = (&ready.registry, &ready.caller);
        let specs: Vec<ToolSpec> = registry.specs().cloned().collect();
        let views: Vec<_> = specs.iter().map(ToolSpec::model_view).collect();
        let mut results = Vec::new();
        for (tool, arguments) in measured_calls(toolset) {
            let shown = format!("{tool} {arguments}");
            let request =
                CallRequest::new(ready.principal.clone(), "tools-measure", tool, arguments);
            let outcome = rt.block_on(dispatcher.call(request));
            if outcome.is_error() {
                return Err(CommandError::Measurement {
                    call: shown,
                    message: outcome.model_text(),
                });
            }
            results.push((shown, tokens::count(&outcome.model_text())));
        }
        reports.push(Report {
            toolset: toolset.as_str(),
            digest: registry.digest().to_string(),
            definition_tokens: tokens::count_definitions(&views),
            specs,
            results,
        });
    }
    let imports = rt.block_on(open_imports(config, mcp_config, Arc::new(NoTrace)))?;
    match args.format {
        OutputFormat::Table => {
            print!("{}", render_table(&reports, args.schema));
            if let Some(imports) = &imports {
                // Imported names and reasons come from the servers: shown visibly.
                let table = render_imported_table(imports);
                print!("{}", toolgate_core::display::visible(&table));
            }
        }
        OutputFormat::Markdown => {
            print!("{}", render_markdown(&reports));
            if let Some(imports) = &imports {
                let table = render_imported_table(imports);
                print!("\n{}", toolgate_core::display::visible(&table));
            }
        }
        OutputFormat::Json => {
            let mut value = render_json(&reports, args.schema);
            if let Some(imports) = &imports {
                value["imported"] = render_imported_json(imports);
            }
            println!(
                "{}",
                serde_json::to_string_pretty(&value).unwrap_or_default()
            );
        }
    }
    if let Some(imports) = imports {
        rt.block_on(imports.close());
    }
    Ok(())
}

/// `toolgate tools --check`: every example of every tool of `toolsets`, run on a fresh store
/// ([`toolgate_wiring::examples`]); an error when any fails.
fn check(toolsets: &[ToolsetName], format: OutputFormat) -> Result<(), CommandError> {
    let scratch = tempfile::tempdir()?;
    let rt = runtime()?;
    let mut reports = Vec::new();
    for &toolset in toolsets {
        let examples = rt.block_on(examples::check_toolset(toolset, scratch.path()))?;
        reports.push((toolset, examples));
    }
    match format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&render_check_json(&reports)).unwrap_or_default()
        ),
        OutputFormat::Table | OutputFormat::Markdown => print!("{}", render_check(&reports)),
    }
    let failed: usize = reports
        .iter()
        .map(|(_, r)| r.iter().filter(|e| !e.passed()).count())
        .sum();
    if failed == 0 {
        Ok(())
    } else {
        Err(CommandError::ChecksFailed(format!(
            "{failed} example(s) failed: see the lines marked FAILED above"
        )))
    }
}

fn render_check(reports: &[(ToolsetName, Vec<ExampleReport>)]) -> String {
    let mut out = String::new();
    for (toolset, examples) in reports {
        let passed = examples.iter().filter(|e| e.passed()).count();
        out.push_str(&format!(
            "{toolset}: {passed} of {} examples passed\n",
            examples.len()
        ));
        for e in examples {
            match &e.verdict {
                Verdict::Passed => {
                    out.push_str(&format!("  passed  {} ({})\n", e.tool, e.label));
                }
                Verdict::Failed(why) => out.push_str(&format!(
                    "  FAILED  {} ({}): {}\n",
                    e.tool,
                    e.label,
                    why.join("; ")
                )),
            }
        }
        out.push('\n');
    }
    out
}

fn render_check_json(reports: &[(ToolsetName, Vec<ExampleReport>)]) -> Value {
    let toolsets: Vec<Value> = reports
        .iter()
        .map(|(toolset, examples)| {
            let examples: Vec<Value> = examples
                .iter()
                .map(|e| {
                    let why = match &e.verdict {
                        Verdict::Passed => Vec::new(),
                        Verdict::Failed(why) => why.clone(),
                    };
                    json!({"tool": e.tool, "label": e.label, "passed": e.passed(), "problems": why})
                })
                .collect();
            json!({"name": toolset.as_str(), "examples": examples})
        })
        .collect();
    json!({ "toolsets": toolsets })
}

/// The definition tokens of the offered imported tools.
fn imported_definition_tokens(imports: &Imports) -> usize {
    let views: Vec<_> = imports.tools.iter().map(|t| t.spec.model_view()).collect();
    tokens::count_definitions(&views)
}

fn render_imported_table(imports: &Imports) -> String {
    let mut out = format!(
        "imported from MCP servers: {} tools offered, definitions cost {} tokens in every request\n\n",
        imports.tools.len(),
        imported_definition_tokens(imports)
    );
    for server in &imports.servers {
        out.push_str(&server_heading(server));
        out.push('\n');
        out.push_str(&table::render(&TOOL_HEADER, &tool_rows(server), 140));
        out.push('\n');
    }
    out
}

fn render_imported_json(imports: &Imports) -> Value {
    let servers: Vec<Value> = imports
        .servers
        .iter()
        .map(|server| {
            let tools: Vec<Value> = tool_rows(server)
                .into_iter()
                .map(|row| {
                    json!({"name": row[0], "remote_name": row[1], "risk": row[2], "effect": row[3],
                           "risk_from": row[4], "state": row[5]})
                })
                .collect();
            json!({
                "name": server.given_name,
                "namespace": server.namespace,
                "connected": server.connected.is_ok(),
                "error": server.connected.as_ref().err().map(ToString::to_string),
                "tools": tools,
            })
        })
        .collect();
    json!({"definition_tokens": imported_definition_tokens(imports), "servers": servers})
}

fn render_table(reports: &[Report], with_schema: bool) -> String {
    let mut out = String::new();
    for r in reports {
        out.push_str(&format!(
            "{}: {} tools, catalogue digest {}, definitions cost {} tokens in every request\n\n",
            r.toolset,
            r.specs.len(),
            &r.digest[..16.min(r.digest.len())],
            r.definition_tokens
        ));
        let rows: Vec<Vec<String>> = r
            .specs
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    s.policy.risk.as_str().into(),
                    s.policy.effect.as_str().into(),
                    s.policy.reason.clone(),
                ]
            })
            .collect();
        out.push_str(&table::render(
            &["TOOL", "RISK", "EFFECT", "REASON"],
            &rows,
            100,
        ));
        out.push_str("\nresult sizes on the catalogue (o200k_base tokens):\n");
        for (call, n) in &r.results {
            out.push_str(&format!("  {n:>6}  {call}\n"));
        }
        if with_schema {
            out.push_str("\nmodel views:\n");
            for s in &r.specs {
                let view = serde_json::to_string_pretty(&s.model_view()).unwrap_or_default();
                out.push_str(&format!("{view}\n"));
            }
        }
        out.push('\n');
    }
    out
}

/// The risk table as one Markdown table over every reported toolset (the book's risk table is
/// this output, checked by a test, never kept by hand).
fn render_markdown(reports: &[Report]) -> String {
    let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from(
        "| toolset | tool | risk | effect | reason |\n| --- | --- | --- | --- | --- |\n",
    );
    for r in reports {
        for s in &r.specs {
            out.push_str(&format!(
                "| {} | `{}` | {} | {} | {} |\n",
                r.toolset,
                cell(&s.name),
                s.policy.risk.as_str(),
                s.policy.effect.as_str(),
                cell(&s.policy.reason)
            ));
        }
    }
    out
}

fn render_json(reports: &[Report], with_schema: bool) -> Value {
    let toolsets: Vec<Value> = reports
        .iter()
        .map(|r| {
            let tools: Vec<Value> = r
                .specs
                .iter()
                .map(|s| {
                    let mut tool = json!({
                        "name": s.name,
                        "version": s.version,
                        "risk": s.policy.risk,
                        "reason": s.policy.reason,
                        "effect": s.policy.effect,
                        "scopes": s.policy.scopes,
                        "parallel_safe": s.executor.parallel_safe,
                        "deadline_ms": s.executor.deadline.as_millis() as u64,
                        "max_output_bytes": s.observation.max_bytes,
                        "definition_tokens": tokens::count_json(&serde_json::to_value(s.model_view()).unwrap_or(Value::Null)),
                    });
                    if with_schema {
                        tool["model_view"] = serde_json::to_value(s.model_view()).unwrap_or(Value::Null);
                    }
                    tool
                })
                .collect();
            let results: Vec<Value> = r
                .results
                .iter()
                .map(|(call, n)| json!({"call": call, "tokens": n}))
                .collect();
            json!({
                "name": r.toolset,
                "catalogue_digest": r.digest,
                "definition_tokens": r.definition_tokens,
                "tools": tools,
                "result_tokens": results,
            })
        })
        .collect();
    json!({ "tokenizer": "o200k_base", "toolsets": toolsets })
}
