"""Docker for labkit, through docker-py: the engine connection (``engine``), docker-py's errors as labkit's
(``engine_errors``), leftover containers of killed sessions (``orphans``), getting images (``images``), the
offline CPU image recipe (``cpu_image``), compiling inside a container (``compiler``) and the paths a
container sees (``mounts``). The launcher that runs Triton in a container is ``labkit.server.launchers.docker``.

Nothing is imported here: docker-py costs about 0.15 s to import, paid only by who uses Docker.
"""

__all__ = ["compiler", "cpu_image", "engine", "engine_errors", "images", "mounts", "orphans"]
