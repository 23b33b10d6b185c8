"""Every labkit error composes its message from its fields (labkit issue 50, item 3): no class takes a free-form
message, no raise site passes one, no bare LabkitError is raised, and no field given is left out of the text."""

from __future__ import annotations

import ast
import inspect
import pickle
import typing
from pathlib import Path

import pytest

import labkit.errors

ROOT = Path(labkit.__file__).parent
REPO = ROOT.parent

CLASSES = {name: getattr(labkit.errors, name) for name in labkit.errors.__all__}


def _sources() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if not rel.startswith("labkit/errors/"):
            found.append((rel, ast.parse(path.read_text(), rel)))
    return found


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_no_class_takes_a_message_positionally(name):
    parameters = inspect.signature(CLASSES[name]).parameters.values()
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert positional == [], f"{name} takes {positional} positionally: its fields are keyword-only"
    assert "message" not in [p.name for p in parameters], f"{name} takes a message: it composes its own"
    legacy = [p.name for p in parameters if p.kind is p.VAR_POSITIONAL]
    assert legacy == [], f"{name} takes *{legacy[0]}: its fields are keyword-only"


def test_no_raise_site_passes_a_message_and_none_raises_a_bare_labkit_error():
    bad = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and _called(node.exc) == "LabkitError":
                bad.append(f"{rel}:{node.lineno}: raise LabkitError(...): use the class of the case")
            if not isinstance(node, ast.Call) or _called(node) not in CLASSES:
                continue
            if node.args or any(k.arg == "message" for k in node.keywords):
                bad.append(f"{rel}:{node.lineno}: {_called(node)}(...) given a message: give its fields")
    assert bad == []


# -- every field given shows in the text --------------------------------------------------------------------

#: Fields that take one of a few values: each value must give its own text.
CHOICES = {
    ("RoomFileError", "problem"): ["no room", "unreadable", "unwritable"],
    ("SubmissionError", "problem"): ["too-large", "not-a-submission", "refused", "unreadable", "unreachable"],
    ("LabKernelError", "problem"): ["no answer", "failed"],
    ("SequenceError", "problem"): ["no-sequence-id", "rows"],
    ("ExecutionEnvError", "problem"): ["python", "numpy", "missing", "no activate"],
    ("EnsembleStepError", "problem"): ["not in the repository", "did not load", "no such input"],
    ("EnsembleStepError", "refused_by"): ["labkit", "triton"],
    ("RequestError", "refused_by"): ["labkit", "triton"],
    ("PythonEnvError", "problem"): [
        "python",
        "version",
        "unknown stub",
        "interpreter",
        "pip",
        "exists",
        "requirements",
        "runtime",
    ],
    ("PortTakenError", "service"): ["http", "room"],
}


def _sample(name: str, field: str, annotation: str, index: int) -> object:
    if (name, field) in CHOICES:
        return CHOICES[(name, field)][0]
    if "bool" in annotation:
        return True
    if "Sequence" in annotation:
        return [f"<{field}-a>", f"<{field}-b>"]
    if "float" in annotation:
        return 12.5 + index
    if "int" in annotation:
        return 4200 + index
    return f"<{field}>"


def _samples(name: str) -> dict[str, object]:
    hints = typing.get_type_hints(CLASSES[name].__init__)
    fields = [p for p in inspect.signature(CLASSES[name]).parameters.values() if p.kind is p.KEYWORD_ONLY]
    return {p.name: _sample(name, p.name, str(hints.get(p.name, "")), i) for i, p in enumerate(fields)}


def _shown(value: object) -> list[str]:
    if isinstance(value, float):
        return [f"{value:g}", f"{value:.1f}", f"{value:.0f}"]
    return [str(value), repr(value)]


@pytest.mark.parametrize("name", sorted(set(CLASSES) - {"LabkitError"}))
def test_the_text_mentions_every_field_given_and_each_is_an_attribute(name):
    cls, given = CLASSES[name], _samples(name)
    error = cls(**given)
    text = str(error)
    assert text == error.args[0] and text.strip(), name
    for field, value in given.items():
        assert getattr(error, field) == value or list(getattr(error, field)) == value, (name, field)
        if isinstance(value, bool) or (name, field) in CHOICES:
            other = False if isinstance(value, bool) else CHOICES[(name, field)][1]
            assert str(cls(**{**given, field: other})) != text, f"{name}.{field} does not change the text"
        elif isinstance(value, list):
            for item in value:
                assert str(item) in text, (name, field, text)
        else:
            assert any(shown in text for shown in _shown(value)), (name, field, text)
    assert type(pickle.loads(pickle.dumps(error))) is cls and str(pickle.loads(pickle.dumps(error))) == text


@pytest.mark.parametrize(("name", "field"), sorted(CHOICES))
def test_each_choice_of_a_few_values_gives_its_own_text(name, field):
    given = _samples(name)
    texts = {str(CLASSES[name](**{**given, field: value})) for value in CHOICES[(name, field)]}
    assert len(texts) == len(CHOICES[(name, field)]), (name, field)


def test_the_structure_is_the_class_s_headline_then_remedy_then_the_tool_s_words():
    error = labkit.errors.SetupError(
        needed_by="perf_analyzer", missing="libb64", reason="download failed", detail="line 1\nline 2", remedy="Retry"
    )
    assert str(error) == "perf_analyzer needs libb64: download failed. Retry.\n--- what it said ---\nline 1\nline 2"
    quiet = labkit.errors.SetupError(missing="espeak-ng", reason="not installed", remedy="apt-get install espeak-ng")
    assert str(quiet) == "espeak-ng: not installed; apt-get install espeak-ng."
