"""docker-compose.yaml as a real Compose implementation reads it, without a daemon.

``docker-compose config`` (Compose v1, Debian's package, installed by
``devstack/install_system_packages.sh`` through ``make test``) loads the file,
interpolates its variables, checks it against the Compose schema and resolves the
references between services and volumes, all before it would talk to an engine.
It needs no Docker daemon, so CI runs it on the real file and on broken copies.
The structural checks stay in ``test_compose.py``; here the same file must also
satisfy the implementation, and the structural test's reading of it (merge keys,
``${VAR:-default}``) must agree with the implementation's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml  # type: ignore[import-untyped]

from tests.deploy.test_compose import COMPOSE, ROOT, defaulted, environment

COMPOSE_CLI = "docker-compose"


class Breakage(NamedTuple):
    """One way to break the file.

    :param what: what is broken, in words.
    :param old: text of the real file.
    :param new: what replaces it in the copy.
    :param named: words Compose's error must contain.
    """

    what: str
    old: str
    new: str
    named: tuple[str, ...]


BROKEN = [
    Breakage(
        "an unknown service option", "    restart: always\n", "    restat: always\n", ("restat",)
    ),
    Breakage(
        "a start condition Compose does not know",
        "condition: service_completed_successfully",
        "condition: service_finished",
        ("service_finished",),
    ),
    Breakage(
        "a dependency on a service that does not exist",
        "    redis:\n      condition: service_healthy\n",
        "    cache:\n      condition: service_healthy\n",
        ("cache", "undefined"),
    ),
    Breakage(
        "a named volume that is not declared",
        "  postgres-db-volume:\n  airflow-auth:\n",
        "  postgres-db-volume:\n",
        ("airflow-auth", "no declaration"),
    ),
    Breakage(
        "an unclosed variable",
        "${AIRFLOW_UID:-50000}:0",
        "${AIRFLOW_UID:-50000:0",
        ("Invalid interpolation", "user"),
    ),
]


@pytest.fixture(scope="module")
def compose_cli() -> str:
    found = shutil.which(COMPOSE_CLI)
    if found is None:
        pytest.skip(
            f"needs {COMPOSE_CLI}: `make test` installs Debian's package where apt-get "
            "exists (devstack/install_system_packages.sh); elsewhere see README.md, "
            '"Requirements"'
        )
    return found


def run_config(cli: str, compose_file: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    """``docker-compose config`` on ``compose_file``, as if it were the repository's file.

    The project directory is the repository, so relative paths (the build context,
    the bind mounts) resolve as for the real file; an empty env file and a bare
    environment keep a developer's ``.env`` and shell variables out of it.

    :param cli: the docker-compose executable.
    :param compose_file: the file to check.
    :param workdir: a scratch directory for the env file and HOME.
    """
    env_file = workdir / "empty.env"
    env_file.write_text("")
    return subprocess.run(
        [
            cli,
            "--project-directory",
            str(ROOT),
            "--env-file",
            str(env_file),
            "--file",
            str(compose_file),
            "config",
        ],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def resolved(compose_cli: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real file as Compose resolves it; fails with Compose's own message if invalid."""
    done = run_config(compose_cli, COMPOSE, tmp_path_factory.mktemp("compose"))
    assert done.returncode == 0, f"Compose rejects docker-compose.yaml:\n{done.stderr}"
    # a warning means e.g. a variable without a default, which becomes an empty string
    assert done.stderr.strip() == "", done.stderr
    loaded = yaml.safe_load(done.stdout)
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def written() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def mount_points(volumes: list[str]) -> list[tuple[str, str]]:
    """(source, target) of each short-form volume, bind sources made absolute."""
    points = []
    for volume in volumes:
        source, target = defaulted(volume).split(":")[:2]
        if source.startswith((".", "/")):
            source = str((ROOT / source).resolve())
        points.append((source, target))
    return points


def test_compose_accepts_the_file_without_warnings(resolved: dict[str, Any]) -> None:
    assert resolved["services"], "Compose resolved no services"
    assert set(resolved["volumes"]) == {"postgres-db-volume", "airflow-auth"}


def test_compose_resolves_the_file_as_the_structural_test_reads_it(
    resolved: dict[str, Any], written: dict[str, Any]
) -> None:
    assert set(resolved["services"]) == set(written["services"])
    for name, service in written["services"].items():
        real = resolved["services"][name]
        # merge keys and ${VAR:-default}: the structural test's reading is Compose's
        assert real.get("environment", {}) == environment(service), name
        assert real.get("user") == (defaulted(service["user"]) if "user" in service else None)
        assert mount_points(real.get("volumes", [])) == mount_points(service.get("volumes", []))
        assert real.get("depends_on", {}) == service.get("depends_on", {}), name


@pytest.mark.parametrize("case", BROKEN, ids=[case.what for case in BROKEN])
def test_compose_rejects_a_broken_copy(compose_cli: str, tmp_path: Path, case: Breakage) -> None:
    text = COMPOSE.read_text()
    assert case.old in text, f"the file changed: no {case.old!r} left to break ({case.what})"
    copy = tmp_path / "docker-compose.yaml"
    copy.write_text(text.replace(case.old, case.new))
    done = run_config(compose_cli, copy, tmp_path)
    assert done.returncode != 0, f"Compose accepted {case.what}"
    # rejected for the change made, not for something else about the copy
    for word in case.named:
        assert word in done.stderr, f"{case.what}: {word!r} not in {done.stderr!r}"
