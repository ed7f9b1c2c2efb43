//! `toolgate receipts keygen|verify`: make a receipt signing key, and check signed receipts.
//!
//! `verify` reads one receipt (JSON), or JSON lines of receipts, from a file or standard input;
//! a line may also be a decision record or an audit export entry holding a receipt (`receipt`
//! or `record.receipt`), and entries without one (reads) are skipped. It prints one line per
//! receipt, verified or failed and why, and exits 1 when any failed, 2 when the input or the
//! keys could not be used at all.

use std::io::Read as _;
use std::path::Path;

use serde_json::Value;
use toolgate_core::receipt_keys;
use toolgate_core::receipt_signing::{KeyRing, SignedReceipt, VerifyError, verify};

use super::CommandError;
use crate::cli::ReceiptsCommand;
use crate::config::Config;

/// The exit status of input that is not receipts at all, or of no keys to verify with.
const BAD_INPUT: i32 = 2;

pub fn run(config: &Config, command: ReceiptsCommand) -> Result<(), CommandError> {
    match command {
        ReceiptsCommand::Keygen { out } => keygen(&out),
        ReceiptsCommand::Verify { file, keys } => {
            let status = verify_file(config, &file, &keys);
            if status != 0 {
                // 1 (a receipt failed) and 2 (bad input) must stay apart for scripts.
                std::process::exit(status);
            }
            Ok(())
        }
    }
}

fn keygen(out: &Path) -> Result<(), CommandError> {
    let signer = receipt_keys::write_new_key(out).map_err(crate::config::ConfigError::from)?;
    println!("key id: {}", signer.key_id());
    println!("public key: {}", signer.public_key_base64());
    println!(
        "wrote {} (mode 0600) and {}",
        out.display(),
        receipt_keys::public_key_path(out).display()
    );
    println!(
        "sign with it: [receipts] signing_key = \"{}\"",
        out.display()
    );
    Ok(())
}

/// Verifies every receipt in `file` (`-`: standard input); returns the exit status.
fn verify_file(config: &Config, file: &Path, keys: &[String]) -> i32 {
    let ring = match key_ring(config, keys) {
        Ok(ring) if !ring.is_empty() => ring,
        Ok(_) => {
            eprintln!(
                "toolgate: no keys to verify with: set [receipts] signing_key or verify_keys, or pass --key PUBLIC_KEY_OR_FILE"
            );
            return BAD_INPUT;
        }
        Err(e) => {
            eprintln!("toolgate: {e}");
            return BAD_INPUT;
        }
    };
    let text = match read_input(file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("toolgate: cannot read {}: {e}", file.display());
            return BAD_INPUT;
        }
    };
    let entries = match entries(&text) {
        Ok(entries) if !entries.is_empty() => entries,
        Ok(_) => {
            eprintln!("toolgate: {} holds no receipt", file.display());
            return BAD_INPUT;
        }
        Err(e) => {
            eprintln!("toolgate: {} is not JSON: {e}", file.display());
            return BAD_INPUT;
        }
    };
    let mut failed = 0usize;
    let mut checked = 0usize;
    for (n, entry) in entries.iter().enumerate() {
        let Some(receipt) = receipt_of(entry) else {
            continue;
        };
        checked += 1;
        match parse(receipt).and_then(|r| verify(&r, &ring).map(|v| (r, v))) {
            Ok((r, _)) => println!(
                "receipt {}: verified: {} v{} for {}/{} at unix {} (key {})",
                n + 1,
                r.tool,
                r.version,
                r.principal.tenant,
                r.principal.id,
                r.time_unix,
                r.key_id
            ),
            Err(e) => {
                failed += 1;
                println!("receipt {}: failed: {e}", n + 1);
            }
        }
    }
    if checked == 0 {
        eprintln!("toolgate: {} holds no receipt", file.display());
        return BAD_INPUT;
    }
    i32::from(failed > 0)
}

fn key_ring(config: &Config, keys: &[String]) -> Result<KeyRing, CommandError> {
    if keys.is_empty() {
        return Ok(config.receipt_key_ring()?);
    }
    let mut ring = KeyRing::new();
    for key in keys {
        receipt_keys::add_verify_entry(&mut ring, key).map_err(crate::config::ConfigError::from)?;
    }
    Ok(ring)
}

fn read_input(file: &Path) -> std::io::Result<String> {
    if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(file)
    }
}

/// One JSON document (a pretty-printed receipt), else JSON lines.
fn entries(text: &str) -> Result<Vec<Value>, serde_json::Error> {
    if let Ok(one) = serde_json::from_str::<Value>(text) {
        return Ok(vec![one]);
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect()
}

/// The receipt an entry holds: the entry itself, or a decision record's or an audit entry's
/// receipt; `None` for a record without one (a read).
fn receipt_of(entry: &Value) -> Option<&Value> {
    let record = entry.get("record").unwrap_or(entry);
    if entry.get("signature").is_some() || entry.get("format").is_some() {
        return Some(entry);
    }
    if let Some(receipt) = record.get("receipt") {
        return Some(receipt);
    }
    // Not a record at all: checked, and refused as not a receipt.
    let is_record = record.get("gen_ai.tool.name").is_some();
    (!is_record).then_some(entry)
}

fn parse(value: &Value) -> Result<SignedReceipt, VerifyError> {
    serde_json::from_value(value.clone()).map_err(|e| VerifyError::Malformed(e.to_string()))
}
