"""Build the package, check it, and install the wheel the way a user would.

Run from the repository root, with the project's virtualenv (``make wheel-check``)::

    python -m devstack.wheel_check [--keep DIR]

1. ``python -m build`` writes the sdist, then the wheel built from that sdist, into a
   temporary folder (``--keep DIR`` keeps them there instead).
2. ``twine check --strict`` on both: the metadata and the long description render.
3. Both archives carry LICENSE and NOTICE; the wheel carries ``py.typed`` and the
   view's stylesheet, and nothing of ``tests/`` or ``devstack/``.
4. A fresh virtualenv installs the wheel, not the checkout, with constraints.txt.
5. There, in a folder outside the checkout and a throwaway ``AIRFLOW_HOME``: Airflow
   lists the provider at the package's version, its connection type
   ``retrywindow_airflow_api`` and its plugin; ``airflow-retrywindow --help`` runs and
   ``evaluate`` prints what the checkout prints for ``examples/case.json``; the
   package is imported from the virtualenv, and importing it imports no Airflow.

Exits 0 when every check passes, 1 with the failed check otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
DISTRIBUTION = "airflow-retrywindow"
CONNECTION_TYPE = "retrywindow_airflow_api"
PLUGIN = "retry_window"
CASE = ROOT / "examples" / "case.json"


class CheckFailed(Exception):
    """One of the checks did not hold; the message says which and why."""


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def run(args: Sequence[str | Path], **kwargs: Any) -> str:
    """Run ``args``; its standard output, or :class:`CheckFailed` with what it printed."""
    done = subprocess.run(
        [str(arg) for arg in args], capture_output=True, text=True, check=False, **kwargs
    )
    if done.returncode != 0:
        raise CheckFailed(
            f"`{' '.join(str(arg) for arg in args)}` exited {done.returncode}:\n"
            f"{done.stdout}{done.stderr}"
        )
    return str(done.stdout)


def package_version() -> str:
    """``airflow_retrywindow.__version__`` of the checkout, read without importing it."""
    namespace: dict[str, object] = {}
    for line in (ROOT / "airflow_retrywindow" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            exec(line, namespace)
    return str(namespace["__version__"])


def build(outdir: Path) -> tuple[Path, Path]:
    """The sdist and the wheel (built from the sdist) in ``outdir``."""
    step(f"building the sdist and the wheel into {outdir}")
    run([sys.executable, "-m", "build", "--outdir", outdir, ROOT])
    (sdist,) = outdir.glob("*.tar.gz")
    (wheel,) = outdir.glob("*.whl")
    return sdist, wheel


def check_archives(sdist: Path, wheel: Path, version: str) -> None:
    step("twine check --strict")
    print(run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel]).strip())
    step("what the archives hold")
    stem = f"airflow_retrywindow-{version}"
    if not (sdist.name == f"{stem}.tar.gz" and wheel.name == f"{stem}-py3-none-any.whl"):
        raise CheckFailed(f"the archives are not of version {version}: {sdist.name}, {wheel.name}")
    with tarfile.open(sdist) as archive:
        in_sdist = {name.partition("/")[2] for name in archive.getnames()}
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    dist_info = f"{stem}.dist-info"
    required = {
        "sdist": (in_sdist, ["LICENSE", "NOTICE", "pyproject.toml", "docs/pypi-description.md"]),
        "wheel": (
            in_wheel,
            [
                f"{dist_info}/licenses/LICENSE",
                f"{dist_info}/licenses/NOTICE",
                f"{dist_info}/entry_points.txt",
                "airflow_retrywindow/py.typed",
                "airflow_retrywindow/plugins/static/retry_window.css",
                "airflow_retrywindow/plugins/templates/task.html",
                "airflow_retrywindow/get_provider_info.py",
            ],
        ),
    }
    for kind, (names, wanted) in required.items():
        missing = [name for name in wanted if name not in names]
        if missing:
            raise CheckFailed(f"the {kind} lacks {missing}")
    stray = sorted(
        name
        for name in in_wheel
        if not (name.startswith("airflow_retrywindow/") or name.startswith(f"{dist_info}/"))
    )
    if stray:
        raise CheckFailed(f"the wheel ships files outside the package: {stray[:10]}")
    print(f"{sdist.name}: {len(in_sdist)} entries; {wheel.name}: {len(in_wheel)} files")


def install(wheel: Path, venv: Path) -> Path:
    """A fresh virtualenv at ``venv`` with ``wheel`` installed; its ``bin`` folder."""
    step(f"installing {wheel.name} into a fresh virtualenv with constraints.txt")
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    bin_folder = venv / "bin"
    # uv, as make install uses it: pip compiled every module of Airflow's 330 distributions
    # (about 20 s of a core) where uv leaves that to each module's first import
    uv = Path(sys.executable).with_name("uv")
    run([uv, "pip", "install", "--quiet", "--python", bin_folder / "python",
         "--constraint", CONSTRAINTS, wheel])  # fmt: skip
    return bin_folder


def check_installed(bin_folder: Path, version: str, workdir: Path) -> None:
    """What a user of the installed wheel sees, from ``workdir`` (outside the checkout)."""
    home = workdir / "airflow-home"
    home.mkdir()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "PATH": os.pathsep.join([str(bin_folder), os.environ.get("PATH", "")]),
    }
    env.pop("PYTHONPATH", None)

    def airflow(*args: str) -> Any:
        return json.loads(run([bin_folder / "airflow", *args], cwd=workdir, env=env))

    step("the package comes from the virtualenv and imports no Airflow")
    probe = (
        "import sys, airflow_retrywindow as rw; "
        "print(rw.__file__); print(rw.__version__); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pendulum')))"
    )
    where, found_version, loaded = run(
        [bin_folder / "python", "-c", probe], cwd=workdir, env=env
    ).splitlines()
    if not Path(where).resolve().is_relative_to(bin_folder.parent.resolve()):
        raise CheckFailed(f"airflow_retrywindow was imported from {where}, not the virtualenv")
    if found_version != version or loaded != "[]":
        raise CheckFailed(f"installed version {found_version}, modules loaded on import {loaded}")

    step("airflow providers get / list")
    (provider,) = airflow("providers", "get", DISTRIBUTION, "--output", "json")
    if provider != {"Provider": DISTRIBUTION, "Version": version}:
        raise CheckFailed(f"airflow providers get: {provider}")
    listed = {row["package_name"]: row for row in airflow("providers", "list", "-o", "json")}
    if listed.get(DISTRIBUTION, {}).get("version") != version:
        raise CheckFailed(f"airflow providers list does not list {DISTRIBUTION} {version}")
    print(f"{DISTRIBUTION} {version}: {listed[DISTRIBUTION]['description'][:60]}...")

    step("airflow providers hooks: the connection type")
    hooks = {row["connection_type"]: row for row in airflow("providers", "hooks", "-o", "json")}
    if hooks.get(CONNECTION_TYPE, {}).get("package_name") != DISTRIBUTION:
        raise CheckFailed(f"airflow providers hooks lists no {CONNECTION_TYPE} of {DISTRIBUTION}")
    print(f"{CONNECTION_TYPE}: {hooks[CONNECTION_TYPE]['hook_name']}")

    step("airflow plugins: the Retry window view")
    plugins = {row["name"]: row for row in airflow("plugins", "-o", "json")}
    plugin = plugins.get(PLUGIN)
    if plugin is None or f"{DISTRIBUTION}=={version}" not in plugin["source"]:
        raise CheckFailed(f"airflow plugins lists no {PLUGIN} plugin from the wheel: {plugin}")
    print(f"{PLUGIN}: {[app['url_prefix'] for app in plugin['fastapi_apps']]}")

    step("airflow-retrywindow --help and evaluate")
    usage = run([bin_folder / "airflow-retrywindow", "--help"], cwd=workdir, env=env)
    if "evaluate" not in usage:
        raise CheckFailed(f"airflow-retrywindow --help names no evaluate command:\n{usage}")
    installed = run([bin_folder / "airflow-retrywindow", "evaluate", CASE], cwd=workdir, env=env)
    checkout = run([sys.executable, "-m", "airflow_retrywindow"], cwd=ROOT, input=CASE.read_text())
    if installed != checkout or not installed.strip():
        raise CheckFailed("the installed evaluate prints other output than the checkout")
    print(
        f"evaluate {CASE.relative_to(ROOT)}: {len(installed.splitlines())} lines, as the checkout"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="write the sdist and the wheel here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    version = package_version()
    with tempfile.TemporaryDirectory(prefix="retrywindow-wheel-") as scratch:
        work = Path(scratch)
        outdir = args.keep.resolve() if args.keep else work / "dist"
        outdir.mkdir(parents=True, exist_ok=True)
        for old in [*outdir.glob("*.whl"), *outdir.glob("*.tar.gz")]:
            old.unlink()
        try:
            sdist, wheel = build(outdir)
            check_archives(sdist, wheel, version)
            bin_folder = install(wheel, work / "venv")
            (work / "elsewhere").mkdir()
            check_installed(bin_folder, version, work / "elsewhere")
        except CheckFailed as failed:
            print(f"wheel check FAILED: {failed}", file=sys.stderr)
            return 1
    print(f"wheel check passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
