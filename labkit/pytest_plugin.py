"""The `labkit` pytest plugin: a real Triton 23.12 serving your model repository, for your own tests.

Installed with labkit (entry point ``pytest11``); nothing to configure for the default layout::

    # tests/test_doubler.py        (model_repository/doubler/ beside tests/)
    import numpy as np

    def test_doubler_doubles(triton):
        out = triton.infer("doubler", {"X": np.array([1, 2], np.float32)})
        assert out["Y"].tolist() == [2, 4]

Options: ``--triton-repo PATH`` (default: ``model_repository/`` in pytest's root folder, if it exists),
``--triton-server embedded|docker`` and ``--triton-image`` (for docker; default the offline CPU image).
The ``triton`` fixture starts one server for the session with every model in the repository loaded
(labkit's reference C++ backends are built first); a model that fails to load ends the session
with Triton's reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .client.inference import infer
from .course import reference
from .docker.cpu_image import IMAGE as CPU_IMAGE
from .errors import LabkitError
from .native import deploy
from .server import create, kinds
from .server.base import TritonServer


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("labkit", "Triton 23.12 for your backends (labkit)")
    group.addoption(
        "--triton-repo",
        metavar="PATH",
        default=None,
        help="model repository to serve (default: model_repository/ in the root folder, if it exists)",
    )
    group.addoption(
        "--triton-server", choices=kinds(), default="embedded", help="where Triton runs (default: embedded)"
    )
    group.addoption("--triton-image", default=None, help="Docker image for --triton-server docker")


class Triton:
    """The started server (every TritonServer attribute: ``http_port``, ``grpc_port``, ``client()``,
    ``logs``, ``load()`` ...) plus ``infer()`` bound to it."""

    def __init__(self, server: TritonServer) -> None:
        self.server = server

    def __getattr__(self, name: str) -> Any:
        return getattr(self.server, name)

    def infer(
        self, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str] | None = None, **options: Any
    ) -> dict[str, np.ndarray]:
        """One request (``protocol="grpc"`` for gRPC); the outputs by name. See ``labkit.infer``."""
        return infer(self.server, model, inputs, outputs, **options)

    def __repr__(self) -> str:
        return f"<labkit Triton fixture {self.server!r}>"


def _repository(config: pytest.Config) -> Path:
    given = config.getoption("--triton-repo")
    path = Path(given) if given else config.rootpath / "model_repository"
    if not path.is_dir():
        raise pytest.UsageError(
            f"labkit: no model repository at {path}; pass --triton-repo PATH (a folder of <model>/config.pbtxt)."
        )
    return path.resolve()


@pytest.fixture(scope="session")
def triton(request: pytest.FixtureRequest) -> Iterator[Triton]:
    """A started Triton 23.12 serving ``--triton-repo`` with all its models loaded."""
    config = request.config
    repository = _repository(config)
    kind = config.getoption("--triton-server")
    options: dict[str, Any] = {}
    if kind == "docker":
        options["image"] = config.getoption("--triton-image") or CPU_IMAGE
    own = reference.is_reference_repository(repository)  # labkit's own models: served from a copy
    try:
        server = create(kind, None if own else repository, **options).start()
    except LabkitError as exc:
        pytest.exit(f"labkit: Triton did not start: {exc}", returncode=3)
    with server:
        if own:
            reference.copy_into(server)
        for model in server.repository.models():
            try:
                deploy.load_models(server.models, [model])
            except LabkitError as exc:
                reason = getattr(exc, "reason", "") or str(exc)
                pytest.exit(f"labkit: model {model!r} in {repository} did not load:\n{reason}", returncode=3)
        yield Triton(server)
