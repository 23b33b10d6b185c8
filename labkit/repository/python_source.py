"""Turn what a notebook holds (a string, a file, a class) into the text of a Triton model.py."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from pathlib import Path

from ..errors import RepositoryError

_TRITON_CLASS = "TritonPythonModel"
_PB_IMPORT = "import triton_python_backend_utils as pb_utils"


def _class_source(cls: type) -> tuple[list[str], str]:
    """The source of a class, also when it was defined in a notebook cell.

    inspect.getsource fails on classes defined in IPython cells (their module has no file),
    so find the cell through a method's code object and cut the class out with ast.
    """
    code = next(
        (f.__code__ for f in vars(cls).values() if inspect.isfunction(f)),
        None,
    )
    if code is None:
        raise RepositoryError(
            subject=f"Class {cls.__name__}",
            problem="has no methods",
            missing="execute()",
            remedy="a Triton model needs at least execute()",
        )
    lines = linecache.getlines(code.co_filename)
    if not lines:
        raise RepositoryError(
            subject=f"The source of class {cls.__name__}",
            problem="is not available",
            remedy="pass the model as a string or a file instead",
        )
    text = "".join(lines)
    module = ast.parse(text)
    for node in ast.walk(module):
        if (
            isinstance(node, ast.ClassDef)
            and node.name == cls.__name__
            and node.end_lineno is not None  # always set by ast.parse; None only for hand-built nodes
            and node.lineno <= code.co_firstlineno <= node.end_lineno
        ):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            body = textwrap.dedent("".join(lines[start - 1 : node.end_lineno]))
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            # Only the cell's imports the class uses: the rest of a notebook may not import in the stub.
            imports = [
                n
                for n in module.body
                if isinstance(n, (ast.Import, ast.ImportFrom))
                and (
                    any((a.asname or a.name).split(".")[0] in used for a in n.names)
                    or (isinstance(n, ast.ImportFrom) and n.module == "__future__")
                )
            ]
            # __future__ imports must stay first in the generated file
            imports.sort(key=lambda n: not (isinstance(n, ast.ImportFrom) and n.module == "__future__"))
            # get_source_segment is None only for nodes without positions, which ast.parse never makes
            segments = [ast.get_source_segment(text, n) for n in imports]
            return [seg for seg in segments if seg is not None], body
    raise RepositoryError(
        subject=code.co_filename,
        problem=f"holds no definition of class {cls.__name__} that labkit can find",
        remedy="pass the model as a string or a file instead",
    )


def model_source(source: str | Path | type) -> str:
    """model.py text from a string of code, a path to a .py file, or a class with execute()."""
    if isinstance(source, type):
        imports, body = _class_source(source)
        if source.__name__ != _TRITON_CLASS:
            body += f"\n\n{_TRITON_CLASS} = {source.__name__}\n"
        future = [i for i in imports if i.startswith("from __future__")]
        rest = [i for i in imports if i not in future]
        header = "\n".join([*future, "import numpy as np", _PB_IMPORT, *rest])
        text = f"{header}\n\n\n{body}"
    elif isinstance(source, Path):
        text = source.read_text()
    elif isinstance(source, str):
        text = source
    else:
        raise TypeError(f"model source must be str, pathlib.Path or a class, not {type(source).__name__}")
    if _TRITON_CLASS not in text:
        raise RepositoryError(
            subject="The model source",
            problem=f"defines no class {_TRITON_CLASS}",
            missing=_TRITON_CLASS,
            remedy="Triton's Python backend looks for it by that name",
        )
    return text if text.endswith("\n") else text + "\n"
