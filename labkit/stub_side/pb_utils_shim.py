"""Installed as backends/python/triton_python_backend_utils.py, the module every model.py imports:
it runs Triton's own module (kept unchanged in stub/) in its place, then installs labkit's hooks in
the stub (labkit_stub: breakpoints, where os._exit was called, crash stacks). The stub's Python
ignores PYTHONPATH and imports nothing of ours before model.py does this import."""

import os as _labkit_os

_labkit_real = _labkit_os.path.join(
    _labkit_os.path.dirname(_labkit_os.path.abspath(__file__)), "stub", "triton_python_backend_utils.py"
)
with open(_labkit_real) as _labkit_file:
    exec(compile(_labkit_file.read(), _labkit_real, "exec"))

import labkit_stub as _labkit_stub  # noqa: E402 - beside this file, on the stub's sys.path

_labkit_stub.install()
del _labkit_os, _labkit_real, _labkit_file, _labkit_stub
