"""The bottom wing: what several wings share and that knows nothing of Triton's models or of labkit's
other wings (it imports only ``labkit.errors``). The one wait loop (``polling``), a request under way
(``pending``), free ports (``ports``), whose containers and processes (``owner``), children that end with
their parent (``process_groups``), a launch's host and ports (``endpoints``), the HTTP / gRPC choice
(``transport``), labkit's cache and one-time downloads (``downloads``), the wheel's tritonserver
(``triton_dist``) and whether a GPU is visible (``gpu_probe``)."""

__all__ = [
    "downloads",
    "endpoints",
    "gpu_probe",
    "owner",
    "pending",
    "polling",
    "ports",
    "process_groups",
    "transport",
    "triton_dist",
]
