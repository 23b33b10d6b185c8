"""Lesson: a custom batching strategy that caps each batch by bytes, not by request count.

Triton's dynamic batcher can consult a small library, request by request, before it adds a request
to the batch it is forming. The library is not a backend (it has no ModelInstanceExecute); Triton
loads it beside the model's own backend from the path in the model parameter
``TRITON_BATCH_STRATEGY_PATH``. Here it reads ``MAX_BATCH_VOLUME_BYTES`` and refuses a request
whose inputs would push the batch past that many bytes.

    lab = labkit.start()
    result = volume_batching.compare(lab, max_bytes=48)   # 3 requests of 16 bytes per batch
    print(result.summary())
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from ...errors import ConfigError, InferenceError
from ...native import deploy
from ...native.build import Build
from ...observe import plots
from ...observe.stats import ModelStats, model_stats
from ...server.base import TritonServer
from ...traffic.generator import run_load
from .. import reference
from .outcome import Outcome

STRATEGY = "volumebatching"
#: Triton uses a strategy only if it finds all five; the build refuses a library that lacks one.
ENTRY_POINTS = (
    "TRITONBACKEND_ModelBatcherInitialize",
    "TRITONBACKEND_ModelBatcherFinalize",
    "TRITONBACKEND_ModelBatchInitialize",
    "TRITONBACKEND_ModelBatchIncludeRequest",
    "TRITONBACKEND_ModelBatchFinalize",
)
DEFAULT_MODEL = "minimal_batching"  # the reference model, default batcher
VOLUME_MODEL = "minimal_volume"  # the same config plus the strategy
REQUEST_BYTES = 16  # one request to minimal_batching: IN0 is INT32 [1, 4]

STRATEGY_SOURCE = r"""// volumebatching: a custom batching strategy. While Triton's dynamic batcher forms a batch it
// asks IncludeRequest about each queued request; the answer "no" closes the batch, and the refused
// request starts the next one. The limit is the sum of the inputs' bytes.
#include <cstdint>
#include <string>

#include "labkit/json.hpp"  // reads the config as JSON

namespace {

// What every batch of the model shares, read once at model load.
struct Limit {
  uint64_t max_bytes;
};

// One batch being formed: how full it is.
struct Volume {
  uint64_t max_bytes;
  uint64_t used = 0;
  uint32_t requests = 0;
};

uint64_t parse_limit(TRITONBACKEND_Model* model) {
  const labkit::json params = labkit::model_config(model).value("parameters", labkit::json::object());
  const std::string where = "model '" + labkit::model_name(model) + "': ";
  if (!params.contains("MAX_BATCH_VOLUME_BYTES")) {
    throw labkit::Error(where + "the volume batching strategy needs the parameter MAX_BATCH_VOLUME_BYTES "
                        "(bytes of input per batch); add it to the config", TRITONSERVER_ERROR_INVALID_ARG);
  }
  const std::string text = params["MAX_BATCH_VOLUME_BYTES"].value("string_value", "");
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 18) {
    throw labkit::Error(where + "MAX_BATCH_VOLUME_BYTES must be a whole number of bytes, not '" + text + "'",
                        TRITONSERVER_ERROR_INVALID_ARG);
  }
  return std::stoull(text);
}

// Bytes of all the request's inputs (every batch row included).
uint64_t request_bytes(TRITONBACKEND_Request* request) {
  uint32_t count = 0;
  labkit::check(TRITONBACKEND_RequestInputCount(request, &count));
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    uint64_t bytes = 0;
    labkit::check(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    labkit::check(TRITONBACKEND_InputProperties(input, nullptr, nullptr, nullptr, nullptr, &bytes, nullptr));
    total += bytes;
  }
  return total;
}

}  // namespace

