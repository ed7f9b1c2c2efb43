#!/usr/bin/env bash
# Builds the documentation book (docs/, an mdBook) into target/book, installing the pinned mdbook
# into ~/.cache/toolgate/tools (or $TOOLGATE_TOOLS_DIR) first if it is missing. The dead-link
# check is a test (crates/toolgate/tests/docs_links.rs); this fails on anything mdbook refuses
# (a missing page, a broken {{#include}}).
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
TOOLS_DIR="${TOOLGATE_TOOLS_DIR:-$HOME/.cache/toolgate/tools}"
MDBOOK="$TOOLS_DIR/bin/mdbook"
if [ "$("$MDBOOK" --version 2>/dev/null || true)" != "mdbook v${MDBOOK_VERSION}" ]; then
  echo "== installing mdbook ${MDBOOK_VERSION} (crates.io, locked) into $TOOLS_DIR"
  # Without the watch and serve features: the build needs neither (and they double its size).
  cargo install mdbook --version "=${MDBOOK_VERSION}" --locked --quiet \
    --no-default-features --features search --root "$TOOLS_DIR"
fi
echo "== $("$MDBOOK" --version): building docs/ into target/book"
"$MDBOOK" build docs
