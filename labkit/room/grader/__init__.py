"""Judging a participant's save in a grader container: the board's side (``runner``; ``swarm_runner`` on a
swarm), the container's side (``entry``, ``python -m labkit.room.grader.entry``), which cells run (``vetting``,
``slices``), the one sandbox of Docker, Swarm and Kubernetes (``sandbox``) and the image (``image``). What passes
between them is labkit.room.protocol."""
