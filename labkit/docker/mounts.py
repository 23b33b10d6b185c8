"""Where a host folder appears inside a container: at the same path, so that paths in Triton's log,
in compiler messages and in the repository agree on both sides, unless that would hide the image's
own files (then under ``/labkit/``)."""

from __future__ import annotations

from pathlib import Path

# Host paths that would hide the image's own files if mounted at the same path in the container.
RESERVED = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt/tritonserver",
    "/opt/nvidia",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/lib",
    "/labkit",
)


def container_path(host: Path, fallback: str) -> str:
    """The same path as on the host, or ``fallback`` where that would hide image files."""
    text = host.as_posix()
    if text == "/" or any(text == r or text.startswith(r + "/") for r in RESERVED):
        return fallback
    return text
