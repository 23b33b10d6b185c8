"""C++ backends: labkit's declarations of the Triton 23.12 C API (``include/triton/core``), the helper
layer (``include/labkit/backend.hpp``), the reference backends (``backends/``), toolchains, builds
cached by content, and deploys at a new path per build."""

from .build import Build, build_backend, official_headers, reference_source
from .toolchain import LocalToolchain, Toolchain

__all__ = ["Build", "LocalToolchain", "Toolchain", "build_backend", "official_headers", "reference_source"]
