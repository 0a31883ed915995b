"""The package as an index shows it and a user installs it: one version, honest metadata.

What the built archives hold and how the installed wheel registers with Airflow is
checked by ``devstack/wheel_check.py`` (CI); here, what the repository declares.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shlex
import sys
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest brings tomli on 3.10
    import tomli as tomllib

import airflow_retrywindow

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "airflow_retrywindow"
#: the one repository address every project URL, link and the provider info start with
REPOSITORY = "https://github.com/airflow-retrywindow/airflow-retrywindow"
#: the Apache License 2.0 as the ASF publishes it (LICENSE-2.0.txt)
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
# [text](target), ![alt](target), <https://...>, href="..." and src="..."
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)|<(https?://[^>]+)>|(?:href|src)=\"([^\"]+)\"")


@cache
def pyproject() -> dict[str, Any]:
    loaded: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return loaded


def project() -> dict[str, Any]:
    table: dict[str, Any] = pyproject()["project"]
    return table


def long_description() -> Path:
    readme = project()["readme"]
    assert readme["content-type"] == "text/markdown"
    return ROOT / str(readme["file"])


def declared() -> dict[str, Requirement]:
    requirements = (Requirement(entry) for entry in project()["dependencies"])
    return {canonicalize_name(requirement.name): requirement for requirement in requirements}


#: the pinned sets of the tested Airflow minors: 3.3 (constraints.txt), 3.1 and 3.2
CONSTRAINT_FILES = ("constraints.txt", "constraints-3.1.txt", "constraints-3.2.txt")


def pins(name: str, files: tuple[str, ...] = CONSTRAINT_FILES) -> list[Version]:
    """Every version the constraints files pin ``name`` to, whatever the marker."""
    found = []
    lines = [line for file in files for line in (ROOT / file).read_text().splitlines()]
    for raw in lines:
        line = raw.partition("#")[0].strip()
        if line:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == canonicalize_name(name):
                (spec,) = requirement.specifier
                found.append(Version(spec.version))
    return found


# --- one version --------------------------------------------------------------------------


def test_the_version_is_written_once_in_the_package() -> None:
    assert "version" not in project()
    assert project()["dynamic"] == ["version"]
    source = pyproject()["tool"]["setuptools"]["dynamic"]["version"]
    assert source == {"attr": "airflow_retrywindow.__version__"}
    # a literal, so setuptools reads it without importing the package (and Airflow)
    module = ast.parse((PACKAGE / "__init__.py").read_text())
    (assignment,) = [
        node
        for node in module.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__version__"
    ]
    assert isinstance(assignment.value, ast.Constant)
    assert assignment.value.value == airflow_retrywindow.__version__
    Version(airflow_retrywindow.__version__)  # a valid version


def test_no_other_file_writes_the_version() -> None:
    version = re.escape(airflow_retrywindow.__version__)
    written = re.compile(rf"""(version\W{{0,4}}=\W{{0,4}}|["']){version}["']""")
    places = [
        path.relative_to(ROOT)
        for folder in (PACKAGE, ROOT / "tests", ROOT / "devstack")
        for path in folder.rglob("*.py")
        if written.search(path.read_text())
    ]
    assert places == [Path("airflow_retrywindow/__init__.py")]


def test_the_provider_info_reports_the_version() -> None:
    from airflow_retrywindow.get_provider_info import get_provider_info

    assert get_provider_info()["versions"] == [airflow_retrywindow.__version__]


def test_the_changelog_has_a_section_for_the_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert headings and headings[0] == airflow_retrywindow.__version__
    assert re.search(r"^### Compatibility$", changelog, re.MULTILINE)


# --- what an index shows --------------------------------------------------------------------


def test_every_link_of_the_long_description_is_absolute() -> None:
    text = long_description().read_text()
    targets = [next(group for group in found if group) for found in LINK.findall(text)]
    assert targets, "the long description links nothing"
    relative = [target for target in targets if not target.startswith("https://")]
    assert relative == []


def test_links_into_the_repository_name_files_that_exist() -> None:
    text = long_description().read_text()
    targets = [next(group for group in found if group) for found in LINK.findall(text)]
    missing = []
    for target in targets:
        if not target.startswith(REPOSITORY):
            continue
        path = target.removeprefix(REPOSITORY).split("#")[0]
        match = re.fullmatch(r"/(?:blob|tree)/main/(.+)", path)
        exists = (ROOT / match[1]).exists() if match else path in ("", "/issues")
        if not exists:
            missing.append(target)
    assert missing == []


def test_the_long_description_gives_no_make_commands() -> None:
    text = long_description().read_text()
    assert not re.search(r"^\s*make\b", text, re.MULTILINE)
    assert "constraints.txt" not in text  # not in the sdist or the wheel


def test_project_urls_share_one_repository() -> None:
    urls = project()["urls"]
    assert set(urls) >= {"Source", "Documentation", "Changelog", "Issues"}
    assert all(url == REPOSITORY or url.startswith(REPOSITORY + "/") for url in urls.values())
    assert urls["Source"] == REPOSITORY
    assert urls["Issues"] == f"{REPOSITORY}/issues"
    assert urls["Documentation"] == f"{REPOSITORY}/tree/main/docs"
    assert urls["Changelog"] == f"{REPOSITORY}/blob/main/CHANGELOG.md"
    assert (ROOT / "docs").is_dir() and (ROOT / "CHANGELOG.md").is_file()


def test_the_provider_info_points_at_the_documentation() -> None:
    from airflow_retrywindow.get_provider_info import get_provider_info

    (integration,) = get_provider_info()["integrations"]
    assert integration["external-doc-url"] == project()["urls"]["Documentation"]


def test_classifiers_are_known_and_say_what_is_tested() -> None:
    trove_classifiers = pytest.importorskip("trove_classifiers")
    classifiers = project()["classifiers"]
    assert sorted(set(classifiers) - trove_classifiers.classifiers) == []
    for wanted in (
        "Framework :: Apache Airflow",
        "Framework :: Apache Airflow :: Provider",
        "Typing :: Typed",
    ):
        assert wanted in classifiers
    assert [c for c in classifiers if c.startswith("Development Status ::")] == [
        "Development Status :: 4 - Beta"
    ]
    assert (PACKAGE / "py.typed").exists()
    # the Python versions: the classifiers, requires-python and the nox matrix agree
    pythons = [
        c.rpartition(" :: ")[2]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert pythons == noxfile_pythons()
    assert project()["requires-python"] == f">={pythons[0]}"
    # the licence is the SPDX expression; a licence classifier beside it is an error
    assert not [c for c in classifiers if c.startswith("License ::")]


def test_ci_runs_every_declared_python_and_airflow_minor() -> None:
    # make test runs the whole suite on the Python constraints.txt was resolved on (3.11);
    # the nox sessions CI runs by default pair every other declared Python with one Airflow
    # minor, each installed from its own constraints file
    minors = noxfile_minors()
    assert [airflow for airflow, _, _ in minors] == ["3.1", "3.2", "3.3"]
    assert sorted([python for _, python, _ in minors] + ["3.11"]) == noxfile_pythons()
    for airflow, _, constraints in minors:
        pins = (ROOT / constraints).read_text().splitlines()
        assert any(line.startswith(f"apache-airflow=={airflow}.") for line in pins), constraints
    assert (
        'nox.options.sessions = [f"airflow-{minor.airflow}" for minor in MINORS]'
        in (ROOT / "noxfile.py").read_text()
    )


def noxfile_minors() -> list[tuple[str, str, str]]:
    """``MINORS`` of noxfile.py: (Airflow minor, Python, constraints file) each."""
    module = ast.parse((ROOT / "noxfile.py").read_text())
    for node in module.body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and "MINORS" in ast.unparse(node):
            calls = node.value.elts if isinstance(node.value, ast.List) else []
            return [tuple(ast.literal_eval(arg) for arg in call.args) for call in calls]  # type: ignore[misc]
    raise AssertionError("noxfile.py defines no MINORS")


def noxfile_pythons(name: str = "PYTHONS") -> list[str]:
    module = ast.parse((ROOT / "noxfile.py").read_text())
    for node in module.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == name:
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"noxfile.py defines no {name}")


def test_the_licence_and_the_notice_are_shipped() -> None:
    assert project()["license"] == "Apache-2.0"
    assert project()["license-files"] == ["LICENSE", "NOTICE"]
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256
    notice = (ROOT / "NOTICE").read_text()
    assert notice.startswith(
        "airflow-retrywindow\nCopyright 2026 The airflow-retrywindow developers\n"
    )


def test_the_image_copies_every_file_the_build_reads() -> None:
    """docker/Dockerfile installs the project from a copy; the build reads these files."""
    text = re.sub(r"\\\n", " ", (ROOT / "docker" / "Dockerfile").read_text())
    copied: set[str] = set()
    for line in text.splitlines():
        if line.startswith("COPY"):
            words = [word for word in shlex.split(line)[1:] if not word.startswith("--")]
            *sources, destination = words
            folder = destination.removeprefix("/opt/retrywindow/").strip("/")
            copied |= {str(Path(folder, Path(source).name)) for source in sources}
    needed = {"pyproject.toml", long_description().relative_to(ROOT).as_posix()}
    needed |= set(project()["license-files"])
    assert sorted(needed - copied) == []


# --- declared dependencies are the imported and the tested ones ----------------------------


def imported_top_levels() -> set[str]:
    """Every absolute module the package imports, as ``airflow.providers.x`` or a top level."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["airflow", "providers"] and len(parts) > 2:
                    # common.ai, common.compat, ...: a distribution each
                    found.add(".".join(parts[: 4 if parts[2] == "common" else 3]))
                else:
                    found.add(parts[0])
    return found - set(sys.stdlib_module_names) - {"__future__", "airflow_retrywindow"}


def test_every_imported_distribution_is_declared() -> None:
    # a dependency or an extra's (only code its user runs imports an extra's distribution)
    extras = (
        Requirement(entry)
        for found in project()["optional-dependencies"].values()
        for entry in found
    )
    names = set(declared()) | {canonicalize_name(requirement.name) for requirement in extras}
    distributions = packages_distributions()
    undeclared = []
    for module in sorted(imported_top_levels()):
        if module.startswith("airflow.providers."):
            provider = "-".join(module.split(".")[2:])
            wanted = {canonicalize_name(f"apache-airflow-providers-{provider}")}
        elif module == "airflow":
            wanted = {canonicalize_name("apache-airflow")}
        else:
            wanted = {canonicalize_name(name) for name in distributions.get(module, [module])}
        if not wanted & names:
            undeclared.append(f"{module} ({', '.join(sorted(wanted))})")
    assert undeclared == []


@pytest.mark.parametrize("name", ["apache-airflow", "apache-airflow-providers-standard"])
def test_the_declared_range_starts_at_the_lowest_tested_pin(name: str) -> None:
    specifier: SpecifierSet = declared()[canonicalize_name(name)].specifier
    tested = pins(name)
    assert tested, f"no constraints file pins {name}"
    assert all(version in specifier for version in tested)
    (lower,) = [spec for spec in specifier if spec.operator == ">="]
    assert Version(lower.version) == min(tested)
    assert [spec for spec in specifier if spec.operator == "<"], f"{name} has no upper bound"


def test_airflow_is_admitted_only_in_the_tested_minor_releases() -> None:
    tested = {file: pins("apache-airflow", (file,)) for file in CONSTRAINT_FILES}
    # one Airflow a file, its minor the one the file is named for (constraints.txt: the newest)
    assert {file: [f"{v.major}.{v.minor}" for v in found] for file, found in tested.items()} == {
        "constraints.txt": ["3.3"],
        "constraints-3.1.txt": ["3.1"],
        "constraints-3.2.txt": ["3.2"],
    }
    newest = max(version for found in tested.values() for version in found)
    specifier = declared()["apache-airflow"].specifier
    assert Version(f"{newest.major}.{newest.minor + 1}.0") not in specifier
    assert Version(f"{newest.major}.{newest.minor}.{newest.micro + 1}") in specifier
    assert all(Version(f"3.{minor}.0") in specifier for minor in (2, 3))


def test_development_tools_are_dependency_groups_not_extras() -> None:
    assert set(project()["optional-dependencies"]) == {"google", "common-ai"}
    groups = pyproject()["dependency-groups"]
    assert {"test", "dev", "distributed"} <= set(groups)
    tools = {"pytest", "hypothesis", "ruff", "mypy", "build", "twine", "nox", "selenium"}
    published = {
        canonicalize_name(Requirement(entry).name)
        for entry in [
            *project()["dependencies"],
            *(e for extra in project()["optional-dependencies"].values() for e in extra),
        ]
    }
    assert tools & published == set()
    makefile = (ROOT / "Makefile").read_text()
    for group in ("test", "dev", "distributed"):
        assert f"--group {group}" in makefile
