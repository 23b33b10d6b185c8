"""The live dashboard against a real Triton: its controls change the load and the server's config
while load flows, it stops by itself after its duration, and in a real kernel its last frame is left
as an image/png output."""

from __future__ import annotations

import nbformat
import numpy as np
from nbclient import NotebookClient
from waiting_support import eventually

import labkit
from labkit.course import reference


def test_controls_change_the_load_and_the_config_while_it_runs(fresh_server, capfd):
    reference.serve(fresh_server, ["add_sub_batching"])
    dash = labkit.Dashboard(fresh_server, "add_sub_batching", refresh_s=0.2, poll_s=0.1)
    dash.run(reference.sample_inputs("add_sub_batching"), concurrency=4)  # until stopped
    try:
        assert dash.queue_delay_us.value == 2000 and dash.preferred.value == ""  # read from the model's config
        eventually(lambda: dash.load.workers == 4, "four workers")
        dash.concurrency.value = 6  # the slider
        eventually(lambda: dash.load.workers == 6, "six workers")
        dash.queue_delay_us.value, dash.preferred.value = 500, "2, 4"
        dash.apply.click()  # the button: config written and the model reloaded, load still flowing
        assert dash.load.running
        batching = fresh_server.model_config("add_sub_batching")["dynamic_batching"]
        assert batching["max_queue_delay_microseconds"] == 500 and batching["preferred_batch_size"] == [2, 4]
        assert "reloaded add_sub_batching" in dash.status.value
        dash.preferred.value = "four"
        dash.apply.click()
        assert "four" in dash.status.value  # a bad entry is reported beside the button, nothing raised
        served = dash.collector.total("add_sub_batching").inference_count
        eventually(lambda: dash.collector.total("add_sub_batching").inference_count > served, "more requests served")
        assert dash.collector.total("add_sub_batching").inference_count > served  # it kept flowing
    finally:
        result = dash.stop()
    assert not dash.load.running and result.count > 0 and result.errors == []
    assert [c for _, c in dash._clients] == [4, 6]
    assert [text for _, text in dash._events] == ["delay 500 µs, prefer [2, 4]"]
    assert bytes(dash._image.value).startswith(b"\x89PNG")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_a_timed_run_ends_by_itself(server):
    dash = labkit.Dashboard(server, "add_sub_batching", refresh_s=0.2)
    dash.run(
        {k: v[None, :] for k, v in {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}.items()},
        concurrency=2,
        duration_s=1.5,
    )
    eventually(lambda: dash._finished, "the timed run to end", timeout_s=15)
    assert dash.result is not None and 1.4 < dash.result.duration_s < 3
    assert dash.wait() is dash.result and "inferences" in dash._title.value


NOTEBOOK = [
    "import labkit\nfrom labkit import reference\nlab = labkit.start()\nreference.serve(lab, ['add_sub_batching'])",
    "dash = labkit.Dashboard(lab, 'add_sub_batching')\n"
    "dash.run(reference.sample_inputs('add_sub_batching'), concurrency=4, duration_s=2)",
    "result = dash.wait()\nprint(result.errors)",
    "lab.stop()",
]


def test_last_frame_stays_as_an_image_in_the_notebook(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in NOTEBOOK])
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    (output,) = nb.cells[1].outputs
    assert output["output_type"] == "display_data"
    assert set(output["data"]) == {"image/png", "text/plain"}  # the live widget, replaced by its last frame
    assert output["data"]["text/plain"] == "<labkit Dashboard for add_sub_batching>"
    assert output["data"]["image/png"].startswith("iVBOR")  # base64 of a PNG
    assert nb.cells[2].outputs[0]["text"] == "[]\n"
