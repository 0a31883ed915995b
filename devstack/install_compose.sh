#!/usr/bin/env bash
# Installs Debian's docker-compose (Compose v1, Python) for the compose file test.
# Its `config` command parses and validates docker-compose.yaml without a Docker
# daemon, so CI can check the file with a real Compose implementation. The PyPI
# release of the same program cannot go into the project's venv: it pins PyYAML
# and jsonschema below what Airflow needs. apt is the only source.
set -euo pipefail
if command -v docker-compose >/dev/null; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "docker-compose is needed for the compose file test; install it with your" \
        "system's package manager (Debian: docker-compose)" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
echo "==> installing Debian's docker-compose for the compose file test"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    docker-compose >/dev/null
