"""breakpoint() in a model.py: a real pdb session with the person who sent the request, driven here
through real processes (a script's stdin, `labkit serve`'s terminal, a Jupyter kernel's input prompt)."""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from terminal_support import CHILD, MODEL, Terminal
from waiting_support import within

import labkit
import labkit.repository
import labkit.server

pytestmark = pytest.mark.slow

CONFIG = labkit.model_config("dbg", "python", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])])
ONES = np.ones(4, np.float32)


@pytest.fixture()
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_pdb_session_prints_changes_steps_and_continues(model_file, protocol):
    term = Terminal([sys.executable, "-c", CHILD, protocol, "1", str(model_file)])
    term.expect("READY")
    term.expect(r"dbg_0_0 stopped at a breakpoint \(model\.py:11\)")
    term.expect(r"model\.py\(12\)execute\(\)\n-> y = self\.scaled\(x, scale\)\n\(Pdb\) ")
    term.pdb("p scale", r"^2\.0\n$")
    term.pdb("p x", r"array\(\[1\., 1\., 1\., 1\.\], dtype=float32\)")
    term.pdb("where", r"model\.py\(12\)execute\(\)")
    term.pdb("l", r"11  \t\s+breakpoint\(\)\n 12  ->\t")
    term.pdb("scale = 10.0", r"^$")
    term.pdb("s", r"--Call--\n> .*model\.py\(16\)scaled\(\)")
    term.pdb("n", r"model\.py\(17\)scaled\(\)\n-> return x \* scale")
    term.pdb("p scale", r"^10\.0\n$")
    time.sleep(4)  # longer than the request's 3 s limit: the limit pauses while the session lasts
    term.send("c")
    term.expect(r"ANSWER \[10\.0, 10\.0, 10\.0, 10\.0\]")
    assert term.close() == 0


def test_quitting_fails_that_request_and_the_model_keeps_serving(model_file):
    term = Terminal([sys.executable, "-c", CHILD, "http", "2", str(model_file)])
    term.expect(r"model\.py\(12\)execute\(\)[\s\S]*?\(Pdb\) ")
    term.send("q")
    term.expect(r"FAILED InferenceError The request to 'dbg' failed because you quit the debugger \(q\)")
    term.expect(r"model\.py\(12\)execute\(\)[\s\S]*?\(Pdb\) ")  # the next request stops there again
    term.send("c")
    term.expect(r"ANSWER \[2\.0, 2\.0, 2\.0, 2\.0\]")
    assert term.close() == 0


def test_a_load_run_skips_breakpoints_with_a_log_line(fresh_server):
    fresh_server.repository.write_config(CONFIG)
    fresh_server.python_model("dbg", MODEL)
    result = labkit.run_load(fresh_server, "dbg", {"IN0": ONES}, requests=4, concurrency=2)
    assert result.count == 4 and result.errors == []
    assert fresh_server.logs.grep(
        "breakpoint at model.py:11 (dbg_0_0) skipped: the request did not come from an interactive labkit call"
    )
    assert list((fresh_server.workspace.backend_dir / "python" / "labkit-debug").iterdir()) == []  # nothing listens


def test_a_breakpoint_nobody_attaches_to_is_skipped_after_the_wait():
    with labkit.server.EmbeddedServer(env={"LABKIT_BREAKPOINT_WAIT_S": "2"}) as server:
        server.start()
        server.repository.write_config(CONFIG)
        server.python_model("dbg", MODEL)
        debug = server.workspace.backend_dir / "python" / "labkit-debug"
        answers = []
        client_thread = threading.Thread(
            target=lambda: answers.append(_plain_request(server.endpoints.http_url, "labkit-debug-nobody"))
        )
        t0 = time.monotonic()
        client_thread.start()
        within(lambda: list(debug.glob("*.sock")), 10, "the breakpoint's socket", interval_s=0.05)
        assert [p.suffix for p in sorted(debug.iterdir())] == [".json", ".sock"]  # listening only now
        client_thread.join(30)
        assert answers == [[2.0] * 4] and 2 <= time.monotonic() - t0 < 10
        assert server.logs.grep("breakpoint at model.py:11 (dbg_0_0) skipped: no one attached within 2 s")
        assert list(debug.iterdir()) == []


def _plain_request(url: str, request_id: str = "") -> list[float]:
    """A request from an outside client (not labkit's waiting loop)."""
    client = httpclient.InferenceServerClient(url, network_timeout=120)
    try:
        tensor = httpclient.InferInput("IN0", [4], "FP32")
        tensor.set_data_from_numpy(ONES)
        return client.infer("dbg", [tensor], request_id=request_id).as_numpy("OUT0").tolist()
    finally:
        client.close()


def test_labkit_serve_opens_the_session_in_its_terminal(tmp_path, triton_default_ports):
    repo = tmp_path / "repo"
    labkit.repository.ModelRepository(repo).write_config(CONFIG)
    labkit.repository.ModelRepository(repo).write_python_model("dbg", MODEL)
    term = Terminal([sys.executable, "-m", "labkit.cli", "serve", str(repo)], cwd=tmp_path)
    port = term.expect(r"http\s+http://127\.0\.0\.1:(\d+)").group(1)
    term.expect("Press Ctrl-C to stop")
    answers: list[list[float]] = []
    client = threading.Thread(target=lambda: answers.append(_plain_request(f"127.0.0.1:{port}")))
    client.start()
    term.expect(r"model\.py\(12\)execute\(\)[\s\S]*?\(Pdb\) ")
    term.pdb("p scale * 3", r"^6\.0\n$")
    term.send("c")
    client.join(30)
    assert answers == [[2.0] * 4]
    term.proc.send_signal(2)  # Ctrl-C
    term.expect("stopped.")
    assert term.close() == 0


def test_the_session_opens_under_the_notebook_cell(tmp_path, model_file):
    """In Jupyter the session is the cell's input prompt: a real kernel, answered as a person would."""
    from jupyter_client.manager import start_new_kernel

    manager, kernel = start_new_kernel(kernel_name="python3", env={**os.environ})
    typed = iter(["p scale", "scale = 5.0", "c"])
    prompts: list[str] = []
    printed: list[str] = []

    def answer(msg: dict) -> None:
        prompts.append(msg["content"]["prompt"])
        kernel.input(next(typed))

    def output(msg: dict) -> None:
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    cell = textwrap.dedent(f"""
        import numpy as np, labkit
        lab = labkit.start()
        lab.repository.write_config(labkit.model_config("dbg", "python", [("IN0", "FP32", [4])], [("OUT0", "FP32", [4])]))
        lab.python_model("dbg", open({str(model_file)!r}).read())
        print("ANSWER", labkit.infer(lab, "dbg", {{"IN0": np.ones(4, np.float32)}})["OUT0"].tolist())
        lab.stop()
    """)
    try:
        reply = kernel.execute_interactive(cell, allow_stdin=True, stdin_hook=answer, output_hook=output, timeout=120)
    finally:
        kernel.stop_channels()
        manager.shutdown_kernel(now=True)
    text = "".join(printed)
    assert reply["content"]["status"] == "ok", text
    assert prompts == ["(Pdb) "] * 3
    assert "stopped at a breakpoint (model.py:11)" in text and "2.0\n" in text
    assert "ANSWER [5.0, 5.0, 5.0, 5.0]" in text
