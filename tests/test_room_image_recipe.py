"""The lab image records what went into it (labkit's package files, the notebooks, the real models, the
recipe, the base image), so that `room up` rebuilds it when one of them changed and says which; and it
runs the real-model lesson offline: the models, their environments, espeak-ng and the fonts are in it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from labkit.course.lessons import real_models
from labkit.docker import cpu_image
from labkit.room.hub import lab_image as image, lab_models

pytestmark = [pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "real_models"


def test_the_lab_image_matches_this_tree_and_a_change_names_its_input(lab_image, engine, tmp_path):
    labels = engine.images.get(lab_image).labels
    base = engine.images.get(cpu_image.IMAGE).id
    parts = image.tree_parts(base)
    assert labels[image.RECIPE_LABEL] == image.recipe_hash(base, *_copied(tmp_path / "src"), EXAMPLES)
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
    changed = image.tree_parts(base, root=tree, notebooks=ROOT / "notebooks", examples=EXAMPLES)
    assert (
        image.rebuild_reason(lab_image, labels, changed)
        == f"labkit's package files changed since {lab_image} was built: rebuilding it"
    )
    examples = tmp_path / "real_models"  # a model's config changed by one comment
    shutil.copytree(EXAMPLES, examples)
    with open(examples / "ocr_rec" / "config.pbtxt", "a") as handle:
        handle.write("# changed\n")
    assert (
        image.rebuild_reason(lab_image, labels, image.tree_parts(base, examples=examples))
        == f"the real models (examples/real_models) changed since {lab_image} was built: rebuilding it"
    )
    assert image.rebuild_reason(lab_image, None, parts) == f"{lab_image} is not on this Docker engine: building it"
    older = {k: v for k, v in labels.items() if k != image.PARTS_LABEL}
    assert "older labkit" in image.rebuild_reason(lab_image, older, changed)


def _copied(into: Path) -> tuple[Path, Path]:
    into.mkdir()
    image._sources(ROOT, into)
    return into, ROOT / "notebooks"


# Run in a lab container as its user: the OCR models served from the image's examples/real_models, a drawn page
# read through `ocr`, and what labkit's cache of environments held before and after (nothing may be built).
IN_THE_LAB = """
import json, os, labkit
from labkit.lessons import real_models
cache = os.path.join(os.environ["XDG_CACHE_HOME"], "labkit", "python-envs")
before = sorted(os.listdir(cache))
lab = labkit.start()
try:
    envs = real_models.serve(lab, real_models.OCR_MODELS, progress=None)
    found = real_models.read(lab, real_models.render(real_models.LINES[:3]))
    spoken = len(real_models.speech("hello"))
finally:
    lab.stop()
print("RESULT " + json.dumps({"repository": str(real_models.repository()), "envs": sorted(map(str, envs.values())),
    "found": found, "before": before, "after": sorted(os.listdir(cache)), "spoken": spoken}))
"""


def test_the_lab_image_serves_the_real_models_with_no_network(lab_image, engine):
    container = engine.containers.run(
        lab_image, ["python3", "-c", IN_THE_LAB], detach=True, network_mode="none", shm_size="256m"
    )
    try:
        code = container.wait(timeout=300).get("StatusCode")
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert code == 0, logs[-3000:]
    result = json.loads(next(line for line in logs.splitlines() if line.startswith("RESULT "))[7:])
    assert result["repository"] == str(real_models.IMAGE_REPOSITORY)  # not a checkout: the image's copy
    assert result["envs"] and all(env.startswith(f"{lab_models.CACHE}/labkit/python-envs/") for env in result["envs"])
    assert result["after"] == result["before"]  # every environment was there: none built, none unpacked
    drawn = list(real_models.LINES[:3])
    assert len(result["found"]) == len(drawn) and real_models.character_accuracy(drawn, result["found"]) >= 0.95
    assert result["spoken"] > real_models.RATE // 10  # espeak-ng spoke: at least 0.1 s of audio
