"""Files labkit places beside Triton's Python backend; they run in the stub's world, not in labkit's.

``launcher.py`` becomes ``backends/python/triton_python_backend_stub`` and ``pb_utils_shim.py``
becomes ``backends/python/triton_python_backend_utils.py`` (Triton's own two move to ``stub/``);
``labkit_stub.py`` goes beside them. None of them imports labkit.
"""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
#: file in this folder -> its name in the Python backend's folder
PLACED = {
    "launcher.py": "triton_python_backend_stub",
    "pb_utils_shim.py": "triton_python_backend_utils.py",
    "labkit_stub.py": "labkit_stub.py",
}
