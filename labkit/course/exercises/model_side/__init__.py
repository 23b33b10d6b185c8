"""Files an exercise check serves as model.py in a model of its own; they run in Triton's Python stub,
not in labkit, and none of them imports labkit. Read them with ``source(name)``."""

from importlib import resources


def source(name: str) -> str:
    """The text of ``<name>.py`` in this folder."""
    return resources.files(__package__).joinpath(f"{name}.py").read_text()
