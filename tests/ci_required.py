"""Skips that CI must not take: with BAKEOFF_CI=1 in the environment (.ci/run sets it), a test that would
skip because PostgreSQL, Ray or Chromium is missing fails instead, saying what is missing. Elsewhere (a
laptop without them) it skips with the same reason."""
from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

ENV = "BAKEOFF_CI"


def in_ci() -> bool:
    """True when BAKEOFF_CI is set to 1 (or another non-empty value other than 0)."""
    return os.environ.get(ENV, "").strip() not in ("", "0")


def skip_or_fail(reason: str) -> None:
    """pytest.skip(reason), or pytest.fail when in_ci(): CI installs everything (.ci/setup.sh), so a missing
    dependency there is a broken setup, not a reason to pass."""
    if in_ci():
        pytest.fail(f"{reason} [{ENV}=1: CI must run this test, not skip it; see .ci/setup.sh]", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def importorskip(name: str, reason: str) -> ModuleType:
    """pytest.importorskip, failing instead of skipping when in_ci()."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        skip_or_fail(f"{reason} ({exc})")
        raise  # unreachable
