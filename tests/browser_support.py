"""Debian's Chromium under Playwright, as every browser test here launches it: where it is, where the
screenshots go, and the flags that keep it quiet on a machine with no network (without them it opens
connections to Google's hosts at every start, and the closed network refuses them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ci_rules import in_ci

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> None:
    """Skip without Chromium, except in CI (.ci/run installs it), where its absence fails the test."""
    if not Path(CHROMIUM).exists():
        if in_ci():
            pytest.fail(f"{CHROMIUM} is missing; .ci/run installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium")


def launch(playwright: Any) -> Any:
    """A headless Chromium (Playwright's Browser); the screenshots' folder made."""
    ARTIFACTS.mkdir(exist_ok=True)
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
