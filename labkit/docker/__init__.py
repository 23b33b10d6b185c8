"""Docker for labkit, through docker-py: the engine connection (``engine``), labkit's leftover
containers (``leftovers``), getting images (``images``), the offline CPU image recipe
(``cpu_image``) and compiling inside a container (``toolchain``). The launcher that runs Triton in a
container is ``labkit.server.launchers.docker``.

Nothing is imported here: docker-py costs about 0.15 s to import, paid only by who uses Docker.
"""
