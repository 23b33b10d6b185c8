"""A model's own Python packages: execution environments (``EXECUTION_ENV_PATH``) built for the Python of
the stub that runs them (``builder``), read without running them (``env_contents``), and which Python
each runtime's stubs embed (``stub_pythons``); ``command`` is `labkit python-env`."""

from .builder import PythonEnv, python_env

__all__ = ["PythonEnv", "python_env"]
