"""Where official-mode builds find Triton's r23.12 sources (labkit.native.triton_sources), offline."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from labkit.errors import SetupError
from labkit.native import triton_sources

SHARED = os.environ.get("LABKIT_TRITON_SOURCES", "")


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "labkit"


@pytest.fixture()
def archives():
    if not SHARED or not Path(SHARED, "backend-r23.12.tar.gz").is_file():
        pytest.skip("LABKIT_TRITON_SOURCES names no folder with the pinned archives (.ci/run sets it)")
    return Path(SHARED)


def test_archives_are_unpacked_once_into_the_cache(archives, cache, monkeypatch):
    monkeypatch.setenv(triton_sources.ENV, str(archives))
    folders = triton_sources.include_dirs()
    assert [f.parent.name.split("-")[0] for f in folders] == ["core", "backend", "common"]
    assert all(f.is_relative_to(cache) for f in folders)
    assert (folders[1] / "triton" / "backend" / "backend_model.h").is_file()
    assert triton_sources.source("backend") == folders[1].parent  # the second call finds the same folder


def test_unpacked_folders_are_used_where_they_lie(archives, cache, tmp_path, monkeypatch):
    monkeypatch.setenv(triton_sources.ENV, str(archives))
    laid = tmp_path / "laid"
    shutil.copytree(triton_sources.source("common"), laid / "common")
    monkeypatch.setenv(triton_sources.ENV, str(laid))
    assert triton_sources.source("common") == laid / "common"


def test_a_folder_without_the_sources_is_a_setup_error_saying_what_to_set(cache, tmp_path, monkeypatch):
    monkeypatch.setenv(triton_sources.ENV, str(tmp_path))
    with pytest.raises(SetupError) as info:
        triton_sources.source("core")
    assert info.value.missing == str(tmp_path / "core-include-r23.12.tar.gz")
    assert info.value.reason == "no such file"
    assert triton_sources.ENV in info.value.remedy


def test_the_whole_core_tree_comes_from_its_own_archive(archives, cache, tmp_path, monkeypatch):
    monkeypatch.setenv(triton_sources.ENV, str(archives))
    core = triton_sources.tree("core")
    assert (core / "CMakeLists.txt").is_file() and (core / "src" / "tritonserver_stub.cc").is_file()
    assert core != triton_sources.source("core") and core.is_relative_to(cache)  # not the include-only folder
    assert triton_sources.tree("backend") == triton_sources.source("backend")  # already whole
    laid = tmp_path / "laid"  # an unpacked core/ of include/ only does not pass for the whole tree
    shutil.copytree(triton_sources.source("core"), laid / "core")
    monkeypatch.setenv(triton_sources.ENV, str(laid))
    with pytest.raises(SetupError) as info:
        triton_sources.tree("core")
    assert (info.value.missing, info.value.reason) == (str(laid / "core-r23.12.tar.gz"), "no such file")
