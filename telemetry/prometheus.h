// The Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): a pure
// renderer with no I/O, no clock and no global registry. A process collects
// its values into plain structs (a snapshot), and the code that serves
// /metrics (telemetry/metrics_endpoint.h) renders one ExpositionWriter from them
// per scrape.
//
// What the writer guarantees: each family is written once, as
//   # HELP name help-text        (backslash and newline escaped)
//   # TYPE name counter|gauge|histogram
//   name{label="value",...} value
// label values escaped (backslash, double quote, newline), values in the
// shortest text that reads back to the same double ("NaN", "+Inf", "-Inf"
// for the special values), and histogram buckets cumulative with `le` and a
// final +Inf bucket equal to _count. It does not check that a name is
// unique or matches [a-zA-Z_:][a-zA-Z0-9_:]* (CHECK-fails on an invalid
// name: names are the program's constants, not input).
//
// Ownership: the writer owns its text. Thread-safety: none (one writer per
// scrape; the callers hold their snapshot, not the writer, across threads).
// PublishedSnapshot (below) is how a snapshot crosses threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tether {

/// Label pairs of one sample, in the order written (name, unescaped value).
using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

/// Escapes a label value: \ → \\, " → \", newline → \n.
std::string EscapeLabelValue(const std::string& value);
/// Escapes HELP text: \ → \\, newline → \n.
std::string EscapeHelp(const std::string& help);
/// A sample value as the format writes it: integers up to 2^53 without a
/// fraction ("42"), others in the shortest round-trip form ("0.25",
/// "1e-07"), "NaN", "+Inf", "-Inf".
std::string FormatSampleValue(double value);

class ExpositionWriter {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  /// Starts family `name` (for counters, the name with its _total suffix, as
  /// the samples carry it) with its HELP and TYPE lines. Samples that
  /// follow belong to it.
  void Family(const std::string& name, Type type, const std::string& help);
  /// One sample of the current counter or gauge family: `name{labels} value`.
  void Sample(const std::string& name, const PrometheusLabels& labels, double value);
  /// One whole histogram series of the current histogram family:
  /// name_bucket{labels,le="b"} for each upper bound in `bounds` (ascending)
  /// with the cumulative count of observations ≤ b (`cumulative[i]`, same
  /// size as bounds), then le="+Inf" = `count`, then name_sum and
  /// name_count. CHECK-fails when the sizes differ.
  void Histogram(const std::string& name, const PrometheusLabels& labels, const std::vector<double>& bounds,
                 const std::vector<uint64_t>& cumulative, double sum, uint64_t count);

  /// Family + Sample in one call, for a family of one sample.
  void Counter(const std::string& name, const std::string& help, const PrometheusLabels& labels, double value);
  void Gauge(const std::string& name, const std::string& help, const PrometheusLabels& labels, double value);

  /// The two families every Tether process serves first: tether_info
  /// (constant 1; `labels` plus version=TETHER_VERSION) and
  /// tether_training_active (1 while `running`, 0 during the linger).
  void ProcessInfo(const PrometheusLabels& labels, bool running);

  const std::string& text() const { return text_; }

 private:
  void Line(const std::string& name, const PrometheusLabels& labels, const std::string* le, double value);
  std::string text_;
};

/// A value one thread publishes and others read whole: the training loop
/// publishes a snapshot of its counters (every clock, or every poll of the
/// server loop, at most), a scrape copies the latest. Both sides take one
/// short mutex; T must be copyable. Thread-safe.
template <typename T>
class PublishedSnapshot {
 public:
  void Publish(T value) {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(value);
  }
  T Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }

 private:
  mutable std::mutex mu_;
  T value_{};
};

/// The Content-Type of a /metrics reply in this format.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tether
