"""Fixtures that start a real Triton 23.12 (the embedded tritonserver 2.41.0)."""

from __future__ import annotations

import pytest

import labkit

pytest_plugins = ("pytester",)
# A user's project that tests/test_pytest_plugin.py runs with its own pytest; not our tests.
collect_ignore = ["plugin_example"]


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

