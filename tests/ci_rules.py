"""CI's rule for tests that need something outside Python (sources, an engine, a browser): under CI=true
they must run, so a missing prerequisite fails them; elsewhere it skips them, saying why."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_or_fail(why: str) -> None:
    if in_ci():
        pytest.fail(f"CI is set, so this test must run, but {why}")
    pytest.skip(f"{why} (with CI=true this fails instead)")
