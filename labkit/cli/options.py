"""What several `labkit` commands share: --server and --image, the server they ask for, port and number
arguments, and which repositories get labkit's reference C++ backends."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..course import reference
from ..docker import cpu_image
from ..errors import RepositoryNotFoundError, SetupError
from ..native import deploy
from ..repository import ModelRepository
from ..server import create, kinds


def with_server(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add --server and --image to a command that starts Triton."""
    p.add_argument("--server", choices=kinds(), default="embedded", help="where Triton runs (default: embedded)")
    p.add_argument("--image", help="Docker image for --server docker (default: the offline CPU image)")
    return p


def server_for(args: argparse.Namespace, repository: Path | None = None, **config: Any) -> Any:
    """The server the command asked for (--server, --image), not yet started."""
    options = {"image": args.image or cpu_image.IMAGE} if args.server == "docker" else {}
    return create(args.server, repository, **options, **config)


def port_number(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535 (0: a free one), not {text!r}")
    return int(text)


def numbers(text: str, kind: type = int) -> list:
    try:
        return [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, not {text!r}") from None


def model_repository(path: Path) -> Path:
    """``path``, the model repository a command was given; RepositoryNotFoundError when no folder is there."""
    if not path.is_dir():
        raise RepositoryNotFoundError(path=str(path))
    return path


def builds_reference(args: argparse.Namespace, repo: Path) -> bool:
    """Only labkit's own models get labkit's reference C++ backends built (written into their version
    folders), or a person's when asked (--build-reference-backends); a person's repository is served as
    it is, its libraries included."""
    return args.build_reference_backends or reference.is_reference_repository(repo)


def check_own_library(repo: Path, model: str, backend_directory: str | None) -> None:
    """A person's model that names a reference backend (minimal, recommended, custom) is served with
    the person's library, never labkit's: refuse before a server starts when there is none to serve."""
    backend = ModelRepository(repo).read_config(model).backend
    if not (deploy.REFERENCE_DIR / backend).is_dir():
        return  # Triton says itself what is missing for any other backend (labkit never built those)
    library = f"libtriton_{backend}.so"
    places = [repo / model / library, *(repo / model).glob(f"*/{library}")]
    if backend_directory:
        places.append(Path(backend_directory) / backend / library)
    if not any(p.is_file() for p in places):
        raise SetupError(
            needed_by=f"Model {model!r} in {repo} (backend {backend!r})",
            reason="no backend library",
            remedy=f"There is no {library} in its folder"
            + (f" or in {backend_directory}" if backend_directory else "")
            + ", and labkit does not put its own reference backend in a repository of yours unasked. "
            f"Give --backend-directory DIR holding {backend}/{library} (`labkit build-backend {backend} SOURCE --out DIR` "
            f"writes one), put {library} in the model's version folder, or pass --build-reference-backends to measure "
            f"labkit's reference {backend!r} (written into the model's version folder)",
            missing=str(
                Path(backend_directory) / backend / library if backend_directory else repo / model / "1" / library
            ),
        )
