#!/usr/bin/env bash
# The main job on the embedded defaults: set up (packages, model), build, and ask the embedded
# model a question about the book catalogue through the books-v2 tools. Pass another question
# as arguments to ask that instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release -p toolgate
question="${*:-How many books by Suzanne Collins are in the list?}"
exec target/release/toolgate ask --toolset books-v2 "$question"
