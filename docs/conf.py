"""The course as a website (`make site`): Sphinx with MyST-NB and sphinx-book-theme, built offline.

Sources: the lesson notebooks as saved (docs/notebooks links to ../notebooks; every file that matches the
course's pattern is a page, nothing to list here), never executed, so a page shows the outputs nbval checks;
labkit.course.lesson_pages makes each lesson's page from its saved text. Beside them: this folder's pages,
which include the README's user sections rather than copy them; the API reference from the docstrings of
every name in ``labkit.__all__``, and the CLI reference from labkit's argparse parsers. Mermaid diagrams are
drawn into SVG at build time by mermaidx (Mermaid 11 in an embedded JavaScript engine): no CDN, no browser.
"""

from __future__ import annotations

import shlex
import sys
import types
from pathlib import Path

from sphinx.application import Sphinx

import labkit
from labkit.course import exercises, lesson_pages, schedule

project = "labkit"
author = "labkit's authors"
copyright = "labkit's authors"
release = labkit.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinxarg.ext", "sphinxcontrib.mermaid"]
root_doc = "index"
include_patterns = ["*.md", f"notebooks/{schedule.NOTEBOOK_PATTERN}"]

# The notebooks as saved: what nbval checks is what a page shows.
nb_execution_mode = "off"
# No ipywidgets scripts from a CDN (lesson_pages leaves static fallbacks), no scripts from outputs.
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
nb_mime_priority_overrides = [
    ("html", lesson_pages.WIDGET_VIEW, None),
    ("html", "application/javascript", None),
]
myst_fence_as_directive = ["mermaid"]
myst_heading_anchors = 3  # the README's links to its own sections (#serving-a-repository)

mermaid_output_format = "svg"
mermaid_cmd = shlex.join([sys.executable, "-m", "mermaidx", "--quiet", "--background", "white"])

# autodoc: labkit's __all__, in its (sorted) order. The lazy names (plots, Dashboard, ...) are imported first,
# so that autodoc, which lists a module's members from dir(), sees every one of them.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
for _name in labkit.__all__:
    getattr(labkit, _name)

html_theme = "sphinx_book_theme"
html_title = "labkit · Triton 23.12 backends"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": False,  # it offers the page's source, which the site does not copy (below)
}
# pydata-sphinx-theme logs a console error on a page without a mode; the diagrams are drawn on white
html_context = {"default_mode": "light"}
# Pages only: a lesson's saved .ipynb is the participant's (make lab, the room), not a download of the site.
html_copy_source = False


def _api_modules() -> str:
    """A section per module in ``labkit.__all__`` (automodule needs a module's own name, not labkit's alias),
    without the members documented as labkit's own names above it."""
    sections = []
    for name in labkit.__all__:
        module = getattr(labkit, name)
        if not isinstance(module, types.ModuleType):
            continue
        shown = [n for n in labkit.__all__ if getattr(module, n, None) is getattr(labkit, n)]
        exclude = f"   :exclude-members: {', '.join(shown)}\n" if shown else ""
        sections.append(
            f"\n(api-{name})=\n## `labkit.{name}`\n\n"
            f"```{{eval-rst}}\n.. automodule:: {module.__name__}\n   :members:\n{exclude}```\n"
        )
    return "".join(sections)


#: What a lesson's page takes from labkit besides its notebook: a change to one reads the lessons again.
LESSON_INPUTS = sorted(
    str(path)
    for path in [Path(lesson_pages.__file__), *Path(exercises.__file__).parent.glob("*.py")]
    + [*(Path(exercises.__file__).parent / "cells").iterdir()]
)


def _generated(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname.startswith("notebooks/"):
        source[0] = lesson_pages.page_source(source[0], Path(docname).name)
        for path in LESSON_INPUTS:
            app.env.note_dependency(path)
    elif docname == "api":
        source[0] += _api_modules()


def setup(app: Sphinx) -> None:
    app.connect("source-read", _generated)
