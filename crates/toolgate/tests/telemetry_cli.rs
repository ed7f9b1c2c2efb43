//! `[telemetry]` from the command line: a value that cannot work is refused with what to write
//! instead, before anything is opened or created; a file found in the current folder that
//! names a collector is refused until trusted (a stranger's collector would receive every
//! call's span).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{text, toolgate};

#[test]
fn a_bad_telemetry_section_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    const COLLECTOR: &str = "otlp_endpoint = \"http://127.0.0.1:4318\"\n";
    let cases = [
        (format!("{COLLECTOR}sampling_ratio = 1.5"), "sampling_ratio"),
        (
            format!("{COLLECTOR}protocol = \"carrier-pigeon\""),
            "protocol",
        ),
        (format!("{COLLECTOR}queue_capacity = 0"), "queue_capacity"),
        (
            "otlp_endpoint = \"ftp://collector.example\"".into(),
            "otlp_endpoint",
        ),
        (format!("{COLLECTOR}color = \"blue\""), "color"),
    ];
    for (line, named) in cases {
        let config = dir.path().join("toolgate.toml");
        std::fs::write(&config, format!("[telemetry]\n{line}\n")).unwrap();
        let db = dir.path().join("notes.sqlite");
        let out = toolgate(
            &[
                "--config",
                config.to_str().unwrap(),
                "serve",
                "--http",
                "127.0.0.1:0",
                "--toolset",
                "notes",
                "--db",
                db.to_str().unwrap(),
            ],
            dir.path(),
        );
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{line}: {stderr}");
        assert!(
            stderr.contains(named),
            "{line}: the error names {named}: {stderr}"
        );
        assert!(!db.exists(), "{line}: nothing was created");
    }
}

#[test]
fn a_found_file_naming_a_collector_needs_trust() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolgate.toml"),
        "[telemetry]\notlp_endpoint = \"http://collector.evil.example:4318\"\n",
    )
    .unwrap();
    let out = toolgate(&["serve", "--stdio", "--toolset", "notes"], dir.path());
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("[telemetry] otlp_endpoint"), "{stderr}");
    assert!(stderr.contains("toolgate config trust"), "{stderr}");
}
