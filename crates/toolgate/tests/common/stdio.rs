//! A host's stdio session with the real binary: `toolgate ARGS...` run in `dir` with HOME there
//! (default paths stay inside the test), its stderr dropped, the MCP handshake done.

use std::path::Path;
use std::process::Stdio;

use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};

/// A session with `toolgate ARGS...` (which must serve over stdio), run in `dir`.
pub async fn session(dir: &Path, args: &[&str]) -> RunningService<RoleClient, ()> {
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate")).configure(|c| {
        c.args(args)
            .current_dir(dir)
            .env_remove("XDG_DATA_HOME")
            .env("HOME", dir);
    });
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("toolgate starts");
    ().serve(transport)
        .await
        .expect("the server answers initialize")
}

/// A session with `toolgate --config CONFIG serve --stdio --toolset TOOLSET --db DIR/DB_FILE`,
/// run in `dir`.
pub async fn serve_configured(
    dir: &Path,
    config: &Path,
    toolset: &str,
    db_file: &str,
) -> RunningService<RoleClient, ()> {
    let db = dir.join(db_file);
    let (config, db) = (config.to_str().unwrap(), db.to_str().unwrap());
    let args = [
        "--config",
        config,
        "serve",
        "--stdio",
        "--toolset",
        toolset,
        "--db",
        db,
    ];
    session(dir, &args).await
}
