//! `toolgate audit search | show | export`: the decision records, read from the audit the
//! configuration names (the team's shared store, else the SQLite audit file), through the one
//! search API the console uses ([`toolgate_store::audit::AuditStore`]).
//!
//! Guarantees: a filter value outside its closed set (outcome, approval state, time, cursor) is
//! refused with the forms it accepts, before the store is opened; text from a call (principal,
//! tool, arguments) reaches the terminal with its control characters escaped, so a recorded
//! argument cannot drive the terminal; an export holds exactly the rows the same search pages
//! through. Refuses: a SQLite audit file that does not exist (nothing recorded yet).

use std::io::Write;

use toolgate_wiring::audit::query::{AuditFilter, Cursor};
use toolgate_wiring::audit::{AuditEntry, AuditError, AuditStore, CallTree, ExportFormat};

use super::{CommandError, runtime};
use crate::cli::{AuditCommand, AuditFilterArgs, AuditSourceArgs};
use crate::config::Config;

pub fn run(config: &Config, command: AuditCommand) -> Result<(), CommandError> {
    let rt = runtime()?;
    match command {
        AuditCommand::Search {
            filter,
            source,
            limit,
            after,
            json,
        } => {
            let filter = audit_filter(&filter, now_ms())?;
            let after = after
                .map(|a| a.parse::<Cursor>())
                .transpose()
                .map_err(CommandError::Usage)?;
            let store = open(config, &source, &rt)?;
            let page = rt
                .block_on(store.search(&filter, after, limit))
                .map_err(audit_error)?;
            let mut out = std::io::stdout().lock();
            if json {
                let value = serde_json::json!({
                    "entries": page.entries,
                    "next": page.next.map(|c| c.to_string()),
                });
                writeln!(out, "{value}")?;
            } else {
                print_table(&mut out, &page.entries)?;
                match page.next {
                    Some(next) => writeln!(out, "more: --after {next}")?,
                    None => writeln!(out, "({} shown, no more)", page.entries.len())?,
                }
            }
            Ok(())
        }
        AuditCommand::Show {
            call_id,
            run,
            source,
            json,
        } => {
            let store = open(config, &source, &rt)?;
            let tree = rt
                .block_on(store.tree(&call_id, run.as_deref()))
                .map_err(audit_error)?
                .ok_or_else(|| {
                    CommandError::Usage(format!(
                        "no call {} is recorded in {}{}",
                        plain(&call_id),
                        store.shown(),
                        run.map(|r| format!(" (run {})", plain(&r)))
                            .unwrap_or_default()
                    ))
                })?;
            let mut out = std::io::stdout().lock();
            if json {
                writeln!(out, "{}", serde_json::to_string(&tree).unwrap_or_default())?;
            } else {
                if let Some(parent) = &tree.entry.parent_call_id {
                    writeln!(
                        out,
                        "made from inside call {} (toolgate audit show {} --run {})",
                        plain(parent),
                        plain(parent),
                        plain(&tree.entry.run_id)
                    )?;
                }
                print_tree(&mut out, &tree, "", "")?;
            }
            Ok(())
        }
        AuditCommand::Export {
            format,
            output,
            filter,
            source,
        } => {
            let format: ExportFormat = format.parse().map_err(CommandError::Usage)?;
            let filter = audit_filter(&filter, now_ms())?;
            let store = open(config, &source, &rt)?;
            let written = match &output {
                Some(path) => {
                    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
                    rt.block_on(store.export(&filter, format, file))
                }
                None => rt.block_on(store.export(&filter, format, std::io::stdout())),
            }
            .map_err(audit_error)?;
            eprintln!(
                "toolgate: exported {written} records from {}{}",
                store.shown(),
                output
                    .map(|p| format!(" to {}", p.display()))
                    .unwrap_or_default()
            );
            Ok(())
        }
    }
}

fn audit_error(e: AuditError) -> CommandError {
    CommandError::Wiring(e.into())
}

