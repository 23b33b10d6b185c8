"""Fixtures that start a real Triton 23.12 (the embedded tritonserver 2.41.0), and the Docker engine
and offline CPU image the Docker tests need."""

from __future__ import annotations

import os
import signal
import tarfile
import tempfile
from pathlib import Path

import pytest
from ci_rules import in_ci, skip_or_fail
from filelock import FileLock
from swarm_support import Swarm, leftovers, missing_tools
from xdist.scheduler import LoadFileScheduling

import labkit
import labkit.errors
import labkit.server
from labkit.docker import cpu_image as lk_image, engine as lk_engine
from labkit.native import triton_sources

pytest_plugins = ("pytester",)
# A user's project that tests/test_pytest_plugin.py runs with its own pytest; not our tests.
collect_ignore = ["plugin_example"]

# Official-mode C++ builds read Triton's pinned r23.12 sources from here (as .ci/run sets it), not GitHub.
_SHARED_SOURCES = Path(__file__).resolve().parents[1].parent / "shared" / "triton-r23.12"
if not os.environ.get("LABKIT_TRITON_SOURCES") and _SHARED_SOURCES.is_dir():
    os.environ["LABKIT_TRITON_SOURCES"] = str(_SHARED_SOURCES)
# The Zero to JupyterHub chart's values schema (chart 4.4.0), for the room's Kubernetes values.
_SHARED_Z2JH = _SHARED_SOURCES.parent / "z2jh" / "values.schema.yaml"
if not os.environ.get("LABKIT_Z2JH_SCHEMA") and _SHARED_Z2JH.is_file():
    os.environ["LABKIT_Z2JH_SCHEMA"] = str(_SHARED_Z2JH)


SWARM_TEST_FILES = "test_room_swarm"  # they share the session's one swarm (the `swarm` fixture below)


class _SwarmFilesTogether(LoadFileScheduling):
    """`--dist loadfile` (the Makefile's): a file's tests (a notebook's cells) stay together on one worker, and the
    swarm's test files count as one file, so that one worker builds one swarm. (xdist's loadgroup would do it by
    marks, but it renames the tests' ids in a way pytest 9 no longer reads.)"""

    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        return SWARM_TEST_FILES if Path(scope).name.startswith(SWARM_TEST_FILES) else scope


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadFileScheduling | None:
    return _SwarmFilesTogether(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.fixture(scope="session")
def server():
    """One server for the read-mostly tests, with add_sub and add_sub_batching loaded."""
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        for name in ("add_sub", "add_sub_batching"):
            srv.repository.copy_model_from(labkit.reference_repository(), name)
            srv.load(name)
        yield srv


@pytest.fixture()
def triton_default_ports():
    """Triton's own ports (8000-8002), which `labkit serve` and the official clients use: held by one test at a
    time across the suite's parallel workers (`make test` runs pytest-xdist)."""
    with FileLock(Path(tempfile.gettempdir()) / "labkit-tests-triton-default-ports.lock"):
        yield


@pytest.fixture()
def kernel_interrupts():
    """Ctrl-C raises KeyboardInterrupt, as in a notebook's kernel, whatever this process inherited: a shell
    that starts a job in the background (a CI script's `cmd &`) starts it with SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture()
def fresh_server():
    """A server of the test's own, for tests that break things or stop it."""
    with labkit.server.EmbeddedServer() as srv:
        srv.start()
        srv.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        srv.load("add_sub")
        yield srv


@pytest.fixture(scope="session")
def backend_examples() -> Path:
    """Triton's backend r23.12 examples/ (backends, model_repos, clients), from the pinned sources
    (LABKIT_TRITON_SOURCES, which .ci/run and this file set to ../shared/triton-r23.12 where it exists)."""
    try:
        return triton_sources.source("backend") / "examples"
    except labkit.errors.SetupError as exc:
        skip_or_fail(f"Triton's r23.12 backend sources are not at hand: {exc}")


@pytest.fixture(scope="session")
def python_backend_examples(tmp_path_factory) -> Path:
    """python_backend r23.12's examples/ as they are in its pinned archive."""
    archive = Path(os.environ.get("LABKIT_TRITON_SOURCES", "")) / "python_backend-examples-r23.12.tar.gz"
    if not archive.is_file():
        skip_or_fail(f"LABKIT_TRITON_SOURCES names no folder holding {archive.name} (.ci/run sets it)")
    target = tmp_path_factory.mktemp("python_backend")
    with tarfile.open(archive) as tar:
        tar.extractall(
            target, members=[m for m in tar.getmembers() if m.name.startswith("python_backend/examples")], filter="data"
        )
    return target / "python_backend" / "examples"


@pytest.fixture(scope="session")
def z2jh_schema() -> dict:
    """The values schema of the Zero to JupyterHub chart 4.4.0 (JSON Schema written as YAML), read from
    LABKIT_Z2JH_SCHEMA, which .ci/run and this file set to ../shared/z2jh/values.schema.yaml."""
    import yaml

    path = Path(os.environ.get("LABKIT_Z2JH_SCHEMA", ""))
    if not path.is_file():
        skip_or_fail(f"LABKIT_Z2JH_SCHEMA names no values.schema.yaml ({path}; .ci/run sets it)")
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="session")
def engine():
    """A Docker engine: skipped without one, saying why, unless CI is set (then the test fails)."""
    ok, why = lk_engine.engine_status()
    if not ok:
        if in_ci():
            pytest.fail(f"CI is set, so the Docker tests must run, but no engine is reachable: {why}")
        pytest.skip(f"no Docker engine is reachable (with CI=true this fails instead): {why}")
    client = lk_engine.connect()
    yield client
    client.close()