TRITONSERVER_Error* TRITONBACKEND_ModelBatcherInitialize(TRITONBACKEND_Batcher** batcher, TRITONBACKEND_Model* model) {
  return labkit::guard([&] {
    const uint64_t max_bytes = parse_limit(model);
    *batcher = reinterpret_cast<TRITONBACKEND_Batcher*>(new Limit{max_bytes});
    labkit::log_info("model " + labkit::model_name(model) + ": batches capped at " + std::to_string(max_bytes) +
                     " bytes of input");
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelBatcherFinalize(TRITONBACKEND_Batcher* batcher) {
  delete reinterpret_cast<Limit*>(batcher);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelBatchInitialize(const TRITONBACKEND_Batcher* batcher, void** userp) {
  return labkit::guard([&] {
    *userp = new Volume{reinterpret_cast<const Limit*>(batcher)->max_bytes};
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelBatchIncludeRequest(TRITONBACKEND_Request* request, void* userp,
                                                           bool* should_include) {
  return labkit::guard([&] {
    Volume& batch = *static_cast<Volume*>(userp);
    const uint64_t bytes = request_bytes(request);
    // A request larger than the limit on its own must still run: it goes alone, never waits forever.
    *should_include = batch.requests == 0 || batch.used + bytes <= batch.max_bytes;
    if (*should_include) {
      batch.used += bytes;
      batch.requests += 1;
    }
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelBatchFinalize(void* userp) {
  delete static_cast<Volume*>(userp);
  return nullptr;
}
"""


def build_strategy(server: TritonServer, source: str = STRATEGY_SOURCE) -> Build:
    """Compile the strategy library (cached by content). It has no ModelInstanceExecute, so the build
    checks for the five batching entry points instead."""
    return server.models.build(STRATEGY, source, required=ENTRY_POINTS)


def attach(server: TritonServer, model: str, strategy: Build, max_bytes: int) -> Path:
    """Name the strategy and its byte limit in ``model``'s config and (re)load the model.

    The library is copied next to the config under a name that contains the build's digest: Triton
    never unloads a library it has opened, so a rebuilt strategy needs a path of its own to take effect.
    Returns that path.
    """
    if max_bytes < 1:
        raise ConfigError(
            field="MAX_BATCH_VOLUME_BYTES",
            value=max_bytes,
            problem="must be at least 1 byte",
            remedy=f"e.g. {3 * REQUEST_BYTES} lets 3 requests of {REQUEST_BYTES} bytes share a batch",
        )
    repo = server.repository
    target = deploy.attach_batch_strategy(repo, model, strategy, {"MAX_BATCH_VOLUME_BYTES": str(max_bytes)})
    if model in server.loaded_models():
        server.load(model)
    else:
        deploy.load_models(server.models, [model])  # builds the model's reference backend first if needed
    for old in repo.model_dir(model).glob(f"{STRATEGY}-*.so"):
        if old != target:
            old.unlink()  # no config names it any more; Triton keeps what it already opened in memory
    return target


def setup(server: TritonServer, max_bytes: int = 3 * REQUEST_BYTES, source: str = STRATEGY_SOURCE) -> Path:
    """Serve minimal_batching as it is and minimal_volume, the same model with the strategy attached."""
    reference.serve(server, [DEFAULT_MODEL])
    cfg = server.repository.read_config(DEFAULT_MODEL)
    cfg.name = VOLUME_MODEL
    server.repository.write_config(cfg)
    return attach(server, VOLUME_MODEL, build_strategy(server, source), max_bytes)


def burst(server: TritonServer, model: str, requests: int = 48, concurrency: int = 8) -> ModelStats:
    """Send ``requests`` one-row requests from ``concurrency`` clients; return what Triton's statistics
    recorded for them (batch_counts: executions per batch size)."""
    before = model_stats(server, model, settle=True)
    inputs = reference.sample_inputs(model, server=server)
    result = run_load(server, model, inputs, requests=requests, concurrency=concurrency)
    if result.errors:
        raise InferenceError(
            model=model,
            happened=f"failed ({len(result.errors)} of {requests} requests)",
            reason=result.errors[0].message,
            remedy="send one request with labkit.infer to read its whole error",
        )
    return model_stats(server, model, settle=True).since(before)


@dataclass
class Comparison:
    """The same load on the default batcher and on the volume-capped one."""

    max_bytes: int
    default: ModelStats
    volume: ModelStats

    @property
    def cap_requests(self) -> int:
        """Most one-row requests a batch may hold under the byte limit."""
        return max(1, self.max_bytes // REQUEST_BYTES)

    @property
    def ok(self) -> bool:
        """The cap held, and without it Triton would have formed bigger batches."""
        return 0 < self.volume.max_batch_size_seen <= self.cap_requests < self.default.max_batch_size_seen

    def figure(self) -> Figure:
        """Batch-size histograms of both models side by side, the byte limit marked."""
        fig = Figure(figsize=(8, 3))
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.18, top=0.88, wspace=0.3)
        left, right = fig.subplots(1, 2)
        top = max(self.default.max_batch_size_seen, self.volume.max_batch_size_seen)
        plots.batch_histogram(self.default, left, top)
        plots.batch_histogram(self.volume, right, top)
        right.axvline(self.cap_requests + 0.5, color="#c44e52", linestyle="--", label=f"{self.max_bytes} bytes")
        right.legend(fontsize="small")
        return fig

    def summary(self) -> str:
        return (
            f"limit {self.max_bytes} bytes = {self.cap_requests} requests of {REQUEST_BYTES} bytes\n"
            f"volume strategy: every batch within the limit: {self.volume.max_batch_size_seen <= self.cap_requests}\n"
            f"default batcher: went past it: {self.default.max_batch_size_seen > self.cap_requests}"
        )


def compare(
    server: TritonServer,
    max_bytes: int = 3 * REQUEST_BYTES,
    requests: int = 48,
    concurrency: int = 8,
    source: str = STRATEGY_SOURCE,
) -> Comparison:
    """Set both models up (or re-attach the strategy: the limit or source may differ), then put the
    same burst on each."""
    if VOLUME_MODEL in server.loaded_models() and DEFAULT_MODEL in server.loaded_models():
        attach(server, VOLUME_MODEL, build_strategy(server, source), max_bytes)
    else:
        setup(server, max_bytes, source)
    default = burst(server, DEFAULT_MODEL, requests, concurrency)
    return Comparison(max_bytes, default, burst(server, VOLUME_MODEL, requests, concurrency))


def run(server: TritonServer) -> Outcome:
    """The same burst on both models: the cap holds, and without it Triton forms bigger batches."""
    result = compare(server)
    return Outcome(
        result.ok,
        {
            "limit_bytes": result.max_bytes,
            "largest_batch_capped": result.volume.max_batch_size_seen,
            "largest_batch_default": result.default.max_batch_size_seen,
        },
        result.figure(),
    )
