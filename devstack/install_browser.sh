#!/usr/bin/env bash
# Installs Debian's Chromium and its driver for the browser tests of the UI view.
# A fresh machine has neither; apt is the only source (no browser downloads).
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "chromium and chromedriver are needed for the browser tests; install them" \
        "with your system's package manager (Debian: chromium chromium-driver)" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
echo "==> installing Debian's chromium and chromium-driver for the browser tests"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver >/dev/null
