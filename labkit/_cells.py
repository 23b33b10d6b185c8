"""Which notebook cell is running: lets ``labkit.start()`` tell a re-run of its cell from a new server.

Re-running ``lab = labkit.start()`` rebinds ``lab``; the server it named would keep running, unreachable.
A cell is known by the id JupyterLab sends with each execution, or else by its code (ipykernel names
a cell's code file after a hash of its text) and the line of the call.
"""

from __future__ import annotations

import sys
from typing import Any

from .server.base import TritonServer

_by_cell: dict[str, TritonServer] = {}


def cell_key(depth: int) -> str | None:
    """The cell that made the call ``depth`` frames above this one; None outside an IPython kernel."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    if shell is None:
        return None
    kernel: Any = getattr(shell, "kernel", None)
    cell_id = kernel.get_parent().get("metadata", {}).get("cellId") if kernel is not None else None
    if cell_id:
        return f"cell {cell_id}"
    frame = sys._getframe(depth + 1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def replace_earlier(key: str | None) -> None:
    """Stop the server the same cell started before, if it still runs, and say so in one line (stdout:
    a notebook shows it under the cell)."""
    earlier = _by_cell.pop(key, None) if key else None
    if earlier is not None and earlier.alive:
        urls = earlier.endpoints.http_url
        earlier.stop()
        print(f"labkit: stopped the server this cell started before ({urls}); the new one replaces it.")


def remember(key: str | None, server: TritonServer) -> None:
    if key:
        _by_cell[key] = server
