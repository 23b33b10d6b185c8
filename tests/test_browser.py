"""The lab in a real browser: JupyterLab on 127.0.0.1, driven by Playwright in Debian's Chromium,
runs the dynamic-batching notebook, shows the live dashboard while its load runs, and keeps its last
frame as an image once it stops."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from browser_support import ARTIFACTS, launch, require_chromium
from waiting_support import within

from labkit.plumbing.ports import free_ports

pytestmark = pytest.mark.browser  # run alone, after the parallel part (Makefile)

NOTEBOOK = "03_dynamic_batching.ipynb"


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    require_chromium()
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(Path(__file__).resolve().parent.parent / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    # Render every cell: JupyterLab 4 leaves cells out of view out of the page by default, and the test
    # reads outputs all the way down.
    settings = root / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    (port,) = free_ports(1)
    token = "labkit-browser-test"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.open_browser=False",
            f"--LabApp.user_settings_dir={root / 'settings'}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "jupyter.log", "wb"),
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    if (
        not within(
            lambda: proc.poll() is not None or _answers(f"{url}/api/status?token={token}"),
            60,
            "JupyterLab to answer",
            interval_s=0.2,
        )
        or proc.poll() is not None
    ):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("JupyterLab did not start:\n" + (root / "jupyter.log").read_text()[-2000:])
    yield url, token
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def test_dashboard_notebook_runs_in_chromium(jupyterlab):
    from playwright.sync_api import sync_playwright

    url, token = jupyterlab
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{url}/lab/tree/{NOTEBOOK}?token={token}", timeout=60_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            try:  # a fresh JupyterLab asks which kernel to start for a notebook it has not seen
                page.get_by_role("button", name="Select", exact=True).click(timeout=15_000)
            except Exception:  # noqa: BLE001 - no dialog: the kernel started by itself
                pass
            page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
            page.click("li.lm-MenuBar-item:has-text('Run')")
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            # the live dashboard: an ipywidgets Image that the worker thread fills with PNGs
            image = page.wait_for_selector(
                "img.widget-image[src^='blob:'], .widget-image img, img.widget-image", timeout=120_000
            )
            page.wait_for_function("img => img.naturalWidth > 100", arg=image, timeout=30_000)
            image.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "dashboard_live.png"))
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-OutputArea-output')].some(e => e.innerText.includes('yes both instance counts served every request'))",
                timeout=240_000,
            )
            text = page.inner_text(".jp-Notebook")
            assert "Error displaying widget" not in text and "Failed to load model class" not in text
            claims = next(
                t
                for t in page.locator(".jp-OutputArea-output").all_inner_texts()
                if "yes both instance counts served every request" in t
            )
            assert not [line for line in claims.splitlines() if line.startswith("NO")], claims
            # stopped: the live panel was replaced by its last frame, a plain PNG output
            assert page.locator("img.widget-image").count() == 0
            final = page.locator(".jp-RenderedImage img[src^='data:image/png']")
            assert final.count() >= 3  # timelines, the perf_analyzer curve, the dashboard's last frame
            final.last.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"))
            assert min(final.nth(i).evaluate("img => img.naturalWidth") for i in range(final.count())) > 100
        finally:
            page.screenshot(path=str(ARTIFACTS / "last.png"))
            browser.close()