/// The shared store's audit table when `--store` (or `[store] url`, unless `--audit-db` asks
/// for a file) names one; else the SQLite audit file.
fn open(
    config: &Config,
    source: &AuditSourceArgs,
    rt: &tokio::runtime::Runtime,
) -> Result<AuditStore, CommandError> {
    match config.shared_store_url(source.store.as_deref(), source.audit_db.as_deref()) {
        Some(url) => {
            let shared = rt.block_on(toolgate_wiring::SharedStore::connect(&url))?;
            Ok(shared.audit_store())
        }
        None => {
            let path = toolgate_wiring::audit::audit_file(source.audit_db.as_deref())?;
            AuditStore::open_file(&path).map_err(|e| match (&e, &source.audit_db) {
                (AuditError::Open { .. }, None) => CommandError::Usage(format!(
                    "{e}; serve, ask and chat record in audit.sqlite beside the toolset's store \
                     file: pass --audit-db FOLDER/audit.sqlite for a store given with --db"
                )),
                _ => audit_error(e),
            })
        }
    }
}

/// The filter the flags describe, times read relative to `now_ms`.
pub(crate) fn audit_filter(
    args: &AuditFilterArgs,
    now_ms: i64,
) -> Result<AuditFilter, CommandError> {
    let time = |flag: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(|v| {
                parse_time(v, now_ms).map_err(|e| CommandError::Usage(format!("--{flag}: {e}")))
            })
            .transpose()
    };
    Ok(AuditFilter {
        principal: args.principal.clone(),
        tenant: args.tenant.clone(),
        tool: args.tool.clone(),
        run_id: args.run.clone(),
        outcome: args
            .outcome
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: String| CommandError::Usage(format!("--outcome: {e}")))?,
        approval: args
            .approval
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: String| CommandError::Usage(format!("--approval: {e}")))?,
        decided_by: args.decided_by.clone(),
        since_ms: time("since", &args.since)?,
        until_ms: time("until", &args.until)?,
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A time as Unix milliseconds: `YYYY-MM-DD` (midnight UTC), `YYYY-MM-DDTHH:MM[:SS]Z`, Unix
/// milliseconds, or a span back from `now_ms` (`30m`, `24h`, `7d`).
pub(crate) fn parse_time(text: &str, now_ms: i64) -> Result<i64, String> {
    let refused = || {
        format!(
            "{text:?} is not a time: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS]Z (UTC), Unix milliseconds, \
             or a span back from now (30m, 24h, 7d)"
        )
    };
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    if let Some(unit_ms) = match text.chars().last() {
        Some('m') => Some(60_000),
        Some('h') => Some(3_600_000),
        Some('d') => Some(86_400_000),
        _ => None,
    } && let Ok(count) = text[..text.len() - 1].parse::<i64>()
        && count >= 0
    {
        return count
            .checked_mul(unit_ms)
            .map(|span| now_ms - span)
            .ok_or_else(refused);
    }
    let (date, clock) = match text.split_once('T') {
        Some((date, clock)) => (date, Some(clock.strip_suffix('Z').ok_or_else(refused)?)),
        None => (text, None),
    };
    let numbers = |s: &str, sep: char| -> Option<Vec<i64>> {
        s.split(sep).map(|p| p.parse::<i64>().ok()).collect()
    };
    let ymd = numbers(date, '-')
        .filter(|v| v.len() == 3)
        .ok_or_else(refused)?;
    let (year, month, day) = (ymd[0], ymd[1], ymd[2]);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(refused());
    }
    let hms = match clock {
        None => vec![0, 0, 0],
        Some(clock) => {
            let mut v = numbers(clock, ':')
                .filter(|v| v.len() == 2 || v.len() == 3)
                .ok_or_else(refused)?;
            v.resize(3, 0);
            v
        }
    };
    if !(0..24).contains(&hms[0]) || !(0..60).contains(&hms[1]) || !(0..61).contains(&hms[2]) {
        return Err(refused());
    }
    // Howard Hinnant's days-from-civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(((days * 86_400) + hms[0] * 3600 + hms[1] * 60 + hms[2]) * 1000)
}

