#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up (scripts/setup.sh: build packages and the verified
# embedded model), formatting, lints, the documentation book (scripts/docs.sh), then every test
# in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# A clean clone builds everything once: incremental state (2.6 GB) would only take disk.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== the documentation book (mdbook)"
bash scripts/docs.sh
echo "== cargo test"
cargo test --workspace --locked
