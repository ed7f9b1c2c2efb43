#!/usr/bin/env bash
# The main job on the embedded defaults: set up (packages, model), build, and run the demo: the
# notes assistant's round trip on the sample notebook with the embedded model, step by step,
# then an injected note that asks for the notes to be emailed out, stopped at the approval step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release -p toolgate
exec target/release/toolgate demo "$@"
