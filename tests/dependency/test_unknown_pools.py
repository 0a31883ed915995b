"""A ``dependency_pools`` setting that names no pool is reported when a pool is read."""

from __future__ import annotations

import logging
from collections.abc import Collection

import pytest

from airflow_retrywindow.dependency.check import _report_unknown
from airflow_retrywindow.dependency.settings import DependencySettings, PoolSettings


class PoolsSeen:
    """The pool listing of a deployment whose only pools are ``existing``."""

    def __init__(self, *existing: str) -> None:
        self.existing = set(existing)
        self.asked: list[set[str]] = []

    def pools(self, names: Collection[str]) -> dict[str, object]:
        self.asked.append(set(names))
        return {name: object() for name in names if name in self.existing}


def _settings(text: str) -> PoolSettings:
    return PoolSettings.parse(DependencySettings(), text, option="dependency_pools")


def test_a_named_pool_that_does_not_exist_is_logged_by_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = PoolsSeen("positions_api")
    with caplog.at_level(logging.WARNING):
        _report_unknown(api, _settings('{"positions_api": "off", "postions_api": {"round": 30}}'))
    assert api.asked == [{"positions_api", "postions_api"}]
    warned = [record.getMessage() for record in caplog.records]
    assert len(warned) == 1
    assert "dependency_pools names 'postions_api', which is no pool" in warned[0]


def test_settings_that_name_existing_pools_only_log_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        _report_unknown(PoolsSeen("positions_api"), _settings('{"positions_api": "off"}'))
    assert caplog.records == []
