"""``NAME=VALUE`` definitions a person passes to a build (``--define``, ``%%triton_cpp --define``,
``defines=``): to CMake as ``-DNAME=VALUE`` (a CMake project's options and cache variables), or to the
compiler as ``-DNAME=VALUE`` (a macro of a source build).

    parse(["TRITON_ENABLE_METRICS=OFF"])   -> {"TRITON_ENABLE_METRICS": "OFF"}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..errors import ConfigError

#: A CMake cache entry: a name (CMake allows "-", as in FETCHCONTENT_SOURCE_DIR_REPO-CORE), an optional
#: ":TYPE", then "=" and the value (which may be empty or hold spaces and further "=").
_CMAKE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.+-]*)(:[A-Z]+)?=(.*)$", re.DOTALL)
#: A macro for the compiler: a C identifier.
_MACRO = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Defines = Mapping[str, str] | Iterable[str] | None


def parse(given: Defines) -> dict[str, str]:
    """``given`` ("NAME=VALUE" texts, or a mapping) as a dict, in order; ConfigError for one without
    a name or "=" (the last of one name wins, as on a command line)."""
    if given is None:
        return {}
    if isinstance(given, Mapping):
        items = [f"{name}={value}" for name, value in given.items()]
    elif isinstance(given, str):
        items = [given]
    else:
        items = list(given)
    parsed: dict[str, str] = {}
    for item in items:
        found = _CMAKE.match(str(item))
        if found is None:
            raise ConfigError(
                problem="is not NAME=VALUE",
                remedy="--define takes NAME=VALUE (e.g. TRITON_ENABLE_METRICS=OFF)",
                field="define",
                value=str(item),
            )
        parsed[found.group(1) + (found.group(2) or "")] = found.group(3)
    return parsed


def compiler_flags(given: Defines) -> list[str]:
    """The compiler's ``-DNAME=VALUE`` flags for ``given``; a name that is no C identifier is refused."""
    flags = []
    for name, value in parse(given).items():
        if not _MACRO.match(name):
            raise ConfigError(
                problem="is not a macro name for the compiler; a source build defines macros",
                remedy="use letters, digits and _, not first a digit",
                field="define",
                value=name,
            )
        flags.append(f"-D{name}={value}")
    return flags


def cmake_args(defines: Mapping[str, str]) -> list[str]:
    """CMake's ``-DNAME=VALUE`` arguments for ``defines``."""
    return [f"-D{name}={value}" for name, value in defines.items()]


def name_of(entry: str) -> str:
    """A cache entry's name without its ":TYPE" (what two entries are compared by)."""
    return entry.split(":", 1)[0]
