//! Running the real binary as a user would: in a folder of its own, with HOME pointing there
//! so default paths stay inside the test.
#![allow(dead_code)]

#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../../../toolgate-notes/tests/mail_sink/mod.rs"]
pub mod mail_sink;
pub mod node;
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod notes_mail;
pub mod stdio;
pub mod team;

use std::path::Path;
use std::process::{Command, Output};

pub fn toolgate(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .current_dir(cwd)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", cwd)
        .output()
        .expect("the binary runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes `dir/toolgate.toml` for a server behind `[serve.auth]`: tokens of `issuer` for
/// `resource`, the scope `scope` granting `toolset`, and the egress allowlist the resource
/// server needs to reach the issuer (on 127.0.0.1). Returns the file's path.
pub fn write_auth_config(
    dir: &Path,
    issuer: &str,
    resource: &str,
    scope: &str,
    toolset: &str,
) -> std::path::PathBuf {
    let as_port = issuer.rsplit(':').next().unwrap_or_default();
    let config = dir.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[[egress.allow]]\nhost = \"127.0.0.1\"\nschemes = [\"http\"]\nports = [{as_port}]\n\
             allow_private = true\n\n[serve.auth]\nissuer = \"{issuer}\"\nresource = \"{resource}\"\n\
             [serve.auth.scopes]\n\"{scope}\" = [\"{toolset}\"]\n"
        ),
    )
    .expect("the config file is written");
    config
}

/// RFC 4180 as a spreadsheet reads it: quoted cells may hold commas, quotes (doubled) and
/// line breaks. (Written here so the test reads the file independently of the writer's library.)
pub fn read_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut cell) = (Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, '\r') => {}
            (false, c) => cell.push(c),
        }
    }
    rows
}
