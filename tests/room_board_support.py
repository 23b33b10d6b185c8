"""What the board's Docker tests share: the grader image, a room's volumes, and a participant's saves."""

from __future__ import annotations

import io
import os
import tarfile
import time
import uuid

import nbformat
from ci_rules import skip_or_fail

from labkit.docker import engine as lk_engine
from labkit.exercises import REGISTRY
from labkit.room import grader
from labkit.room.settings import GRADER_IMAGE, PARTICIPANT_IMAGE, ROOM_LABEL

NOTEBOOK = "01_python_backend.ipynb"
NOTEBOOKS_DIR = os.path.join(os.path.dirname(__file__), "..", "notebooks")
# the participant image the grader is built from; LABKIT_ROOM_TEST_BASE picks another (a development
# stand-in with labkit's requirements), and then the grader gets a test tag of its own
BASE = os.environ.get("LABKIT_ROOM_TEST_BASE", PARTICIPANT_IMAGE)
TAG = GRADER_IMAGE if BASE == PARTICIPANT_IMAGE else "labkit-test/grader:dev"
# a started but wrong 01-bad-request: it raises for a bad request, which fails every request of that execute
WRONG_BAD_REQUEST = """%%triton_python divide
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            if (b == 0).any():
                raise ValueError("INPUT1 holds a 0")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a / b)]))
        return responses
"""


def room_engine():
    """A docker-py client with a long timeout (a vfs engine copies a whole image per container)."""
    ok, why = lk_engine.engine_status()
    if not ok:
        skip_or_fail(f"no Docker engine is reachable: {why}")
    return lk_engine.connect(timeout=600)


class RoomVolumes:
    """A test room's id and its participants' volumes; ``close()`` removes its containers and volumes."""

    def __init__(self, client, image: str) -> None:
        self.client = client
        self.id = f"t{uuid.uuid4().hex[:8]}"
        self.image = image
        self._lab = None  # a created (never started) container standing in for the participants' labs

    def volume(self, user: str) -> str:
        return grader.participant_volume(self.id, user)

    def save(self, user: str, nb: nbformat.NotebookNode, name: str = NOTEBOOK, folder: str = "") -> None:
        """Write a notebook into ``user``'s volume, owned by uid 1000, as their JupyterLab would save it."""
        name = f"{folder}/{name}" if folder else name
        if self.volume(user) not in {v.name for v in self.client.volumes.list()}:
            self.client.volumes.create(self.volume(user), labels={ROOM_LABEL: self.id})
        data = nbformat.writes(nb).encode()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if folder:
                info = tarfile.TarInfo(folder)
                info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, 0o755, 1000, 100, time.time()
                tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), 0o644, 1000, 100, time.time()
            tar.addfile(info, io.BytesIO(data))
        box = self.client.containers.create(self.image, "true", network_mode="none", labels={ROOM_LABEL: self.id},
                                            volumes={self.volume(user): {"bind": "/work", "mode": "rw"}})
        try:
            box.put_archive("/work", buffer.getvalue())
        finally:
            box.remove(force=True, v=True)

    def close(self) -> None:
        for container in self.client.containers.list(all=True, filters={"label": f"{ROOM_LABEL}={self.id}"}):
            container.remove(force=True, v=True)
        for volume in self.client.volumes.list(filters={"name": f"labkit-room-{self.id}-"}):
            volume.remove(force=True)


def notebook(cells: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """Notebook 01 as shipped, with the given exercise cells (by id, e.g. ``solution("01-output2")``)."""
    cells = cells or {}
    nb = nbformat.read(os.path.join(NOTEBOOKS_DIR, NOTEBOOK), as_version=4)
    for cell in nb.cells:
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag.removeprefix("exercise:") in cells:
                cell.source = cells[tag.removeprefix("exercise:")]
    return nb


def solution(exercise: str) -> str:
    return REGISTRY[exercise].solution()
