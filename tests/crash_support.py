"""A backend that crashes the server, shared by test_crash and its Docker run (test_docker)."""

from __future__ import annotations

import pytest

import labkit
import labkit.errors
from labkit.course import reference

SEGFAULT = """
#include "labkit/backend.hpp"
LABKIT_MODEL_STATE(labkit::ModelState)
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t count) {
  return labkit::execute(instance, requests, count, [](labkit::Batch&) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;  // a backend bug: the whole server goes down with it
  });
}
"""


def line_of(source: str, marker: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if marker in line)


def crash_site(server) -> tuple[str, str, str, int]:
    """(signal, uncaught exception, file, line) of the crash that ended ``server``, from its Crash's fields; the
    sentences made of them are checked once, in tests/unit/test_crash_report.py."""
    crash = server.crash()
    assert crash is not None and crash.where is not None, crash
    return crash.signal, crash.exception, crash.where.file, crash.where.line


def crash_with(server, source: str, **options) -> labkit.errors.ServerNotRunningError:
    """Build ``source`` as backend crashy for model crasher, send it a request, return the error."""
    cfg = labkit.model_config("crasher", "crashy", [("IN0", "INT32", [4])], [("OUT0", "INT32", [4])])
    server.repository.write_config(cfg)
    server.cpp_backend("crashy", source, ["crasher"], progress=False, **options)
    with pytest.raises(labkit.errors.ServerNotRunningError) as info:
        labkit.infer(server, "crasher", {"IN0": reference.np.zeros(4, reference.np.int32)})
    return info.value
