"""A bad argument of a public call is an OptionError (a LabkitError and a ValueError) naming the option, and
docker-py's errors become EngineError through one translator that keeps the engine's HTTP status."""

from __future__ import annotations

import docker.errors
import pytest
import requests

from labkit.docker.engine_errors import ENGINE_ERRORS, engine_error
from labkit.errors import EngineError, LabkitError, OptionError
from labkit.observe.perf_analyzer import perf
from labkit.server import launcher
from labkit.server.server_config import ServerConfig
from labkit.traffic.generator import Load


@pytest.mark.parametrize(
    ("call", "option"),
    [
        (lambda: ServerConfig(http_port=70000), "http_port"),
        (lambda: ServerConfig(http_port=9000, grpc_port=9000), "http_port, grpc_port and metrics_port"),
        (lambda: launcher("cloud"), "server"),
        (lambda: perf(None, "add_sub", concurrency=[1], request_rate=[10.0]), "concurrency and request_rate"),
        (lambda: perf(None, "add_sub", distribution="uniform"), "distribution"),
        (lambda: Load(None, "add_sub", {}, concurrency=0), "requests and concurrency"),
    ],
)
def test_a_bad_argument_is_an_option_error_naming_it(call, option):
    with pytest.raises(OptionError) as raised:
        call()
    assert raised.value.option == option and isinstance(raised.value, LabkitError | ValueError)


def _api_error(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("engine", response=response, explanation=explanation)


def test_the_translator_keeps_the_status_code_and_says_what_to_do():
    error = engine_error(_api_error(409, "removal in progress"), "remove container c", "Run it again")
    assert isinstance(error, EngineError) and error.status_code == 409
    assert (error.doing, error.detail, error.remedy) == ("remove container c", "removal in progress", "Run it again")
    broken = engine_error(requests.exceptions.ConnectionError("reset by peer"), "build x")
    assert (broken.status_code, broken.doing, broken.detail, broken.remedy) == (0, "build x", "reset by peer", "")
    assert isinstance(_api_error(500, "x"), ENGINE_ERRORS) and isinstance(
        docker.errors.BuildError("r", []), ENGINE_ERRORS
    )
