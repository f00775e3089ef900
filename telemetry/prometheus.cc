#include "telemetry/prometheus.h"

#include <glog/logging.h>

#include "tether/build_config.h"

#include <charconv>
#include <cmath>

namespace tether {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

const char* TypeName(ExpositionWriter::Type t) {
  switch (t) {
    case ExpositionWriter::Type::kCounter:
      return "counter";
    case ExpositionWriter::Type::kGauge:
      return "gauge";
    case ExpositionWriter::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Counters are integers: write them as such (std::to_chars's shortest form
  // would turn 1e21-sized ones into exponents, which is fine, but 1234567
  // must not become 1.234567e+06).
  if (std::fabs(value) <= 9007199254740992.0 && value == std::trunc(value))
    return std::to_string(static_cast<int64_t>(value));
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, r.ptr);
}

void ExpositionWriter::Family(const std::string& name, Type type, const std::string& help) {
  CHECK(ValidName(name)) << "invalid Prometheus metric name '" << name << "'";
  text_ += "# HELP " + name + " " + EscapeHelp(help) + "\n";
  text_ += "# TYPE " + name + " " + TypeName(type) + "\n";
}

void ExpositionWriter::Line(const std::string& name, const PrometheusLabels& labels, const std::string* le,
                            double value) {
  text_ += name;
  if (!labels.empty() || le != nullptr) {
    text_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      CHECK(ValidName(k) && k.find(':') == std::string::npos) << "invalid Prometheus label name '" << k << "'";
      if (!first) text_ += ',';
      first = false;
      text_ += k + "=\"" + EscapeLabelValue(v) + "\"";
    }
    if (le != nullptr) text_ += std::string(first ? "" : ",") + "le=\"" + *le + "\"";
    text_ += '}';
  }
  text_ += ' ' + FormatSampleValue(value) + '\n';
}

void ExpositionWriter::Sample(const std::string& name, const PrometheusLabels& labels, double value) {
  Line(name, labels, nullptr, value);
}

void ExpositionWriter::Histogram(const std::string& name, const PrometheusLabels& labels,
                                 const std::vector<double>& bounds, const std::vector<uint64_t>& cumulative,
                                 double sum, uint64_t count) {
  CHECK_EQ(bounds.size(), cumulative.size()) << name;
  for (size_t i = 0; i < bounds.size(); ++i) {
    const std::string le = FormatSampleValue(bounds[i]);
    Line(name + "_bucket", labels, &le, static_cast<double>(cumulative[i]));
  }
  const std::string inf = "+Inf";
  Line(name + "_bucket", labels, &inf, static_cast<double>(count));
  Line(name + "_sum", labels, nullptr, sum);
  Line(name + "_count", labels, nullptr, static_cast<double>(count));
}

void ExpositionWriter::Counter(const std::string& name, const std::string& help, const PrometheusLabels& labels,
                               double value) {
  Family(name, Type::kCounter, help);
  Sample(name, labels, value);
}

void ExpositionWriter::ProcessInfo(const PrometheusLabels& labels, bool running) {
  PrometheusLabels info = labels;
  info.emplace_back("version", TETHER_VERSION);
  Gauge("tether_info", "Constant 1; the labels say which process of which job this is.", info, 1);
  Gauge("tether_training_active",
        "1 while the process takes part in training; 0 once it finished (the endpoint lingers with the final "
        "values, --metrics_linger_s).",
        labels, running ? 1 : 0);
}

void ExpositionWriter::Gauge(const std::string& name, const std::string& help, const PrometheusLabels& labels,
                             double value) {
  Family(name, Type::kGauge, help);
  Sample(name, labels, value);
}

}  // namespace tether
