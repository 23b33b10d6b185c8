"""`labkit doctor`'s lines for the real-model lessons' data: fonts for lesson 17, espeak-ng for 18, both optional."""

from __future__ import annotations

from labkit.cli import doctor
from labkit.course.lessons import real_models_data


def test_fonts_and_espeak_are_found_here_and_named_with_their_package_when_missing(monkeypatch, tmp_path):
    fonts, speaker = doctor._real_model_data()
    assert fonts.ok and speaker.ok  # .ci/run installs both
    monkeypatch.setitem(real_models_data.FONTS, "Liberation Mono", str(tmp_path / "none.ttf"))
    monkeypatch.setenv("PATH", str(tmp_path))
    fonts, speaker = doctor._real_model_data()
    assert not fonts.ok and not fonts.required and fonts.detail == "missing Liberation Mono"
    assert "fonts-liberation" in fonts.line() and fonts.line().startswith("[--  ]")
    assert not speaker.ok and not speaker.required and "apt-get install espeak-ng" in speaker.line()
