// labkit/metrics.hpp (part of labkit/backend.hpp): a backend's own metrics on /metrics.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "labkit/errors.hpp"
#include "triton/core/tritonbackend.h"

namespace labkit {

// ---- custom metrics -------------------------------------------------------------------------------------

// A metric name of the backend's own on /metrics. Keep it in backend state (created in
// TRITONBACKEND_Initialize, destroyed in TRITONBACKEND_Finalize), never in a global: Triton's
// metrics registry is gone by the time a global destructor would run.
class MetricFamily {
 public:
  MetricFamily(const std::string& name, const std::string& description,
               TRITONSERVER_MetricKind kind = TRITONSERVER_METRIC_KIND_COUNTER);
  ~MetricFamily();
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;
  TRITONSERVER_MetricFamily* get() const { return family_; }

 private:
  TRITONSERVER_MetricFamily* family_ = nullptr;
};

// One labelled series of a family, e.g. {model="m"}. Destroy it before its family. Updates never
// throw: a metric that cannot be updated must not fail inference.
class Metric {
 public:
  Metric(const MetricFamily& family, const std::vector<std::pair<std::string, std::string>>& labels);
  ~Metric();
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  void increment(double amount);
  void set(double value);  // gauges only
  double value() const;

 private:
  void note(TRITONSERVER_Error* err);
  TRITONSERVER_Metric* metric_ = nullptr;
  bool warned_ = false;
};

}  // namespace labkit
