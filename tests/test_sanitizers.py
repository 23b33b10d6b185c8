"""The helper layer and the reference backends built with AddressSanitizer, serving a real Triton
under load: no memory error (out-of-bounds, use-after-free, double free) in labkit's code.

Leak checking is off: a Triton 2.41 process running with the ASan runtime does not finish its
shutdown (it is killed after the grace period), so LeakSanitizer never gets to report."""

from __future__ import annotations

import glob
from pathlib import Path

import labkit
import labkit.server
from labkit.course import reference
from labkit.native import reference_source

ASAN = "/usr/lib/x86_64-linux-gnu/libasan.so.8"  # gcc 12's runtime, shipped with g++ on Debian 12
BACKENDS = {"minimal": "minimal_batching", "recommended": "recommended_batching", "custom": "custom_passthrough"}


def test_reference_backends_under_address_sanitizer(tmp_path):
    reports = tmp_path / "asan"
    server = labkit.server.EmbeddedServer(
        workdir=tmp_path / "work",
        env={"LD_PRELOAD": ASAN, "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=0:log_path={reports}"},
    )
    with server.start():
        assert "libasan" in Path(f"/proc/{server.runtime.triton_pid}/maps").read_text()
        for backend, model in BACKENDS.items():
            server.repository.copy_model_from(reference.repository(), model)
            flags = ["-fsanitize=address", "-fno-omit-frame-pointer", "-g"]
            server.cpp_backend(backend, reference_source(backend), [model], extra_flags=flags, progress=False)
        for model in BACKENDS.values():
            for concurrency in (1, 8):  # single requests and full batches (gather/scatter across requests)
                requests = 40 if concurrency == 1 else 400  # a lone request waits out the queue delay
                result = labkit.run_load(
                    server, model, reference.sample_inputs(model, batch=2), requests=requests, concurrency=concurrency
                )
                assert result.count == requests and not result.errors
        assert labkit.check_passthrough(server, "custom_passthrough", concurrent=2).ok
        assert server.alive, "the sanitized server died: " + server.logs.tail(20)
        errors = [Path(p).read_text() for p in glob.glob(f"{reports}.*")]
    assert not [e for e in errors if "ERROR: AddressSanitizer" in e], "\n".join(errors)[:4000]
