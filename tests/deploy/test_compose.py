"""The local stack: docker-compose.yaml, docker/Dockerfile and docker/init.sh.

No Docker engine runs in CI, so these tests check the files' structure and the
version pins statically, and run the init script itself against a throwaway
SQLite database with the project's own Airflow.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
INIT_SCRIPT = ROOT / "docker" / "init.sh"
CONSTRAINTS = ROOT / "constraints.txt"

AIRFLOW_SERVICES = (
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-worker",
    "airflow-triggerer",
)
INIT = "airflow-init"
LONG_RUNNING = ("postgres", "redis", *AIRFLOW_SERVICES)
JOB_TYPES = {
    "airflow-scheduler": "SchedulerJob",
    "airflow-dag-processor": "DagProcessorJob",
    "airflow-triggerer": "TriggererJob",
}
POOL = "positions_db"
CONNECTION = "airflow_api_default"
_DEFAULTED = re.compile(r"\$\{(?P<name>\w+)(?::?-(?P<default>[^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())  # safe_load resolves the << merge keys
    assert isinstance(loaded, dict), "docker-compose.yaml is not a mapping"
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found = compose["services"]
    assert isinstance(found, dict), "services must be a mapping"
    return found


def defaulted(value: str) -> str:
    """``value`` as compose would interpolate it with an empty environment."""
    return _DEFAULTED.sub(lambda m: m["default"] or "", value)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "use the mapping form of environment"
    return {key: defaulted(str(value)) for key, value in env.items()}


def command_words(test: Any) -> str:
    """A healthcheck test as one string, whatever its form."""
    if isinstance(test, str):
        return test
    kind, *words = test
    assert kind in ("CMD", "CMD-SHELL"), f"unexpected healthcheck form {kind!r}"
    return " ".join(words)


def dockerfile_lines() -> list[str]:
    """Dockerfile instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def image_airflow_version() -> str:
    froms = [line for line in dockerfile_lines() if line.upper().startswith("FROM ")]
    assert len(froms) == 1, f"expected one FROM, got {froms}"
    match = re.fullmatch(r"FROM\s+apache/airflow:(?P<tag>\S+)", froms[0])
    assert match, f"the image must be built FROM apache/airflow:<version>, got {froms[0]!r}"
    # an optional -pythonX.Y suffix picks the interpreter, not the Airflow version
    return re.sub(r"-python\d+\.\d+$", "", match["tag"])


def pinned_airflow_version() -> str:
    assert CONSTRAINTS.is_file(), "constraints.txt is missing at the repository root"
    pins = re.findall(r"(?im)^apache-airflow==([^\s;#]+)", CONSTRAINTS.read_text())
    assert len(pins) == 1, f"constraints.txt must pin apache-airflow exactly once, got {pins}"
    return str(pins[0])