@pytest.fixture(scope="session")
def cpu_image(engine):
    """labkit/tritonserver:23.12-cpu, built here if missing or outdated (about 80 s), else reused."""
    return lk_image.build_image(progress=False).tag


@pytest.fixture(scope="session")
def lab_image(cpu_image):
    """The participant image labkit/lab:23.12-cpu, built on the CPU image here if missing or outdated
    (about 70 s the first time), else reused: no room test relies on another having built it. With
    LABKIT_ROOM_TEST_LAB set, under that tag instead (a development run that leaves the shared tag alone)."""
    from room_board_support import LAB_TAG

    from labkit.room.hub.lab_image import build_image

    return build_image(tag=LAB_TAG).tag


@pytest.fixture(scope="session")
def grader_image(request, engine):
    """The grader image, built on the participant image (or on LABKIT_ROOM_TEST_BASE, a development
    stand-in, which must exist) if missing or outdated, else reused."""
    from room_board_support import BASE, LAB_TAG, TAG

    from labkit.room.grader.image import build_grader_image

    if BASE == LAB_TAG:
        request.getfixturevalue("lab_image")
    elif not any(BASE in image.tags for image in engine.images.list()):
        skip_or_fail(f"LABKIT_ROOM_TEST_BASE names {BASE}, which is not built")
    client = lk_engine.connect(timeout=600)  # a grader build copies labkit into an image: slow on vfs
    try:
        build_grader_image(client, base=BASE, tag=TAG)
    finally:
        client.close()
    return TAG


@pytest.fixture(scope="module")
def dserver(cpu_image):
    """A Triton container from the CPU image with add_sub loaded, one per test module; removed after."""
    from docker_support import engine_client, gone

    from labkit.server.launchers.docker import DockerServer

    with DockerServer(image=cpu_image) as srv:
        srv.start(timeout_s=120)
        srv.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        srv.load("add_sub")
        yield srv
    assert gone(engine_client(), srv.runtime.container.id)


@pytest.fixture(scope="session")
def swarm(lab_image, grader_image, engine):
    """A manager and two workers, the lab and grader images loaded into all three (the manager's copies are what
    `room up` checks the workers for); all gone at the session's end (the swarm tests are one xdist group: one swarm)."""
    if os.geteuid() != 0 or missing_tools():
        skip_or_fail(f"a swarm in namespaces needs root and {missing_tools() or 'ip, dockerd'}")
    with Swarm.create() as built:
        built.load_image(lab_image, built.nodes, engine)
        built.load_image(grader_image, built.nodes, engine)
        yield built
        swarm_id = built.id
    assert leftovers(swarm_id) == []
