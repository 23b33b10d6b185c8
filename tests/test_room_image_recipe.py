"""The lab image records what went into it (labkit's package files, the notebooks, the recipe, the base
image), so that `room up` rebuilds it when one of them changed and says which."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from labkit.docker import cpu_image
from labkit.room.hub import lab_image as image

pytestmark = [pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent


def test_the_lab_image_matches_this_tree_and_a_change_names_its_input(lab_image, engine, tmp_path):
    labels = engine.images.get(lab_image).labels
    base = engine.images.get(cpu_image.IMAGE).id
    parts = image.tree_parts(base)
    assert labels[image.RECIPE_LABEL] == image.recipe_hash(base, *_copied(tmp_path / "src"))
    assert image.rebuild_reason(lab_image, labels, parts) == ""  # what `room up` reuses without a word

    notebooks = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", notebooks)
    edited = notebooks / "01_python_backend.ipynb"
    edited.write_text(edited.read_text().replace("Triton", "Triton!", 1))
    assert (
        image.rebuild_reason(lab_image, labels, image.tree_parts(base, notebooks=notebooks))
        == f"the notebooks changed since {lab_image} was built: rebuilding it"
    )

    tree, _ = _copied(tmp_path / "tree")  # a checkout whose labkit differs by one line
    with open(tree / "labkit" / "room" / "board.py", "a") as handle:
        handle.write("# changed\n")
    changed = image.tree_parts(base, root=tree, notebooks=ROOT / "notebooks")
    assert (
        image.rebuild_reason(lab_image, labels, changed)
        == f"labkit's package files changed since {lab_image} was built: rebuilding it"
    )
    assert image.rebuild_reason(lab_image, None, parts) == f"{lab_image} is not on this Docker engine: building it"
    older = {k: v for k, v in labels.items() if k != image.PARTS_LABEL}
    assert "older labkit" in image.rebuild_reason(lab_image, older, changed)


def _copied(into: Path) -> tuple[Path, Path]:
    into.mkdir()
    image._sources(ROOT, into)
    return into, ROOT / "notebooks"
