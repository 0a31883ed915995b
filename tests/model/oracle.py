"""The published reference listing, loaded as a test oracle."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "reference_model.py"


def _load() -> Callable[[Any], Any]:
    spec = importlib.util.spec_from_file_location("retrywindow_reference_model", REFERENCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    evaluate: Callable[[Any], Any] = module.evaluate
    return evaluate


reference_evaluate = _load()


def reference_outcome(payload: Any) -> tuple[str, Any]:
    """``("ok", result)`` or ``("rejected", None)``, as the reference decides."""
    try:
        return "ok", reference_evaluate(payload)
    except (ValueError, TypeError, RecursionError):
        return "rejected", None
