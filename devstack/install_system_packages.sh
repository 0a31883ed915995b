#!/usr/bin/env bash
# Installs the Debian packages some tests need and a fresh machine lacks; apt is
# the only source (no downloads from elsewhere).
#
# - chromium, chromium-driver: the browser tests of the Retry window view.
# - docker-compose (Compose v1, Python): its `config` command parses and
#   validates docker-compose.yaml without a Docker daemon, so CI checks the file
#   with a real Compose implementation. The PyPI release of the same program
#   cannot go into the project's venv: it pins PyYAML and jsonschema below what
#   Airflow needs.
set -euo pipefail

# "command package" pairs: the package is installed when the command is missing
NEEDED=(
    "chromium chromium"
    "chromedriver chromium-driver"
    "docker-compose docker-compose"
)
missing=()
for pair in "${NEEDED[@]}"; do
    read -r command package <<<"$pair"
    command -v "$command" >/dev/null || missing+=("$package")
done
if [ "${#missing[@]}" = 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "the tests need these Debian packages, or their equivalents from your system's" \
        "package manager: ${missing[*]}" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
echo "==> installing Debian's ${missing[*]} for the browser and compose file tests"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
