"""C++ backends: labkit's declarations of the Triton 23.12 C API, the helper layer, builds and deploys."""

from .build import Build, build_backend, official_headers, reference_source

__all__ = ["Build", "build_backend", "official_headers", "reference_source"]
