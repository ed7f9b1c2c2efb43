//! `otlp-receiver`: the OTLP receiver as a program, the collector of
//! `scripts/bench-telemetry.sh`.
//!
//! Usage: `otlp-receiver [--limit-secs S] [--delay-ms MS]`.
//!
//! Contract:
//! - Starts a [`Receiver`] (both listeners on 127.0.0.1, ephemeral ports) and prints one line
//!   on stdout, `http=http://127.0.0.1:PORT grpc=http://127.0.0.1:PORT`, once both listen.
//! - Runs until SIGTERM, SIGINT, end of its stdin, or `--limit-secs` (default 900) have passed,
//!   whichever comes first; then stops the listeners and prints one last line on stdout:
//!   `stopped=WHY spans_http=N spans_grpc=N trace_requests_http=N trace_requests_grpc=N
//!   requests_http=N requests_grpc=N toolgate_dropped=N|-`. `requests_*` counts every export
//!   request over that transport (traces and metrics, whatever the answer);
//!   `toolgate_dropped` is the last value received of the `toolgate.telemetry.spans.dropped`
//!   counter (`-` when none arrived).
//! - `--delay-ms` waits that long before answering each export: a slow collector.
//! - Exits 0 after printing the counts, 2 on a bad flag, 1 when the receiver could not start.
//!   Everything received is held in memory until exit: one receiver per measured run.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use toolgate_otlp_receiver::{PointValue, Receiver, ReceiverOptions, Transport};

/// The counter toolgate exports its dropped spans as.
const DROPPED_METRIC: &str = "toolgate.telemetry.spans.dropped";

#[derive(Debug, PartialEq)]
struct Flags {
    limit: Duration,
    delay: Duration,
}

/// `--limit-secs S` and `--delay-ms MS`, each at most once, in any order.
fn parse_flags(args: &[String]) -> Result<Flags, String> {
    let mut flags = Flags {
        limit: Duration::from_secs(900),
        delay: Duration::ZERO,
    };
    let (mut limit_seen, mut delay_seen) = (false, false);
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let (seen, parse): (&mut bool, fn(u64) -> Duration) = match flag.as_str() {
            "--limit-secs" => (&mut limit_seen, Duration::from_secs),
            "--delay-ms" => (&mut delay_seen, Duration::from_millis),
            other => return Err(format!("unknown argument '{other}'")),
        };
        if *seen {
            return Err(format!("{flag} given twice"));
        }
        *seen = true;
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} takes a whole number, not '{value}'"))?;
        let duration = parse(number);
        if flag == "--limit-secs" {
            if number == 0 {
                return Err("--limit-secs must be at least 1".to_string());
            }
            flags.limit = duration;
        } else {
            flags.delay = duration;
        }
    }
    Ok(flags)
}

/// Why the receiver stopped.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Signal,
    StdinClosed,
    Limit,
}

impl Stop {
    fn as_str(self) -> &'static str {
        match self {
            Stop::Signal => "signal",
            Stop::StdinClosed => "stdin-closed",
            Stop::Limit => "limit",
        }
    }
}

/// Waits for the first of SIGTERM, SIGINT, end of stdin and the limit.
fn wait_for_stop(limit: Duration) -> std::io::Result<Stop> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let (closed_tx, closed) = tokio::sync::oneshot::channel::<()>();
        // A blocking read on a thread of its own; it ends with the process if stdin never does.
        std::thread::Builder::new()
            .name("stdin-watch".to_string())
            .spawn(move || {
                let mut lines = std::io::stdin().lock().lines();
                while let Some(Ok(_)) = lines.next() {}
                let _ = closed_tx.send(());
            })?;
        Ok(tokio::select! {
            _ = term.recv() => Stop::Signal,
            _ = int.recv() => Stop::Signal,
            _ = closed => Stop::StdinClosed,
            () = tokio::time::sleep(limit) => Stop::Limit,
        })
    })
}

/// The last value of toolgate's dropped-span counter among the metrics received.
fn last_dropped(receiver: &Receiver) -> Option<i64> {
    receiver
        .metrics()
        .iter()
        .filter(|metric| metric.name == DROPPED_METRIC)
        .flat_map(|metric| metric.data_points.iter())
        .max_by_key(|point| point.time_unix_nanos)
        .and_then(|point| match point.value {
            PointValue::Int(value) => Some(value),
            // A double counter from another SDK: whole spans all the same.
            PointValue::Double(value) => Some(value as i64),
            PointValue::Distribution { .. } | PointValue::Missing => None,
        })
}

fn counts_line(receiver: &Receiver, stop: Stop) -> String {
    let (mut spans_http, mut spans_grpc) = (0usize, 0usize);
    for span in receiver.spans() {
        match span.transport {
            Transport::Http => spans_http += 1,
            Transport::Grpc => spans_grpc += 1,
        }
    }
    let (mut traces_http, mut traces_grpc) = (0usize, 0usize);
    for (transport, _) in receiver.trace_requests() {
        match transport {
            Transport::Http => traces_http += 1,
            Transport::Grpc => traces_grpc += 1,
        }
    }
    let dropped = last_dropped(receiver).map_or_else(|| "-".to_string(), |n| n.to_string());
    format!(
        "stopped={} spans_http={spans_http} spans_grpc={spans_grpc} \
         trace_requests_http={traces_http} trace_requests_grpc={traces_grpc} \
         requests_http={} requests_grpc={} toolgate_dropped={dropped}",
        stop.as_str(),
        receiver.request_counts(Transport::Http).total(),
        receiver.request_counts(Transport::Grpc).total(),
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flags = match parse_flags(&args) {
        Ok(flags) => flags,
        Err(why) => {
            eprintln!(
                "otlp-receiver: {why}\nusage: otlp-receiver [--limit-secs S] [--delay-ms MS]"
            );
            return ExitCode::from(2);
        }
    };
    let mut receiver = match Receiver::start(ReceiverOptions::default().with_delay(flags.delay)) {
        Ok(receiver) => receiver,
        Err(e) => {
            eprintln!("otlp-receiver: could not start: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    // The reader may be gone already; the receiver serves all the same until told to stop.
    let _ = writeln!(
        out,
        "http={} grpc={}",
        receiver.http_endpoint(),
        receiver.grpc_endpoint()
    );
    let _ = out.flush();
    let stop = match wait_for_stop(flags.limit) {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("otlp-receiver: could not wait for a stop ({e}); stopping now");
            Stop::Signal
        }
    };
    receiver.stop();
    let _ = writeln!(out, "{}", counts_line(&receiver, stop));
    let _ = out.flush();
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn flags_parse_and_a_typo_is_refused_not_ignored() {
        let ok: &[(&[&str], u64, u64)] = &[
            (&[], 900, 0),
            (&["--limit-secs", "5"], 5, 0),
            (&["--delay-ms", "250", "--limit-secs", "60"], 60, 250),
        ];
        for (given, limit, delay) in ok {
            assert_eq!(
                parse_flags(&args(given)),
                Ok(Flags {
                    limit: Duration::from_secs(*limit),
                    delay: Duration::from_millis(*delay),
                }),
                "{given:?}"
            );
        }
        let refused: &[&[&str]] = &[
            &["--limit"],
            &["--limit-secs"],
            &["--limit-secs", "0"],
            &["--limit-secs", "-3"],
            &["--delay-ms", "1.5"],
            &["--limit-secs", "5", "--limit-secs", "6"],
            &["extra"],
        ];
        for given in refused {
            assert!(parse_flags(&args(given)).is_err(), "{given:?}");
        }
    }
}
