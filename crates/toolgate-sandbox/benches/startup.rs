//! Sandbox start-up overhead: a trivial script (`pass`) run many times through the whole
//! sandbox (bubblewrap, the init's rlimits, Landlock and seccomp, the bridge), against the same
//! interpreter started directly, measured in the same run; and the cost of one tool call over
//! the bridge. `cargo bench -p toolgate-sandbox --bench startup [-- RUNS]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use toolgate_core::CancelToken;
use toolgate_sandbox::{InitProgram, Job, NoTools, Sandbox, SandboxConfig};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn summary(name: &str, mut times: Vec<Duration>, baseline: Option<Duration>) -> Duration {
    times.sort();
    let median = percentile(&times, 0.5);
    let p99 = percentile(&times, 0.99);
    let ratio = baseline
        .map(|b| format!("{:.1}x", median.as_secs_f64() / b.as_secs_f64()))
        .unwrap_or_else(|| "1.0x".to_owned());
    println!(
        "| {name} | {} | {:.1} | {:.1} | {ratio} |",
        times.len(),
        median.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    median
}

fn main() {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = SandboxConfig::new(InitProgram {
        path: PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-init")),
        args: Vec::new(),
    });
    let sandbox = Sandbox::new(config).expect("bubblewrap and /usr/bin/python3 (scripts/setup.sh)");
    let work = tempfile::tempdir().unwrap();
    let job = |script: &str| Job {
        script: script.to_owned(),
        tools_module: toolgate_sandbox::python::tools_module(
            &[],
            toolgate_sandbox::python::Paging::ByPage,
        ),
        data: None,
        work: work.path().to_owned(),
        cancel: CancelToken::new(),
    };

    println!("| what | runs | median ms | p99 ms | ratio to plain python |");
    println!("| --- | --- | --- | --- | --- |");
    let mut plain = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let status = std::process::Command::new("/usr/bin/python3")
            .args(["-E", "-s", "-B", "-c", "pass"])
            .status()
            .unwrap();
        assert!(status.success());
        plain.push(t.elapsed());
    }
    let baseline = summary("python3 -c pass, no sandbox", plain, None);

    let trivial = job("pass\n");
    let mut sandboxed = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let report = rt.block_on(sandbox.run(&trivial, &NoTools)).unwrap();
        assert_eq!(report.exit_code, Some(0), "{report:?}");
        sandboxed.push(t.elapsed());
    }
    summary("trivial script in the sandbox", sandboxed, Some(baseline));

    let imported = job("import toolgate_tools\n");
    let mut with_module = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let report = rt.block_on(sandbox.run(&imported, &NoTools)).unwrap();
        assert_eq!(report.exit_code, Some(0), "{report:?}");
        with_module.push(t.elapsed());
    }
    summary(
        "same, importing the tools module",
        with_module,
        Some(baseline),
    );

    // One bridge round trip: 1,000 calls in one script, less the empty script, per call.
    let calls = 1000;
    let script = format!(
        "import toolgate_tools as t\nfor _ in range({calls}):\n    try:\n        t.call('nothing')\n    except t.ToolError:\n        pass\n"
    );
    let mut sandbox_config = sandbox.config().clone();
    sandbox_config.limits.tool_calls = calls + 1;
    let many = Sandbox::new(sandbox_config).unwrap();
    let t = Instant::now();
    let report = rt.block_on(many.run(&job(&script), &NoTools)).unwrap();
    let total = t.elapsed();
    assert_eq!(report.tool_calls, calls, "{report:?}");
    println!(
        "\none bridge round trip (a refused call, {calls} in one script): {:.1} µs",
        total.as_secs_f64() * 1e6 / calls as f64
    );
}
