"""The course as a website (`make site`): Sphinx builds it once per session, cold, into a temporary folder, with
warnings as errors. Then its HTML: every lesson notebook is a page with its opening, its run box, its figures and
its exercises' hints; no solution's text is anywhere in it; the API page documents every name of
``labkit.__all__`` and the CLI pages every command; widgets left static fallbacks. And in Debian's Chromium,
served from 127.0.0.1: every page opens, loads nothing from another host, logs no error from the site's own
files, and has no broken internal link; each lesson's figures load; the search page finds lesson terms.
Screenshots go to test-artifacts/."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import re
import subprocess
import sys
import threading
import time
import types
import urllib.parse
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from browser_support import ARTIFACTS, launch, require_chromium
from ci_rules import skip_or_fail

import labkit
from labkit import cli
from labkit.course import lesson_pages, schedule, workshop
from labkit.course.exercises import REGISTRY, TAG_PREFIX
from labkit.docker import cpu_image

pytestmark = pytest.mark.browser  # run alone, after the parallel part (Makefile)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
#: Terms from the lessons that the search page must find.
SEARCH_TERMS = ["EXECUTION_ENV_PATH", "dynamic_batching"]
#: `make site`'s build, as the Makefile runs it (the output folder comes last).
SPHINX = ["-M", "html", "docs", "-W", "--keep-going", "-q"]


def _lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob(schedule.NOTEBOOK_PATTERN))


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built site's HTML folder."""
    if importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_nb") is None:
        skip_or_fail("the docs extra is not installed (pip install -e '.[docs]'; `make site` installs it)")
    out = tmp_path_factory.mktemp("site")
    started = time.perf_counter()
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", *SPHINX[:3], str(out), *SPHINX[3:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, f"the site did not build:\n{build.stdout[-3000:]}\n{build.stderr[-5000:]}"
    print(f"\nsite: built cold in {time.perf_counter() - started:.1f} s")
    return out / "html"


class _Page(HTMLParser):
    """A page's text, its element ids, and what it refers to (href, src, data)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.ids: list[str] = []
        self.refs: list[tuple[str, str]] = []  # (tag, reference)
        self.feed(text)
        self.text = "".join(self.parts)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.append(value)
            if name in ("href", "src", "data") and value:
                self.refs.append((tag, value))

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


@functools.cache
def _page(path: Path) -> _Page:
    return _Page(path.read_text())


def _pages(site: Path) -> list[str]:
    """Every page of the site, relative to it (not the theme's or Sphinx's own files)."""
    return sorted(
        p.relative_to(site).as_posix() for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_")
    )


def _words(text: str) -> str:
    """Text with its spaces collapsed and Sphinx's smart quotes made plain again."""
    return " ".join(text.translate(str.maketrans("‘’“”", "''\"\"")).split())


def _png_outputs(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in output.get("data", {}) for cell in nb.cells for output in cell.get("outputs", []))


def test_every_lesson_is_a_page_with_its_opening_run_box_figures_and_hints(site):
    lessons = _page(site / "lessons.html")
    assert _lessons(), "no lesson notebooks found"
    for path in _lessons():
        nb = nbformat.read(path, as_version=4)
        lesson = schedule.read_lesson(path)
        page = _page(site / "notebooks" / f"{path.stem}.html")
        text = _words(page.text)
        assert ("a", f"notebooks/{path.stem}.html") in lessons.refs, path.stem
        assert lesson.title in text and f"**Time** {lesson.minutes} min" in nb.cells[0].source
        assert f"Time {lesson.minutes} min" in text, path.stem
        for link in re.findall(r"\]\((https://[^)]+)\)", nb.cells[0].source):  # Triton's r23.12 documents
            assert ("a", link) in page.refs, (path.stem, link)
        assert "Run this lesson" in text and "make lab" in text and f"{path.stem}.ipynb" in text
        for exercise in lesson.exercises:
            assert _words(REGISTRY[exercise].hint) in text, (path.stem, exercise)
        figures = [ref for tag, ref in page.refs if tag == "img" and "_images/" in ref]
        assert len(figures) == _png_outputs(nb), path.stem
        for ref in figures:
            assert (site / "notebooks" / ref).resolve().is_file(), ref


def _solution_lines(exercise: str, elsewhere: set[str]) -> list[str]:
    """The lines of an exercise's reference solution that neither its starter nor the lessons' other cells hold
    (a solution shares lines with what the lessons show; those tell nothing)."""
    starter = {line.strip() for line in REGISTRY[exercise].starter().splitlines()}
    lines = (line.strip() for line in REGISTRY[exercise].solution().splitlines())
    return [line for line in lines if line and line not in starter and line not in elsewhere]


