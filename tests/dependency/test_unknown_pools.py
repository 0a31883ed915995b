"""A ``dependency_pools`` setting that names no pool is said by the view, not read per decision.

The retry-start check reads its own pool in at most three requests; listing every pool
to find a misspelt name would make it four at every decision of every gated retry. The
view reads the pools from the metadata DB instead (``tests/ui/test_dependency_view_on_db.py``
shows it on a real DB).
"""

from __future__ import annotations

import inspect

from airflow_retrywindow.dependency import check
from airflow_retrywindow.dependency.settings import DependencySettings, PoolSettings
from airflow_retrywindow.plugins.dependency_rows import dependencies, unknown_pool_note
from airflow_retrywindow.plugins.page import run_page
from tests.ui.test_page import LINKS


def _settings(text: str) -> PoolSettings:
    return PoolSettings.parse(DependencySettings(), text, option="dependency_pools")


def test_only_the_names_that_are_no_pool_are_unknown() -> None:
    pools = _settings('{"positions_api": "off", "postions_api": {"round": 30}}')
    assert pools.unknown({"positions_api", "default_pool"}) == ["postions_api"]


def test_an_unknown_name_alone_makes_a_dependencies_section_that_says_it() -> None:
    found = dependencies([], setting_problems=[unknown_pool_note("postions_api")])
    assert found
    page = run_page(LINKS, policy=[], records=[], dependencies=found)
    assert "<h2>Dependencies · 0 pools</h2>" in page
    assert (
        '<p class="problem setting">[retry_window] dependency_pools names &#39;postions_api&#39;, '
        "which is no pool: its setting applies to nothing. Correct the name, or create the pool."
    ) in page


def test_a_note_with_markup_is_escaped() -> None:
    found = dependencies([], setting_problems=[unknown_pool_note("<b>x</b>")])
    assert "<b>x</b>" not in run_page(LINKS, policy=[], records=[], dependencies=found)


def test_the_retry_start_check_lists_no_pools() -> None:
    # the check's whole read: the pool's task instances, its ended tries, the failure keys
    source = inspect.getsource(check)
    assert ".pools(" not in source and "unknown(" not in source
