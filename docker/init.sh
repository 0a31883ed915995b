#!/usr/bin/env bash
# One-off setup for the local stack, run by the airflow-init service as root.
#
# Every step is idempotent: `docker compose up` may run it again on every start.
#   1. create the bind-mounted folders and migrate the metadata database;
#   2. give the admin user a known password (SimpleAuthManager reads it from a file);
#   3. create the pool that models the positions database;
#   4. create the connection the gate operator uses to read the REST API;
#   5. hand the files over to the user the other services run as.
set -euo pipefail

: "${AIRFLOW_UID:?set AIRFLOW_UID (on Linux: echo AIRFLOW_UID=\$(id -u) > .env)}"
: "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?the compose file sets it}"
admin_user="${_AIRFLOW_WWW_USER_USERNAME:-admin}"
admin_password="${_AIRFLOW_WWW_USER_PASSWORD:-admin}"
passwords_file="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE}"
home="${AIRFLOW_HOME:-/opt/airflow}"  # the image sets /opt/airflow

echo "== folders"
mkdir -p "${home}"/{logs,dags,plugins,config} "$(dirname "${passwords_file}")"

echo "== Airflow $(airflow version)"
echo "== metadata database"
airflow db migrate

echo "== admin password for '${admin_user}'"
# merge into the file so other configured users keep their passwords
ADMIN_USER="${admin_user}" ADMIN_PASSWORD="${admin_password}" PASSWORDS_FILE="${passwords_file}" \
python - <<'PY'
import json
import os
from pathlib import Path

path = Path(os.environ["PASSWORDS_FILE"])
try:
    passwords = json.loads(path.read_text() or "{}")
except (FileNotFoundError, ValueError):
    passwords = {}
passwords[os.environ["ADMIN_USER"]] = os.environ["ADMIN_PASSWORD"]
path.write_text(json.dumps(passwords) + "\n")
path.chmod(0o600)
PY

echo "== pool positions_db"
# 2 slots = one heavy extraction (pool_slots=2) or two light ones (pool_slots=1).
# Deferred tasks count: their remote job still loads the database.
airflow pools set positions_db 2 \
    "Positions database: one heavy extraction (pool_slots=2) or two light ones (pool_slots=1) at once. Assumed capacity; measure it on the real system." \
    --include-deferred

echo "== connection airflow_api_default"
# JSON keeps conn_type http even where no installed provider registers that type
# (--conn-type would silently become "generic"), and escapes the password.
connection_json="$(ADMIN_USER="${admin_user}" ADMIN_PASSWORD="${admin_password}" python - <<'PY'
import json
import os

print(json.dumps({
    "conn_type": "http",
    "host": "http://airflow-apiserver:8080",
    "login": os.environ["ADMIN_USER"],
    "password": os.environ["ADMIN_PASSWORD"],
    "description": "Airflow REST API (/api/v2) read by the retry window gate",
}))
PY
)"
airflow connections delete airflow_api_default >/dev/null 2>&1 || true
airflow connections add airflow_api_default --conn-json "${connection_json}"

if [[ "$(id -u)" == 0 ]]; then
    echo "== ownership: ${AIRFLOW_UID}:0"
    chown -R "${AIRFLOW_UID}:0" "${home}"/{logs,dags,plugins,config} "$(dirname "${passwords_file}")"
fi
echo "== done"
