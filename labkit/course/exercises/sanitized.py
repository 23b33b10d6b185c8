"""A backend written against Triton's C API alone, built with AddressSanitizer and served by a Triton of
the check's own, so that a raw-pointer mistake (a write past the output buffer, a request used after
its release) is caught where it happens instead of corrupting the person's server.

    with sanitized_run(source, "rawsum") as run:   # BuildError if it does not compile bare
        run.server ...                                # an EmbeddedServer with the ASan runtime preloaded
        run.memory_error()                            # what ASan reported so far, or None

The library is compiled from the source alone: only Triton's C API headers are on the include path and
no labkit helper is linked, so the code is judged for what it does itself. The server runs with the
sanitizer in recovery mode (an error is reported and the server goes on).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...errors import BuildError, LabkitError, SetupError
from ...native.build import INCLUDE_DIR, dynamic_symbols
from ...native.toolchain import LocalToolchain
from ...server import base
from ...server.launchers.embedded import EmbeddedServer

FLAGS = [
    "-std=c++17",
    "-fPIC",
    "-shared",
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fsanitize=address",
    "-fsanitize-recover=address",
]
_ERROR = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.M)


@dataclass(frozen=True)
class MemoryReport:
    """The first error AddressSanitizer reported: its kind, the access, and the source line (0 if unknown)."""

    kind: str
    access: str
    line: int

    def describe(self) -> str:
        where = f" at line {self.line} of your cell" if self.line else ""
        return f"{self.kind} ({self.access}){where}" if self.access else f"{self.kind}{where}"


@dataclass
class SanitizedRun:
    server: EmbeddedServer
    library: Path
    folder: Path

    def memory_error(self) -> MemoryReport | None:
        """The first memory error ASan reported in this run, or None."""
        reports = sorted(self.folder.glob("asan.*"))
        for path in reports:
            text = path.read_text(errors="replace")
            found = _ERROR.search(text)
            if found:
                access = _ACCESS.search(text)
                line = re.search(rf"{re.escape(self.library.stem.removeprefix('libtriton_'))}\.cc:(\d+)", text)
                return MemoryReport(
                    found.group(1),
                    f"{access.group(1)} of {access.group(2)} bytes" if access else "",
                    int(line.group(1)) if line else 0,
                )
        return None

    def calls(self, function: str) -> bool | None:
        """Whether the library calls ``function`` (it is among its undefined dynamic symbols); None if its
        symbols cannot be read."""
        try:
            return function in dynamic_symbols(self.library)[1]
        except LabkitError:
            return None


def runtime() -> str:
    """The AddressSanitizer runtime of this machine's compiler (libasan.so)."""
    toolchain = LocalToolchain()
    code, out = toolchain.run(["c++", "-print-file-name=libasan.so"], Path(tempfile.gettempdir()))
    path = Path(out.strip())
    if code != 0 or not path.is_absolute() or not path.exists():
        raise SetupError(
            needed_by="A sanitized build",
            missing="libasan.so",
            reason="the compiler has no AddressSanitizer runtime",
            remedy="on Debian it comes with g++",
        )
    return str(path.resolve())


def bare_build(source: str, backend: str, folder: Path) -> Path:
    """Compile ``source`` into ``folder/libtriton_<backend>.so`` with only Triton's C API headers; a
    BuildError (``compiler_output`` set) if it does not compile."""
    include = folder / "include"
    include.mkdir(parents=True, exist_ok=True)
    shutil.copytree(INCLUDE_DIR / "triton", include / "triton")  # not labkit/: the helper layer stays out
    src = folder / f"{backend}.cc"
    src.write_text(source)
    library = folder / f"libtriton_{backend}.so"
    code, out = LocalToolchain().run(["c++", *FLAGS, f"-I{include}", str(src), "-o", str(library)], folder)
    if code != 0:
        output = out.replace(str(src), f"{backend}.cc").strip()
        raise BuildError(
            problem="does not compile with Triton's C API alone",
            remedy="read the compiler messages below",
            backend=backend,
            compiler_output=output,
        )
    return library


FOLDER_PREFIX = "labkit-asan-check-"


@contextmanager
def sanitized_run(source: str, backend: str) -> Iterator[SanitizedRun]:
    """Build ``source`` bare with ASan and start a Triton of its own with the ASan runtime; on exit that
    server is ended and every file removed."""
    # the pid in the name says whose it is: checks in other processes make and remove folders of their own
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
    server: EmbeddedServer | None = None
    try:
        library = bare_build(source, backend, folder)
        # Killed, not asked to exit: with an ASan-built backend loaded, Triton 2.41 never finishes its exit
        # (a library's exit handler deadlocks on the locale lock). Nothing of it is kept.
        server = EmbeddedServer(
            kill_on_end=True,
            env={
                "LD_PRELOAD": runtime(),
                "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=0:log_path={folder / 'asan'}",
            },
        )
        keep = base._current  # the notebook's magics talk to the server started last: keep it theirs
        try:
            server.start()
        finally:
            base._current = keep
        yield SanitizedRun(server, library, folder)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
