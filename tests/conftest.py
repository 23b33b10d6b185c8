"""Fixtures that start a real Triton 23.12 (the embedded tritonserver 2.41.0), and the Docker engine
and offline CPU image the Docker tests need."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import labkit
from labkit.docker import cpu_image as lk_image
from labkit.docker import engine as lk_engine

pytest_plugins = ("pytester",)
# A user's project that tests/test_pytest_plugin.py runs with its own pytest; not our tests.
collect_ignore = ["plugin_example"]

# Official-mode C++ builds read Triton's pinned r23.12 sources from here (as .ci/run sets it), not GitHub.
_SHARED_SOURCES = Path(__file__).resolve().parents[1].parent / "shared" / "triton-r23.12"
if not os.environ.get("LABKIT_TRITON_SOURCES") and _SHARED_SOURCES.is_dir():
    os.environ["LABKIT_TRITON_SOURCES"] = str(_SHARED_SOURCES)


@pytest.fixture(scope="session")
def server():
    """One server for the read-mostly tests, with add_sub and add_sub_batching loaded."""
    with labkit.EmbeddedServer() as srv:
        srv.start()
        for name in ("add_sub", "add_sub_batching"):
            srv.repository.copy_model_from(labkit.reference_repository(), name)
            srv.load(name)
        yield srv


@pytest.fixture()
def fresh_server():
    """A server of the test's own, for tests that break things or stop it."""
    with labkit.EmbeddedServer() as srv:
        srv.start()
        srv.repository.copy_model_from(labkit.reference_repository(), "add_sub")
        srv.load("add_sub")
        yield srv



def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def engine():
    """A Docker engine: skipped without one, saying why, unless CI is set (then the test fails)."""
    ok, why = lk_engine.engine_status()
    if not ok:
        if _in_ci():
            pytest.fail(f"CI is set, so the Docker tests must run, but no engine is reachable: {why}")
        pytest.skip(f"no Docker engine is reachable (with CI=true this fails instead): {why}")
    client = lk_engine.connect()
    yield client
    client.close()


@pytest.fixture(scope="session")
def cpu_image(engine):
    """labkit/tritonserver:23.12-cpu, built here if missing or outdated (about 80 s), else reused."""
    return lk_image.build_image(progress=False).tag


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
