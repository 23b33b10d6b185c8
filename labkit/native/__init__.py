"""C++ backends: labkit's declarations of the Triton 23.12 C API (``include/triton/core``), the helper
layer (``include/labkit/backend.hpp``, compiled once per toolchain from ``src/``), the reference
backends (``backends/``), toolchains, builds cached by content, deploys at a new path per build,
crash reports at source lines (``crash``, ``symbols``) and exported CMake projects (``export``)."""

from .build import Build, build_backend, official_headers, reference_source
from .export import build_project, export_backend
from .toolchain import LocalToolchain, Toolchain

__all__ = [
    "Build", "LocalToolchain", "Toolchain", "build_backend", "build_project", "export_backend", "official_headers",
    "reference_source",
]