def script_commands(text: str) -> list[list[str]]:
    """Shell words of each command line in a script, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    commands = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            try:
                commands.append(shlex.split(stripped))
            except ValueError:
                continue  # heredoc bodies and other non-shell lines
    return commands


# --- services ---------------------------------------------------------------


def test_every_service_of_the_stack_is_defined(services: dict[str, Any]) -> None:
    missing = {"postgres", "redis", *AIRFLOW_SERVICES, INIT} - set(services)
    assert not missing, f"missing services: {sorted(missing)}"


def test_airflow_services_share_the_common_anchor(compose: dict[str, Any]) -> None:
    common = compose.get("x-airflow-common")
    assert isinstance(common, dict), "x-airflow-common must hold the shared settings"
    shared = environment(common)
    for name in (*AIRFLOW_SERVICES, INIT):
        own = environment(compose["services"][name])
        differing = {key for key, value in shared.items() if own.get(key) != value}
        assert not differing, f"{name} does not inherit {sorted(differing)} from the anchor"


def test_api_server_serves_on_port_8080(services: dict[str, Any]) -> None:
    api = services["airflow-apiserver"]
    assert api["command"] == "api-server"
    assert "8080:8080" in [str(port) for port in api["ports"]]


def test_long_running_services_run_their_airflow_component(services: dict[str, Any]) -> None:
    expected = {
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-worker": "celery worker",
        "airflow-triggerer": "triggerer",
    }
    for name, command in expected.items():
        assert services[name]["command"] == command, name


# --- executor and connections -----------------------------------------------


def test_executor_is_celery_on_postgres_and_redis(services: dict[str, Any]) -> None:
    for name in (*AIRFLOW_SERVICES, INIT):
        env = environment(services[name])
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
        database = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        assert database.scheme.startswith("postgresql") and database.hostname == "postgres", name
        backend = urlsplit(env["AIRFLOW__CELERY__RESULT_BACKEND"])
        assert backend.scheme == "db+postgresql" and backend.hostname == "postgres", name
        broker = urlsplit(env["AIRFLOW__CELERY__BROKER_URL"])
        assert broker.scheme == "redis" and broker.hostname == "redis", name
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"].lower() == "false", name


def test_postgres_credentials_match_the_connection_url(services: dict[str, Any]) -> None:
    postgres = environment(services["postgres"])
    url = urlsplit(
        environment(services["airflow-scheduler"])["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    )
    assert (url.username, url.password, url.path.lstrip("/")) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
        postgres["POSTGRES_DB"],
    )


def test_tasks_reach_the_execution_api_on_the_api_server(services: dict[str, Any]) -> None:
    for name in AIRFLOW_SERVICES:
        url = urlsplit(environment(services[name])["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
        assert (url.hostname, url.port, url.path) == ("airflow-apiserver", 8080, "/execution/"), (
            name
        )


def test_every_component_shares_one_jwt_secret(services: dict[str, Any]) -> None:
    secrets = {
        environment(services[name]).get("AIRFLOW__API_AUTH__JWT_SECRET")
        for name in AIRFLOW_SERVICES
    }
    assert len(secrets) == 1 and None not in secrets and "" not in secrets, secrets


# --- volumes and image ------------------------------------------------------


def test_dags_folder_is_mounted_in_every_airflow_service(services: dict[str, Any]) -> None:
    for name in (*AIRFLOW_SERVICES, INIT):
        targets = {}
        for volume in services[name]["volumes"]:
            source, target = defaulted(volume).split(":")[:2]
            targets[target] = source
        assert targets.get("/opt/airflow/dags") == "./dags", name
        for folder in ("logs", "config", "plugins"):
            assert targets.get(f"/opt/airflow/{folder}") == f"./{folder}", (name, folder)


def test_airflow_services_run_the_image_of_docker_dockerfile(services: dict[str, Any]) -> None:
    images = set()
    for name in (*AIRFLOW_SERVICES, INIT):
        build = services[name]["build"]
        assert (build["context"], build["dockerfile"]) == (".", "docker/Dockerfile"), name
        images.add(services[name]["image"])
    assert len(images) == 1, f"one image for every Airflow service, got {images}"


def test_image_airflow_version_equals_the_pinned_and_installed_versions() -> None:
    installed = importlib.metadata.version("apache-airflow")
    assert image_airflow_version() == pinned_airflow_version() == installed


def test_image_installs_the_project_with_the_constraints_file() -> None:
    installs = [line for line in dockerfile_lines() if "pip install" in line]
    assert len(installs) == 1, installs
    words = shlex.split(installs[0])
    assert "--no-cache-dir" in words
    constraint = words[words.index("--constraint") + 1]
    copied = [line for line in dockerfile_lines() if line.startswith("COPY")]
    assert any("constraints.txt" in line and line.split()[-1] in constraint for line in copied), (
        f"{constraint} is not a copy of the repository's constraints.txt"
    )


def test_every_file_the_image_copies_exists() -> None:
    for line in dockerfile_lines():
        if line.startswith("COPY"):
            sources = [word for word in shlex.split(line)[1:-1] if not word.startswith("--")]
            for source in sources:
                assert (ROOT / source).exists(), f"docker/Dockerfile copies missing {source}"


# --- health and start order -------------------------------------------------


def test_every_long_running_service_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        check = services[name].get("healthcheck")
        assert check and check.get("test"), f"{name} has no healthcheck"
        assert check.get("retries", 0) >= 1 and check.get("interval"), name


def test_healthchecks_probe_the_right_thing(services: dict[str, Any]) -> None:
    probe = {name: command_words(services[name]["healthcheck"]["test"]) for name in LONG_RUNNING}
    assert "pg_isready" in probe["postgres"]
    assert "redis-cli ping" in probe["redis"]
    assert "curl --fail http://localhost:8080/api/v2/version" in probe["airflow-apiserver"]
    assert "celery" in probe["airflow-worker"] and "inspect ping" in probe["airflow-worker"]
    for name, job_type in JOB_TYPES.items():
        assert f"airflow jobs check --job-type {job_type}" in probe[name], name


def test_dependencies_wait_for_health_and_for_init(services: dict[str, Any]) -> None:
    for name in (*AIRFLOW_SERVICES, INIT):
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name
    for name in AIRFLOW_SERVICES:
        condition = services[name]["depends_on"][INIT]["condition"]
        assert condition == "service_completed_successfully", name
    assert services["airflow-worker"]["depends_on"]["airflow-apiserver"]["condition"] == (
        "service_healthy"
    )


def test_every_dependency_exists_and_can_meet_its_condition(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for dependency, rule in service.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if rule["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], (name, dependency)


# --- init: database, admin user, pool, connection ---------------------------


def init_script_path(services: dict[str, Any]) -> str:
    init = services[INIT]
    words = [init["entrypoint"], *init["command"]]
    scripts = [word for word in words if word.endswith(".sh")]
    assert len(scripts) == 1, f"the init service must run one script, got {words}"
    return str(scripts[0])


def test_init_runs_the_script_the_image_ships(services: dict[str, Any]) -> None:
    target = init_script_path(services)
    copies = [shlex.split(line) for line in dockerfile_lines() if line.startswith("COPY")]
    assert any(words[-1] == target and "docker/init.sh" in words for words in copies), (
        f"docker/Dockerfile does not copy docker/init.sh to {target}"
    )
    assert services[INIT]["user"] == "0:0", "init must be root to hand the mounts to AIRFLOW_UID"


def test_init_script_migrates_and_creates_the_pool_and_connection() -> None:
    commands = script_commands(INIT_SCRIPT.read_text())
    assert ["airflow", "db", "migrate"] in commands
    pools = [words for words in commands if words[:3] == ["airflow", "pools", "set"]]
    assert len(pools) == 1, pools
    positional = [word for word in pools[0][3:] if not word.startswith("--")]
    name, slots, description = positional
    assert (name, int(slots)) == (POOL, 2)
    assert "--include-deferred" in pools[0]
    assert "heavy" in description and "light" in description
    adds = [words for words in commands if words[:3] == ["airflow", "connections", "add"]]
    assert [words[3] for words in adds] == [CONNECTION]


def test_admin_user_is_configured_for_simple_auth_manager(services: dict[str, Any]) -> None:
    env = environment(services[INIT])
    manager = env["AIRFLOW__CORE__AUTH_MANAGER"]
    module, _, cls = manager.rpartition(".")
    assert getattr(importlib.import_module(module), cls).__name__ == "SimpleAuthManager"
    users = dict(
        user.split(":")[:2] for user in env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",")
    )
    assert users.get(env["_AIRFLOW_WWW_USER_USERNAME"]) == "admin"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]


@pytest.mark.airflow
@pytest.mark.slow(minutes=1.5)
def test_init_script_sets_up_a_fresh_database(services: dict[str, Any], tmp_path: Path) -> None:
    """Run docker/init.sh with this project's Airflow on SQLite, twice (it must be idempotent)."""
    compose_env = environment(services[INIT])
    home = tmp_path / "airflow"
    passwords = tmp_path / "auth" / "passwords.json"
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_UID": str(os.getuid()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "_AIRFLOW_WWW_USER_USERNAME": compose_env["_AIRFLOW_WWW_USER_USERNAME"],
        "_AIRFLOW_WWW_USER_PASSWORD": compose_env["_AIRFLOW_WWW_USER_PASSWORD"],
    }
    for _ in range(2):
        done = subprocess.run(
            ["bash", str(INIT_SCRIPT)],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def airflow_json(*args: str) -> Any:
        out = subprocess.run(
            ["airflow", *args, "-o", "json"],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout[out.stdout.index("[") :])

    [pool] = [p for p in airflow_json("pools", "list") if p["pool"] == POOL]
    assert int(pool["slots"]) == 2
    assert str(pool["include_deferred"]).lower() == "true"
    assert pool["description"]

    [connection] = airflow_json("connections", "get", CONNECTION)
    assert connection["conn_type"] == "http"
    assert connection["host"] == "http://airflow-apiserver:8080"
    assert connection["login"] == env["_AIRFLOW_WWW_USER_USERNAME"]
    assert connection["password"] == env["_AIRFLOW_WWW_USER_PASSWORD"]

    stored = json.loads(passwords.read_text())
    assert stored == {env["_AIRFLOW_WWW_USER_USERNAME"]: env["_AIRFLOW_WWW_USER_PASSWORD"]}
    for folder in ("dags", "logs", "config", "plugins"):
        assert (home / folder).is_dir(), folder
