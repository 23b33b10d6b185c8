"""The HTTP / gRPC choice as one value, and a load's failed requests as records, without a server."""

from __future__ import annotations

import importlib.metadata
import sys
import threading

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import labkit
import labkit.errors
import labkit.server
import labkit.traffic.generator
from labkit.errors import (
    InferenceError,
    InputSizeError,
    ModelNotFoundError,
    RequestError,
    RequestTimeoutError,
)
from labkit.plumbing.endpoints import Endpoints
from labkit.plumbing.transport import HttpClient, Transport
from labkit.traffic.generator import LoadErrorRecord, _kind

_WHERE = Endpoints("localhost", 8000, 8001, 8002)


def test_a_transport_is_its_name_and_knows_its_module_url_and_port():
    assert Transport.of("http") is Transport.HTTP and Transport.of(Transport.GRPC) is Transport.GRPC
    assert Transport.GRPC == "grpc" and f"{Transport.HTTP}" == "http" and Transport.choices() == ["http", "grpc"]
    assert Transport.HTTP.module is httpclient and Transport.GRPC.module is grpcclient
    assert Transport.GRPC.url(_WHERE) == "localhost:8001" and Transport.HTTP.port(_WHERE) == 8000
    assert isinstance(Transport.HTTP.client(_WHERE, network_timeout_s=5), HttpClient)
    assert isinstance(Transport.GRPC.client(_WHERE), grpcclient.InferenceServerClient)


def test_the_installed_tritonclient_is_the_client_of_triton_2_41_with_its_shared_memory_utilities():
    assert importlib.metadata.version("tritonclient").startswith("2.41."), "pip install -e '.[test]' pins it"
    # Their imports need what pyproject pins beside it: pkg_resources (setuptools<81), cuda.cudart (cuda-python 12.3).
    importlib.import_module("tritonclient.utils.shared_memory")
    importlib.import_module("tritonclient.utils.cuda_shared_memory")  # no GPU needed to import it


def test_an_http_client_closed_in_one_thread_and_released_in_another_closes_once(monkeypatch):
    """tritonclient 2.41 closes again in __del__, which gevent refuses in another thread than the closing one."""
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(f"{u.exc_type.__name__} in {u.object!r}"))
    held = [Transport.HTTP.client(_WHERE)]
    held[0].close()
    held[0].close()  # a second close is nothing
    releasing = threading.Thread(target=held.clear)  # the last reference goes while this thread lives
    releasing.start()
    releasing.join()
    with pytest.raises(InferenceServerException):
        HttpClient("http://localhost:8000")  # tritonclient refuses a scheme; the half-made client closes nothing
    assert not held and seen == []


def test_an_unknown_protocol_is_a_labkit_error_naming_the_choices():
    with pytest.raises(labkit.errors.UnknownProtocolError) as info:
        Transport.of("htp")
    assert isinstance(info.value, ValueError) and info.value.protocol == "htp" and info.value.known == ["http", "grpc"]
    with pytest.raises(labkit.errors.UnknownProtocolError):
        labkit.client.inference.prepare("https", {})


def test_a_failed_request_is_kept_as_a_record_whose_kind_comes_from_its_error_class():
    timeout = RequestTimeoutError(model="m", limit_s=1)
    assert _kind(timeout, None) == "timeout"
    assert _kind(ModelNotFoundError(model="m", loaded=[]), None) == "not_loaded"
    assert _kind(RequestError(model="m"), None) == "refused"
    assert _kind(InputSizeError(model="m", input="A", needed=4, carried=3, unit="bytes"), None) == "refused"
    assert _kind(InferenceError(model="m"), ConnectionResetError()) == "connection"
    assert _kind(InferenceError(model="m"), None) == "failed"
    record = LoadErrorRecord("timeout", "m", "no answer", 0.25)
    assert str(record) == "no answer" and labkit.traffic.generator.LoadErrorRecord is LoadErrorRecord
    with pytest.raises(AttributeError):
        record.kind = "failed"  # frozen
