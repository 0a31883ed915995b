#!/usr/bin/env bash
# Installs the Debian packages some tests need and a fresh machine lacks; apt is
# the only source (no downloads from elsewhere). `make test` runs it; nothing else
# (`make demo`, `make up`, the package itself) needs these packages.
#
# - chromium, chromium-driver: the browser test of the Retry window view
#   (tests/ui/test_view_on_airflow.py).
# - docker-compose (Compose v1, Python): its `config` command parses and
#   validates docker-compose.yaml without a Docker daemon, so CI checks the file
#   with a real Compose implementation. The PyPI release of the same program
#   cannot go into the project's venv: it pins PyYAML and jsonschema below what
#   Airflow needs (tests/deploy/test_compose_validation.py).
# - faketime: runs the gate and the retry policy in a process whose clock is
#   skewed against the API server's (tests/gate/test_gate_stack.py).
#
# Without apt-get it installs nothing, says what is missing and exits 0: the tests
# that need a missing program skip with the reason (README.md, "Requirements").
set -euo pipefail

# "command package" pairs: the package is installed when the command is missing
NEEDED=(
    "chromium chromium"
    "chromedriver chromium-driver"
    "docker-compose docker-compose"
    "faketime faketime"
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
    echo "==> no apt-get here: not installing ${missing[*]}." >&2
    echo "    The browser test of the Retry window view needs chromium and chromedriver," \
        "the compose file validation needs docker-compose, the clock skew tests need" \
        "faketime; without them those tests skip." >&2
    echo "    Install them with your system's package manager to run them" \
        "(README.md, \"Requirements\")." >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
echo "==> installing Debian's ${missing[*]} for the browser, compose file and clock skew tests"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
