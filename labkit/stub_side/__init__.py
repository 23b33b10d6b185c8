"""Files labkit places beside Triton's Python backend; they run in the stub's world, not in labkit's.

``launcher.py`` becomes ``backends/python/triton_python_backend_stub`` and ``pb_utils_shim.py``
becomes ``backends/python/triton_python_backend_utils.py`` (Triton's own two move to ``stub/``);
``labkit_stub.py`` goes beside them. None of them imports labkit. The names below are the folder's
contract with labkit's side (labkit.server.stubs installs the files; labkit.stuck and labkit.breakpoints
read what the stub records), kept here, at the bottom, so that all of them import downward.
"""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
#: file in this folder -> its name in the Python backend's folder
PLACED = {
    "launcher.py": "triton_python_backend_stub",
    "pb_utils_shim.py": "triton_python_backend_utils.py",
    "labkit_stub.py": "labkit_stub.py",
}
STUB = "triton_python_backend_stub"
UTILS = "triton_python_backend_utils.py"
#: Triton's files that labkit's stand-ins run from ``python/stub/``.
TRITON_OWN = (STUB, UTILS)
TRITON_DIR = "stub"
RECORDS_DIR = "labkit-stubs"
DEBUG_DIR = "labkit-debug"
#: What install() puts in the python/ folder besides Triton's library.
OWN_NAMES = frozenset({*PLACED.values(), TRITON_DIR, RECORDS_DIR, DEBUG_DIR})

__all__ = ["DEBUG_DIR", "FOLDER", "OWN_NAMES", "PLACED", "RECORDS_DIR", "STUB", "TRITON_DIR", "TRITON_OWN", "UTILS"]
