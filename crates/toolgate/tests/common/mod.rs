//! Running the real binary as a user would: in a folder of its own, with HOME pointing there
//! so default paths stay inside the test.
#![allow(dead_code)]

#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../../../toolgate-notes/tests/mail_sink/mod.rs"]
pub mod mail_sink;
pub mod node;
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod notes_mail;
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
