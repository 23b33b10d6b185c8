"""C++ backends: labkit's declarations of the Triton 23.12 C API (``include/triton/core``), the helper
layer (``include/labkit/backend.hpp``, compiled once per toolchain from ``src/``), the reference
backends (``backends/``), toolchains, builds cached by content, deploys at a new path per build,
crash reports at source lines (``crash``, ``symbols``), exported CMake projects (``export``), a
backend's own CMake project built as its repository builds it (``cmake_build``) and CUDA builds
(``cuda_build``, with nvcc and cudart from ``cuda_kit``)."""

from .build import Build, BuildOptions, build_backend, official_headers, reference_source
from .cmake_build import CMakeBuild, build_cmake
from .export import build_project, export_backend
from .toolchain import LocalToolchain, Toolchain

__all__ = [
    "Build",
    "BuildOptions",
    "CMakeBuild",
    "LocalToolchain",
    "Toolchain",
    "build_backend",
    "build_cmake",
    "build_project",
    "export_backend",
    "official_headers",
    "reference_source",
]
