#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, then every test in the workspace.
# Needs only the Rust toolchain (cargo, rustfmt, clippy); everything else builds from crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
