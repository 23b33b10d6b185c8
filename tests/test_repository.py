"""The model repository with a server: a backend name refused by it, and a read-only repository
served (the writer alone, without a server: tests/unit/test_repository.py)."""

from __future__ import annotations

import errno
import subprocess

import pytest

import labkit
import labkit.errors
import labkit.repository
import labkit.server

ADD_SUB = labkit.course.reference.add_sub_source()


def test_bad_backend_name_refused(fresh_server):
    with pytest.raises(labkit.errors.InvalidNameError):
        fresh_server.python_backend("../../evil", ADD_SUB)


@pytest.fixture()
def read_only(tmp_path):
    """A folder holding add_sub on a file system mounted read-only (root ignores file modes, not this)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "labkit-test", str(folder)], check=True)
    try:
        labkit.repository.ModelRepository(folder).copy_model_from(labkit.reference_repository(), "add_sub")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_read_only_repository_gives_a_labkit_error(read_only):
    repo = labkit.repository.ModelRepository(read_only)
    assert repo.models() == ["add_sub"]  # reading works
    calls = [
        lambda: repo.write_config(labkit.model_config("new", "python", [("X", "FP32", [1])], [("Y", "FP32", [1])])),
        lambda: repo.write_file("add_sub", "model.py", "# edited"),
        lambda: repo.mark_changed("add_sub"),
        lambda: repo.copy_model_from(labkit.reference_repository(), "add_sub"),
    ]
    for call in calls:
        with pytest.raises(labkit.errors.RepositoryWriteError) as info:
            call()
        assert info.value.errno == errno.EROFS and info.value.path.startswith(str(read_only))
    assert (read_only / "add_sub" / "config.pbtxt").exists()  # nothing removed
    with labkit.server.EmbeddedServer(read_only) as lab:  # a server serves it; editing a model says why it cannot
        lab.start()
        lab.load("add_sub")
        with pytest.raises(labkit.errors.RepositoryWriteError) as info:
            lab.python_model("add_sub", (read_only / "add_sub" / "1" / "model.py").read_text())
        assert info.value.errno == errno.EROFS
        assert labkit.check_add_sub(lab).ok
