"""labkit.plumbing.archives.extract: tarfile's filters where Python has them (3.11.4 on), and the same refusal
where it has not, run under Debian 12's own python3 (3.11.2, the room images' Python) when this machine has it."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from labkit.errors import SetupError
from labkit.plumbing.archives import extract

ROOT = Path(__file__).resolve().parents[2]
OLD_PYTHON = "/usr/bin/python3"  # Debian 12's: 3.11.2, without tarfile's filters


def _archive(path: Path, *names: str, link: str = "") -> Path:
    with tarfile.open(path, "w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"ok"))
        if link:
            info = tarfile.TarInfo("bin/python3")
            info.type, info.linkname = tarfile.SYMTYPE, link
            tar.addfile(info)
    return path


def test_an_archive_unpacks_and_a_link_to_an_absolute_path_stays_with_the_tar_filter(tmp_path):
    archive = _archive(tmp_path / "env.tar", "env/lib/a.py", link="/usr/bin/python3.11")
    with tarfile.open(archive) as tar:
        extract(tar, tmp_path / "out", "tar")
    assert (tmp_path / "out" / "env" / "lib" / "a.py").read_text() == "ok"
    assert os.readlink(tmp_path / "out" / "bin" / "python3") == "/usr/bin/python3.11"


def test_a_member_outside_the_folder_is_refused(tmp_path):
    archive = _archive(tmp_path / "bad.tar", "../escaped.txt")
    with tarfile.open(archive) as tar, pytest.raises((SetupError, tarfile.FilterError)):
        extract(tar, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()


_OLD = """
import sys, tarfile
from pathlib import Path
from labkit.errors import SetupError
from labkit.plumbing.archives import extract
assert not hasattr(tarfile, "data_filter")
folder = Path(sys.argv[1])
with tarfile.open(folder / "env.tar") as tar:
    extract(tar, folder / "out", "tar")
print((folder / "out" / "env" / "lib" / "a.py").read_text())
try:
    with tarfile.open(folder / "bad.tar") as tar:
        extract(tar, folder / "out")
except SetupError as exc:
    print(exc.reason)
print((folder / "escaped.txt").exists())
"""


@pytest.mark.skipif(not Path(OLD_PYTHON).exists(), reason="no Debian python3 here")
def test_under_a_python_without_filters_it_unpacks_and_refuses_the_same(tmp_path):
    version = subprocess.run(
        [OLD_PYTHON, "-c", "import tarfile; print(hasattr(tarfile, 'data_filter'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if version == "True":
        pytest.skip(f"{OLD_PYTHON} has tarfile's filters: nothing to show")
    _archive(tmp_path / "env.tar", "env/lib/a.py", link="/usr/bin/python3.11")
    _archive(tmp_path / "bad.tar", "../escaped.txt")
    run = subprocess.run(
        [OLD_PYTHON, "-c", _OLD, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["ok", "unsafe", "archive", "member", "False"]
