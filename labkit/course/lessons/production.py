"""Lesson (notebook 11, the Python backend in production): which Python each runtime's stubs embed, and the
shared-memory regions of a server's Python model instances, through labkit's own readers of them.

    dist = production.triton_wheel()            # the nvidia-pytriton wheel's Triton: server, Python backend, stubs
    production.runtime_stubs("docker", image)   # the stub a runtime serves, and every one it holds
    production.shm_usage(lab).regions           # one region per Python model instance, in /dev/shm
"""

from __future__ import annotations

from ...plumbing import triton_dist
from ...plumbing.triton_dist import TritonDist
from ...python_envs.stub_pythons import StubRuntime, runtime_stubs
from ...server.shm_regions import ShmUsage, usage as shm_usage

__all__ = ["ShmUsage", "StubRuntime", "TritonDist", "runtime_stubs", "shm_usage", "triton_wheel"]


def triton_wheel() -> TritonDist:
    """The nvidia-pytriton wheel's Triton as labkit's embedded server runs it: its server folder (with
    ``python_backend_stubs/``, one stub per Python), its Python backend, and ``stub_for(version)``."""
    return triton_dist.locate()
