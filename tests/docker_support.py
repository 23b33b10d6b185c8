"""Helpers the Docker tests share (test_docker.py, test_docker_backends.py); the container
fixture ``dserver`` is in conftest.py."""

from __future__ import annotations

import docker.errors

import labkit
import labkit.repository
from labkit.course.reference import add_sub_source
from labkit.docker import engine as lk_engine

ADD_SUB_SOURCE = add_sub_source()


def engine_client():
    return lk_engine.connect()


def gone(client, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
        return False
    except docker.errors.NotFound:
        return True


def successes(server, model: str) -> int:
    return server.stats(model)["model_stats"][0]["inference_stats"]["success"]["count"]


def config_named(name: str) -> labkit.repository.ModelConfig:
    cfg = labkit.repository.ModelRepository(labkit.reference_repository()).read_config("add_sub")
    cfg.name = name
    return cfg