/// `text` with control characters escaped (a recorded value must not drive the terminal).
pub(crate) fn plain(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn print_table(out: &mut impl Write, entries: &[AuditEntry]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24}  {:<16}  {:<22}  {:<18}  {:<12}  CALL (RUN)",
        "TIME (UTC)", "PRINCIPAL", "TOOL", "OUTCOME", "APPROVAL"
    )?;
    for e in entries {
        writeln!(out, "{}", line(e))?;
    }
    Ok(())
}

fn line(e: &AuditEntry) -> String {
    let approval = match (&e.denial, &e.decided_by) {
        (Some(denial), _) if e.approval == "denied" => format!("denied: {}", plain(denial)),
        (_, Some(by)) => format!("{} by {}", e.approval, plain(by)),
        _ => e.approval.clone(),
    };
    format!(
        "{:<24}  {:<16}  {:<22}  {:<18}  {:<12}  {} ({})",
        toolgate_wiring::audit::export::utc_time(e.time_unix_ms),
        plain(&e.principal),
        plain(&e.tool),
        plain(&e.outcome),
        approval,
        plain(&e.call_id),
        plain(&e.run_id)
    )
}

fn print_tree(
    out: &mut impl Write,
    tree: &CallTree,
    lead: &str,
    rest: &str,
) -> std::io::Result<()> {
    let e = &tree.entry;
    writeln!(
        out,
        "{lead}{}  [{}, origin {}]",
        line(e),
        e.id,
        plain(&e.origin)
    )?;
    // Arguments as compact JSON: its escaping already keeps control characters out.
    writeln!(
        out,
        "{rest}    arguments: {}",
        e.record.get("arguments").cloned().unwrap_or_default()
    )?;
    for (i, child) in tree.children.iter().enumerate() {
        let last = i + 1 == tree.children.len();
        let (branch, under) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        print_tree(
            out,
            child,
            &format!("{rest}{branch}"),
            &format!("{rest}{under}"),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_each_form_and_refusals() {
        let now = 1_800_000_000_000;
        let cases: [(&str, Result<i64, ()>); 12] = [
            ("1700000000000", Ok(1_700_000_000_000)),
            ("1970-01-01", Ok(0)),
            ("2000-02-29", Ok(951_782_400_000)),
            ("2026-12-05T11:59:59Z", Ok(1_796_471_999_000)),
            ("2026-12-05T11:59Z", Ok(1_796_471_940_000)),
            ("30m", Ok(now - 1_800_000)),
            ("24h", Ok(now - 86_400_000)),
            ("7d", Ok(now - 604_800_000)),
            ("2026-13-01", Err(())),
            ("2026-12-05T11:59:59", Err(())),
            ("yesterday", Err(())),
            ("-3d", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_time(text, now).map_err(|_| ()), expected, "{text}");
        }
    }

    #[test]
    fn control_characters_are_escaped_for_the_terminal() {
        assert_eq!(plain("alice"), "alice");
        assert_eq!(plain("a\u{1b}[31mred"), "a\\u{1b}[31mred");
        assert_eq!(plain("two\nlines"), "two\\nlines");
    }

    #[test]
    fn flags_become_the_filter_and_bad_values_are_refused() {
        let args = AuditFilterArgs {
            principal: Some("alice".into()),
            outcome: Some("approval_denied".into()),
            approval: Some("declined".into()),
            since: Some("1d".into()),
            ..Default::default()
        };
        let filter = audit_filter(&args, 86_400_000 * 2).unwrap();
        assert_eq!(filter.principal.as_deref(), Some("alice"));
        assert_eq!(filter.since_ms, Some(86_400_000));
        assert!(filter.outcome.is_some() && filter.approval.is_some());
        for bad in [
            AuditFilterArgs {
                outcome: Some("fine".into()),
                ..Default::default()
            },
            AuditFilterArgs {
                approval: Some("maybe".into()),
                ..Default::default()
            },
            AuditFilterArgs {
                until: Some("soon".into()),
                ..Default::default()
            },
        ] {
            assert!(
                matches!(audit_filter(&bad, 0), Err(CommandError::Usage(_))),
                "{bad:?}"
            );
        }
    }
}
