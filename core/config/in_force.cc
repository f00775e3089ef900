// What a job config says once in force: a table's consistency, the summary
// every process logs at start-up, the job's id, and the sizes derived from
// fields left at 0 (core/config.h).
#include "core/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>

namespace tether {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

}  // namespace

ConsistencyConfig ConsistencyForTable(const JobConfig& config, const std::string& name) {
  ConsistencyConfig c = config.consistency();
  for (const auto& t : config.table())
    if (t.name() == name && t.has_consistency()) {
      // A table that names its model without a bound inherits none.
      if (t.consistency().has_model() && !t.consistency().has_staleness()) c.clear_staleness();
      c.MergeFrom(t.consistency());
    }
  return c;
}

TableBudget BudgetForTable(const JobConfig& config, const std::string& name) {
  TableBudget b;
  for (const auto& t : config.table()) {
    if (t.name() != name) continue;
    if (t.has_admit_after()) b.set_admit_after(t.admit_after());
    if (t.has_admit_probability()) b.set_admit_probability(t.admit_probability());
    if (t.has_max_rows()) b.set_max_rows(t.max_rows());
    if (t.has_evict()) b.set_evict(t.evict());
    if (t.has_ttl_clocks()) b.set_ttl_clocks(t.ttl_clocks());
  }
  return b;
}

std::string StalenessName(int64_t s) {
  if (s < 0) return "inf (ASP)";
  if (s == 0) return "0 (BSP)";
  return std::to_string(s) + " (SSP)";
}

std::string ConfigSummary(const JobConfig& config) {
  // One entry per set section, in the schema's order, its fields packed into
  // lines of at most ~100 characters: a reader finds "  data {" at once, and
  // no line runs off the screen.
  constexpr size_t kWidth = 100;
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  // `head` then `items` separated by spaces, wrapped with a 6-space indent.
  auto emit = [&](const std::string& head, const std::vector<std::string>& items, const std::string& tail) {
    std::string line = "  " + head;
    for (const std::string& item : items) {
      if (line.size() + 1 + item.size() > kWidth && line.find_first_not_of(' ') != line.size() - head.size()) {
        out += line + "\n";
        line = "     ";
      }
      line += " " + item;
    }
    out += line + tail + "\n";
  };
  auto fields_of = [&](const Message& m) {
    std::vector<const FieldDescriptor*> set;
    m.GetReflection()->ListFields(m, &set);
    std::vector<std::string> items;
    for (const FieldDescriptor* f : set) {
      const int n = f->is_repeated() ? m.GetReflection()->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) {
        std::string v;
        printer.PrintFieldValueToString(m, f, f->is_repeated() ? i : -1, &v);
        while (!v.empty() && v.back() == ' ') v.pop_back();
        items.push_back(f->name() + (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ? " { " + v + " }" : ": " + v));
      }
    }
    return items;
  };
  const Reflection* r = config.GetReflection();
  std::vector<const FieldDescriptor*> sections;
  r->ListFields(config, &sections);
  for (const FieldDescriptor* f : sections) {
    const int n = f->is_repeated() ? r->FieldSize(config, f) : 1;
    for (int i = 0; i < n; ++i) {
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& m = f->is_repeated() ? r->GetRepeatedMessage(config, f, i) : r->GetMessage(config, f);
        emit(f->name() + " {", fields_of(m), " }");
      } else {
        std::string v;
        printer.PrintFieldValueToString(config, f, f->is_repeated() ? i : -1, &v);
        emit(f->name() + ":", {v}, "");
      }
    }
  }
  out += "  staleness in force: " + StalenessName(EffectiveStaleness(config.consistency()));
  for (const auto& t : config.table())
    if (t.has_consistency())
      out += ", table " + t.name() + ": " + StalenessName(EffectiveStaleness(ConsistencyForTable(config, t.name())));
  return out;
}

std::string ConfigOneLine(const JobConfig& config) {
  std::ostringstream out;
  const ModelConfig& m = config.model();
  out << (config.name().empty() ? "job" : config.name()) << ": " << ModelType_Name(m.type());
  if (m.type() == XMC_MLP) out << " hidden " << m.hidden() << " " << LossType_Name(m.loss());
  out << ", " << OptimizerType_Name(config.optimizer().type()) << " lr " << config.optimizer().learning_rate()
      << ", " << (config.consistency().model() == AVERAGE ? std::string("AVERAGE")
                                                          : "staleness " + StalenessName(EffectiveStaleness(config.consistency())))
      << ", " << config.cluster().num_servers() << " server(s)"
      << (config.cluster().replicas() > 0
              ? " holding " + std::to_string(config.cluster().replicas()) + " replica(s) of each shard"
              : std::string())
      << ", " << config.cluster().num_workers() << " worker(s), " << config.train().epochs() << " epochs of minibatch " << config.train().minibatch_size();
  if (config.has_data()) {
    const DataConfig& d = config.data();
    out << ", data";
    if (d.has_train_file()) out << " " << std::filesystem::path(d.train_file()).filename().string();
    out << " (" << FileFormat_Name(d.format()) << ", index_base " << d.index_base();
    if (d.num_features() > 0) out << ", " << d.num_features() << " features";
    if (d.num_labels() > 0) out << ", " << d.num_labels() << " labels";
    out << ")";
  }
  return out.str();
}

std::string JobId(const JobConfig& config) {
  return config.cluster().job_id().empty() ? config.name() : config.cluster().job_id();
}

int MaxWorkers(const ClusterConfig& cluster) {
  return cluster.max_workers() > 0 ? cluster.max_workers() : cluster.num_workers();
}

bool HasValidationSplit(const JobConfig& config) {
  return config.train().validation_fraction() > 0 || !config.data().validation_split().empty();
}

std::string ValidationSplitField(const JobConfig& config) {
  if (!config.data().validation_split().empty()) return "data.validation_split";
  return config.train().validation_fraction() > 0 ? "train.validation_fraction" : "";
}

AdaptiveBatchConfig ResolvedAdaptiveBatch(const TrainConfig& train) {
  AdaptiveBatchConfig r = train.adaptive_batch();
  if (r.b_min() == 0) r.set_b_min(std::max(1, train.minibatch_size() / 4));
  // In 64 bits: a minibatch_size past kMaxMinibatchRows, refused by
  // ValidateCountBounds, must not read as a negative b_max before that.
  if (r.b_max() == 0)
    r.set_b_max(static_cast<int32_t>(std::min<int64_t>(4 * int64_t{train.minibatch_size()}, INT32_MAX)));
  return r;
}

int64_t EffectiveChunkRows(const TrainConfig& train) {
  return train.chunk_rows() > 0 ? train.chunk_rows() : 4 * static_cast<int64_t>(std::max(1, train.minibatch_size()));
}

}  // namespace tether