def _lesson_lines() -> set[str]:
    """Every line the lessons show: their cells' sources and text outputs, an exercise cell as its starter
    (the page shows the starter, whatever the notebook was saved with)."""
    lines: set[str] = set()
    for path in _lessons():
        for cell in nbformat.read(path, as_version=4).cells:
            tags = cell.get("metadata", {}).get("tags", [])
            exercise = next((tag[len(TAG_PREFIX) :] for tag in tags if tag.startswith(TAG_PREFIX)), None)
            if exercise is not None:
                lines |= {line.strip() for line in REGISTRY[exercise].starter().splitlines()}
                continue
            texts = [cell.source] + [
                str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
                for output in cell.get("outputs", [])
            ]
            lines |= {line.strip() for text in texts for line in text.splitlines()}
    return lines


def _leaks(texts: dict[str, str], lines: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    found = []
    for where, text in texts.items():
        held = {line.strip() for line in text.splitlines()}
        found += [(where, exercise, line) for exercise, own in lines.items() for line in own if line in held]
    return found


def test_no_solution_reaches_the_site(site):
    elsewhere = _lesson_lines()
    lines = {exercise: _solution_lines(exercise, elsewhere) for exercise in REGISTRY}
    assert all(lines.values()), {e: own for e, own in lines.items() if not own}  # every solution is looked for
    # the search is able to see a solution: in the solutions themselves, and in a lesson saved with one
    assert {e for _, e, _ in _leaks({e: REGISTRY[e].solution() for e in REGISTRY}, lines)} == set(REGISTRY)
    solved = nbformat.read(NOTEBOOKS / "01_python_backend.ipynb", as_version=4)
    for cell in solved.cells:
        exercise = next((t[len(TAG_PREFIX) :] for t in cell.metadata.get("tags", []) if t.startswith(TAG_PREFIX)), None)
        if exercise:
            cell.source = REGISTRY[exercise].solution()
    assert _leaks({"saved": "\n".join(c.source for c in solved.cells)}, lines)
    assert (
        _leaks({"page": "\n".join(c.source for c in lesson_pages.page(solved, "01_python_backend").cells)}, lines) == []
    )
    # and the site holds none: not in its pages' text, nor in any text file it ships beside the theme's
    texts = {page: _page(site / page).text for page in _pages(site)}
    texts |= {
        str(p.relative_to(site)): p.read_text()
        for p in site.rglob("*")
        if p.suffix in (".js", ".txt", ".ipynb", ".md", ".json") and not p.relative_to(site).parts[0] == "_static"
    }
    assert _leaks(texts, lines) == []


def test_the_api_page_documents_every_public_name(site):
    page = _page(site / "api.html")
    modules = {name for name in labkit.__all__ if isinstance(getattr(labkit, name), types.ModuleType)}
    assert modules and len(modules) < len(labkit.__all__)
    missing = [
        name for name in labkit.__all__ if (f"api-{name}" if name in modules else f"labkit.{name}") not in page.ids
    ]
    assert missing == []


def _commands(parser, prog: str) -> Iterator[str]:
    """The id of every command's section under ``parser``, as sphinx-argparse makes it from the command's full
    name with its aliases: "labkit-serve", "labkit-export-export-backend", "labkit-room-up", ..."""
    for action in parser._actions:
        if action.nargs != "A...":  # argparse.PARSER: the subcommands
            continue
        for choice in action._choices_actions:  # one per command, its aliases in its metavar
            name = f"{prog} {choice.metavar or choice.dest}"
            yield re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
            yield from _commands(action.choices[choice.dest], f"{prog} {choice.dest}")


def test_the_cli_pages_document_every_command(site):
    for parser, page, prog in (
        (cli.parser(), "cli.html", "labkit"),
        (workshop.parser(), "cli-workshop.html", "labkit workshop"),
        (cpu_image.parser(), "cli-image.html", "labkit image"),
    ):
        commands = list(_commands(parser, prog))
        ids = _page(site / page).ids
        assert commands and [c for c in commands if c not in ids] == [], page
    assert {"labkit-export-export-backend", "labkit-room-up"} <= set(_commands(cli.parser(), "labkit"))


def test_saved_widgets_have_a_static_fallback_and_no_page_loads_widget_scripts(site):
    for path in _lessons():
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if lesson_pages.WIDGET_VIEW in data:  # the Dashboard keeps its last frame as a PNG beside it
                    assert "image/png" in data, (path.stem, cell.source[:80])
    for page in _pages(site):
        text = (site / page).read_text()
        assert "widget-state+json" not in text and "jupyter-widgets" not in text and "require.js" not in text, page
    dashboards = [p.stem for p in _lessons() if "labkit.Dashboard(" in p.read_text()]
    assert dashboards  # their last frames are among the figures checked above and in the browser


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the test reports what matters itself
        pass


@pytest.fixture(scope="module")
def served(site) -> Iterator[tuple[str, object]]:
    """The site on a free port of 127.0.0.1, and a headless Chromium."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as playwright:
            browser = launch(playwright)
            yield f"http://127.0.0.1:{httpd.server_port}/", browser
            browser.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


class _Visit:
    """One browser page that records console errors from the site's own files, uncaught errors, and every
    request for another host (refused: no page may need the network)."""

    def __init__(self, browser, base: str) -> None:
        self.base, self.errors, self.external = base, [], []
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"{self.page.url}: {error}"))

    def _route(self, route) -> None:
        if route.request.url.startswith(self.base):
            route.continue_()
        else:
            self.external.append(route.request.url)
            route.abort()

    def _console(self, message) -> None:
        where = message.location.get("url", "")
        # Chromium asks for /favicon.ico by itself; no page of the site names one
        if message.type == "error" and where.startswith(self.base) and not where.endswith("/favicon.ico"):
            self.errors.append(f"{self.page.url}: {message.text} ({where})")

    def open(self, path: str) -> None:
        response = self.page.goto(self.base + path)
        assert response is not None and response.ok, (path, response and response.status)
        self.page.wait_for_load_state("load")


def _broken(site: Path, page: str, refs: list[str], base: str) -> list[str]:
    """The internal references of ``page`` (absolute URLs) to a file the site lacks, or to an id its page lacks."""
    broken = []
    for ref in refs:
        if not ref.startswith(base):
            continue
        url = urllib.parse.urlsplit(ref)
        target = site / urllib.parse.unquote(url.path.removeprefix("/"))
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            broken.append(f"{page} -> {ref}: no such file")
        elif url.fragment and target.suffix == ".html" and urllib.parse.unquote(url.fragment) not in _page(target).ids:
            broken.append(f"{page} -> {ref}: no such id")
    return broken


def test_the_link_check_sees_a_missing_file_and_a_missing_id(tmp_path):
    (tmp_path / "a.html").write_text('<p id="here">a</p>')
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "index.html").write_text("<p>b</p>")
    base = "http://127.0.0.1:1/"
    fine = [base + "a.html#here", base + "a.html", base + "a.html#", base + "folder/", "https://elsewhere.example/x"]
    assert _broken(tmp_path, "p", fine, base) == []
    assert len(_broken(tmp_path, "p", [base + "b.html", base + "a.html#gone", base + "folder/b.png"], base)) == 3


def test_every_page_opens_offline_without_errors_or_broken_links_and_lesson_figures_load(site, served):
    base, browser = served
    visit = _Visit(browser, base)
    broken, lessons = [], {f"notebooks/{p.stem}.html": p for p in _lessons()}
    for page in _pages(site):
        visit.open(page)
        refs = visit.page.eval_on_selector_all(
            "a[href], img[src], object[data], link[href], script[src]",
            "els => els.map(e => e.href || e.src || e.data || '')",
        )
        broken += _broken(site, page, refs, base)
        ids = _page(site / page).ids
        assert len(ids) == len(set(ids)), (page, sorted({i for i in ids if ids.count(i) > 1}))
        if page in lessons:
            visit.page.wait_for_function("() => Array.from(document.images).every(i => i.complete)")
            sizes = visit.page.eval_on_selector_all(
                "img", "imgs => imgs.map(i => [i.getAttribute('src'), i.naturalWidth])"
            )
            figures = [(src, width) for src, width in sizes if "_images/" in src]
            assert len(figures) == _png_outputs(nbformat.read(lessons[page], as_version=4)), page
            assert [src for src, width in figures if width <= 0] == [], page
    assert set(lessons) <= set(_pages(site))
    assert broken == [] and visit.errors == [] and visit.external == []
    for page, shot in (("notebooks/03_dynamic_batching.html", "lesson"), ("api.html", "api")):
        visit.open(page)
        visit.page.screenshot(path=str(ARTIFACTS / f"site-{shot}.png"))
    visit.open("notebooks/03_dynamic_batching.html")
    visit.page.locator("img[src*='_images/']").nth(2).scroll_into_view_if_needed()  # the Dashboard's last frame
    visit.page.screenshot(path=str(ARTIFACTS / "site-lesson-figure.png"))
    visit.context.close()


@pytest.mark.parametrize("term", SEARCH_TERMS)
def test_the_search_page_finds_a_lesson_term(site, served, term):
    base, browser = served
    visit = _Visit(browser, base)
    visit.open(f"search.html?q={urllib.parse.quote(term)}")
    visit.page.wait_for_selector("#search-results ul.search li a", timeout=20_000)
    found = visit.page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
    assert any("/notebooks/" in href for href in found), found
    visit.page.screenshot(path=str(ARTIFACTS / f"site-search-{re.sub(r'[^A-Za-z0-9_]', '_', term)}.png"))
    assert visit.errors == [] and visit.external == []
    visit.context.close()
