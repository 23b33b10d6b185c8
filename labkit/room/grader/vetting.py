"""Which of a participant's exercise cells the grader runs in its kernel: none whose Python the kernel
would execute beyond what the starter does. A magic cell (``%%triton_python``, ``%%triton_cpp``) keeps the
first line it shipped with, and its body is a model's or a backend's source, run by Triton's own
processes and judged by behaviour. A plain cell holds only names set to constants and the calls its
starter makes (``labkit.model_config(...)``, ``lab.load(...)``), with constants or those names as
arguments. So an exercise cell cannot patch labkit's checks, or print a verdict, in the grader's kernel.
Python's own ``ast`` reads the cells; nothing of them runs here.
"""

from __future__ import annotations

import ast

from ...course.catalogue import REGISTRY

# numbers made from constants are still constants (a participant may write np.int64(2000))
_NUMBERS = {
    "int",
    "float",
    *(
        f"{np}.{t}"
        for np in ("np", "numpy")
        for t in (
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "float16",
            "float32",
            "float64",
        )
    ),
}
_OPERATORS = (ast.UAdd, ast.USub, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)  # no ** (9**9**9)


def refusal(exercise: str, source: str) -> str:
    """Why the grader will not run ``source`` as ``exercise``'s cell (what to change), or "" when it will."""
    starter = REGISTRY[exercise].starter() if exercise in REGISTRY else ""
    first = _first_line(starter)
    if first.startswith("%%"):
        if _first_line(source) != first:
            return (
                f"the grader runs this cell only as the notebook gave it: keep its first line `{first}` "
                "and write your code below it."
            )
        return ""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"the grader runs this cell as plain Python, and line {exc.lineno} is not ({exc.msg})."
    allowed = _calls(starter) | _NUMBERS
    names: set[str] = set()
    for statement in tree.body:
        line = statement.lineno
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and _value_ok(statement.value, names, allowed)
        ):
            names.add(statement.targets[0].id)
        elif not (isinstance(statement, ast.Expr) and _call_ok(statement.value, names, allowed)):
            calls = ", ".join(f"{c}(...)" for c in sorted(allowed - _NUMBERS)) or "no call"
            return (
                f"line {line}: the grader runs only names set to values and {calls} in this cell; "
                "write the answer as the starter does."
            )
    return ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text.strip() else ""


def _calls(starter: str) -> set[str]:
    """The dotted names the starter calls (``labkit.model_config``, ``lab.load``, ...)."""
    try:
        tree = ast.parse(starter)
    except SyntaxError:
        return set()
    return {name for node in ast.walk(tree) if isinstance(node, ast.Call) and (name := _dotted(node.func))}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _value_ok(node: ast.AST, names: set[str], allowed: set[str]) -> bool:
    """A constant (numbers, strings, and lists, tuples, sets, dicts and arithmetic of values), a name this
    cell set, or an allowed call."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_value_ok(e, names, allowed) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _value_ok(k, names, allowed) for k in node.keys) and all(
            _value_ok(v, names, allowed) for v in node.values
        )
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, _OPERATORS) and _value_ok(node.operand, names, allowed)
    if isinstance(node, ast.BinOp):
        return (
            isinstance(node.op, _OPERATORS)
            and _value_ok(node.left, names, allowed)
            and _value_ok(node.right, names, allowed)
        )
    return _call_ok(node, names, allowed)


def _call_ok(node: ast.AST, names: set[str], allowed: set[str]) -> bool:
    if not isinstance(node, ast.Call) or _dotted(node.func) not in allowed:
        return False
    return all(not isinstance(a, ast.Starred) and _value_ok(a, names, _NUMBERS) for a in node.args) and all(
        k.arg is not None and _value_ok(k.value, names, _NUMBERS) for k in node.keywords
    )
