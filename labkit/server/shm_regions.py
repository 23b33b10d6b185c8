"""The Python backend's shared memory, as the machine Triton runs on sees it: each model instance's region
in ``/dev/shm`` (python_backend names them ``<shm-region-prefix-name><n>`` and hands the name to the
instance's stub on its command line), the space ``/dev/shm`` has left, and a refused request explained by it.

A request's inputs and outputs travel through the instance's region, which grows in steps of
``shm-growth-byte-size``. In a container ``/dev/shm`` is as large as Docker's ``--shm-size`` (labkit's
``shm_size=``, 64 MiB by Docker's default): a request larger than what is left fails with python_backend's
"Failed to increase the shared memory pool size", which names Docker's flag, not labkit's option.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import SetupError, SharedMemoryError

# Runs where Triton runs (the embedded server's machine, or inside the container): every stub process's
# region (its argv[2]) and instance (argv[8]), the region's size, and /dev/shm's free and total bytes.
_SCRIPT = """
import json, os, sys
prefix, found = sys.argv[1], {}
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        args = [a.decode(errors='replace') for a in open('/proc/%s/cmdline' % pid, 'rb').read().split(b'\\0')]
    except OSError:
        continue
    at = [i for i, a in enumerate(args) if a.endswith('/triton_python_backend_stub')][:1]
    if at and len(args) > at[0] + 8 and args[at[0] + 2].startswith(prefix):
        region, instance = args[at[0] + 2], args[at[0] + 8]
        try:
            found[region] = [instance, os.path.getsize('/dev/shm/' + region)]
        except OSError:
            pass
fs = os.statvfs('/dev/shm')
print(json.dumps({'regions': found, 'free': fs.f_bavail * fs.f_frsize, 'total': fs.f_blocks * fs.f_frsize}))
"""


@dataclass(frozen=True)
class ShmRegion:
    """One model instance's shared-memory region."""

    instance: str  # e.g. "add_sub_0_0"
    name: str  # its file in /dev/shm
    bytes: int


@dataclass(frozen=True)
class ShmUsage:
    """The Python backend's regions of one server, and what /dev/shm holds where Triton runs."""

    regions: list[ShmRegion]
    free_bytes: int
    total_bytes: int


def usage(server: Any) -> ShmUsage:
    """The regions of ``server``'s Python model instances (sorted by instance) and /dev/shm's space."""
    code, out, err = server.runtime.run_beside(["python", "-c", _SCRIPT, server.config.shm_prefix])
    if code != 0:
        raise SetupError(
            needed_by="labkit's shared-memory check",
            missing="/dev/shm where Triton runs",
            reason="unreadable",
            detail=err.strip()[-300:] or out.strip()[-300:],
            remedy="check that the server runs (lab.logs.tail())",
        )
    seen = json.loads(out)
    regions = [ShmRegion(instance, name, size) for name, (instance, size) in seen["regions"].items()]
    return ShmUsage(sorted(regions, key=lambda r: (r.instance, r.name)), seen["free"], seen["total"])


def serves_python(server: Any, config: dict) -> bool:
    """Whether a Python stub serves a model of this (loaded) config: the python backend, or a Python-based one."""
    backend = config.get("backend", "")
    return backend == "python" or (server.workspace.backend_dir / backend / "model.py").is_file()


def refusal(server: Any, model: str, needed_bytes: int, text: str) -> SharedMemoryError | None:
    """A SharedMemoryError when a request of ``needed_bytes`` (its inputs) cannot fit in what /dev/shm has
    left where Triton runs; None when it could (the refusal has another cause)."""
    try:
        now = usage(server)
    except SetupError:
        return None
    if needed_bytes <= now.free_bytes:
        return None
    shm_size = str(getattr(server.runtime, "shm_size", "") or "")
    if shm_size:
        todo = (
            f"Start the server with a larger shm_size (labkit.start(server='docker', shm_size='{_larger(needed_bytes, now)}'), "
            f"Docker's --shm-size): this container has shm_size={shm_size!r}"
        )
    else:
        todo = "Free /dev/shm on this machine (or give it more room: it is a tmpfs)"
    return SharedMemoryError(
        model=model,
        reason=text,
        needed_bytes=needed_bytes,
        free_bytes=now.free_bytes,
        total_bytes=now.total_bytes,
        shm_size=shm_size,
        remedy=todo,
    )


def _larger(needed: int, now: ShmUsage) -> str:
    """A shm_size (a power of two, in MiB, 64 at least) with room for the request's inputs and outputs
    beside what is in use."""
    mib = -(-(now.total_bytes - now.free_bytes + 2 * needed) // 2**20)
    return f"{max(64, 1 << (mib - 1).bit_length())}m"
