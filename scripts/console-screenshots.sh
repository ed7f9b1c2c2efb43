#!/usr/bin/env bash
# Saves screenshots of the web console into docs/images/ (or the folder given): the approval
# inbox with a call waiting (console-inbox.png), that call's ticket page (console-ticket.png),
# an audit search (console-audit-search.png) and a code_execution call's page in the audit with its nested calls as a tree
# (console-audit-tree.png). They come from the real thing: the browser test
# crates/toolgate/tests/console_audit.rs (toolgate serve --http, oidc-provider's sign-in, an MCP
# client, the sandbox, headless chromium) saves them as it walks, when TOOLGATE_SCREENSHOTS
# names a folder. Needs what scripts/setup.sh installs (chromium, Node, playwright-core,
# oidc-provider, aiosmtpd, bubblewrap).
#
#   scripts/console-screenshots.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/images}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
TOOLGATE_SCREENSHOTS="$out" cargo test -p toolgate --test console_audit -- --nocapture
ls -l "$out"/console-inbox.png "$out"/console-ticket.png "$out"/console-audit-search.png "$out"/console-audit-tree.png
