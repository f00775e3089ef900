#include "core/table_spec.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <set>

#include "core/schedule_config.h"
#include "core/wire_limits.h"
#include "core/names.h"
#include "core/partition.h"

namespace tether {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string FieldValue(const Message& m, const FieldDescriptor* f, int index) {
  std::string out;
  google::protobuf::TextFormat::PrintFieldValueToString(m, f, index, &out);
  return out;
}

// The first field (in declaration order, recursively) whose value differs
// between a and b, as "path: value_a, value_b"; unset fields compare by
// their defaults, so presence alone is no difference.
bool FirstDifference(const Message& a, const Message& b, const std::string& prefix, std::string* path,
                     std::string* va, std::string* vb) {
  const auto* d = a.GetDescriptor();
  const Reflection* ra = a.GetReflection();
  const Reflection* rb = b.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string name = prefix + f->name();
    if (f->is_repeated()) {
      const int na = ra->FieldSize(a, f), nb = rb->FieldSize(b, f);
      for (int k = 0; k < std::min(na, nb); ++k) {
        const std::string at = name + "[" + std::to_string(k) + "]";
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          if (FirstDifference(ra->GetRepeatedMessage(a, f, k), rb->GetRepeatedMessage(b, f, k), at + ".", path, va,
                              vb))
            return true;
        } else if (FieldValue(a, f, k) != FieldValue(b, f, k)) {
          *path = at;
          *va = FieldValue(a, f, k);
          *vb = FieldValue(b, f, k);
          return true;
        }
      }
      if (na != nb) {
        *path = name;
        *va = std::to_string(na) + " entries";
        *vb = std::to_string(nb) + " entries";
        return true;
      }
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (FirstDifference(ra->GetMessage(a, f), rb->GetMessage(b, f), name + ".", path, va, vb)) return true;
      continue;
    }
    const std::string x = FieldValue(a, f, -1), y = FieldValue(b, f, -1);
    if (x != y) {
      *path = name;
      *va = x;
      *vb = y;
      return true;
    }
  }
  return false;
}

std::string Names(const google::protobuf::RepeatedPtrField<TableSpec>& tables) {
  std::string out;
  for (const auto& t : tables) out += (out.empty() ? "" : ", ") + t.name();
  return out.empty() ? "none" : out;
}

}  // namespace

float InitialWeight(uint64_t seed, uint32_t table_id, uint64_t key, uint32_t j, float bound) {
  uint64_t h = MixKey(MixKey(seed ^ (static_cast<uint64_t>(table_id) << 56)) ^ key);
  h = MixKey(h + j);
  // Top 24 bits → uniform in [0, 1).
  float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * bound;
}

int64_t EffectiveStaleness(const ConsistencyConfig& c) {
  if (c.model() == BSP || c.model() == AVERAGE) return 0;  // AVERAGE: a round's pulls wait for the last merge
  if (c.model() == ASP) return -1;
  return c.staleness();
}

Status CheckMessageSizes(const std::vector<TableSpec>& tables, int num_servers) {
  // Case C15: a block too large for one message is refused at set-up, never
  // by an abort or a hang mid-run. Row pulls and pushes are split by the
  // client (ClientOptions::max_message_bytes), so only what cannot be split
  // is checked: one row, and one shard's slice of a dense table.
  const uint64_t servers = static_cast<uint64_t>(std::max(1, num_servers));
  std::string problems;
  for (const TableSpec& t : tables) {
    std::string p;
    if (IsDenseTable(t)) {
      const uint64_t slice = (t.size() + servers - 1) / servers;  // largest DenseRange slice
      if (slice * sizeof(float) > kMaxFrameBytes) {
        const uint64_t per_shard = kMaxFrameBytes / sizeof(float);
        p = "dense table '" + t.name() + "' is " + std::to_string(t.size() * sizeof(float)) + " bytes (" +
            std::to_string(t.size()) + " floats); split over cluster.num_servers=" + std::to_string(servers) +
            " its largest slice is " + std::to_string(slice * sizeof(float)) + " bytes, above the " +
            std::to_string(kMaxFrameBytes) + "-byte message limit: set cluster.num_servers to at least " +
            std::to_string((t.size() + per_shard - 1) / per_shard);
      }
    } else if (uint64_t{t.dim()} * sizeof(float) > kMaxFrameBytes) {
      p = "one row of table '" + t.name() + "' is " + std::to_string(uint64_t{t.dim()} * sizeof(float)) +
          " bytes (dim " + std::to_string(t.dim()) + "), above the " + std::to_string(kMaxFrameBytes) +
          "-byte message limit, and a row is never split: make the model narrower";
    }
    if (!p.empty()) problems += (problems.empty() ? "" : "; ") + p;
  }
  if (problems.empty()) return Status::OK();
  return Status::InvalidArgument("config: " + problems);
}

std::string OptimizerProblem(const OptimizerConfig& o, std::string* why) {
  // Written so that NaN fails too: every comparison with NaN is false.
  // Flags and config text both accept "nan" and "inf"; this is where they stop.
  const auto positive = [](float v) { return v > 0 && std::isfinite(v); };
  const auto non_negative = [](float v) { return v >= 0 && std::isfinite(v); };
  const auto unit = [](float v) { return v >= 0 && v < 1; };
  struct Check {
    const char* field;
    bool ok;
    const char* why;
  };
  const Check checks[] = {
      {"learning_rate", positive(o.learning_rate()), "must be a finite number > 0"},
      {"momentum", unit(o.momentum()), "must be in [0, 1)"},
      {"initial_accumulator", non_negative(o.initial_accumulator()), "must be a finite number ≥ 0"},
      {"epsilon", positive(o.epsilon()), "must be a finite number > 0"},
      {"l2", non_negative(o.l2()), "must be a finite number ≥ 0"},
      {"beta1", unit(o.beta1()), "must be in [0, 1)"},
      {"beta2", unit(o.beta2()), "must be in [0, 1)"},
      {"alpha", positive(o.alpha()), "must be a finite number > 0"},
      {"beta", non_negative(o.beta()), "must be a finite number ≥ 0"},
      {"l1", non_negative(o.l1()), "must be a finite number ≥ 0"},
  };
  for (const Check& c : checks) {
    if (!c.ok) {
      *why = c.why;
      return c.field;
    }
  }
  // Decoupled weight decay (AdamW): a step shrinks a weight by 1 − lr·λ,
  // which must stay a shrink (lr·λ < 1), and only Adam's step has it.
  const float wd = o.weight_decay();
  if (!(wd >= 0 && std::isfinite(wd)) || !(static_cast<double>(wd) * o.learning_rate() < 1.0)) {
    *why = "must be a finite number ≥ 0 with learning_rate × weight_decay < 1";
    return "weight_decay";
  }
  if (wd > 0 && o.type() != ADAM) {
    *why = "is read by type ADAM only (decoupled weight decay, AdamW), not " + OptimizerType_Name(o.type()) +
           ": use l2 with the others";
    return "weight_decay";
  }
  // Delay compensation (DC-ASGD): g + λ·g⊙g⊙(w_now − w_bak), any type.
  if (!(o.delay_compensation() >= 0 && std::isfinite(o.delay_compensation()))) {
    *why = "must be a finite number ≥ 0 (λ of delay compensation; 0: off)";
    return "delay_compensation";
  }
  const std::string schedule = ScheduleProblem(o.schedule(), o.type());
  if (!schedule.empty()) {
    const size_t colon = schedule.find(": ");
    *why = schedule.substr(colon + 2);
    return "schedule." + schedule.substr(0, colon);
  }
  return "";
}

std::string TableBudgetProblem(const TableBudget& b, bool row_table, std::string* why) {
  const bool any = b.admit_after() > 0 || b.has_admit_probability() || b.max_rows() > 0 || b.evict() != EVICT_NONE ||
                   b.ttl_clocks() > 0;
  if (any && !row_table) {
    *why = "only row tables have a budget (admission and eviction)";
    return "budget";
  }
  if (b.admit_after() > 65535) {
    *why = "must be at most 65535 (the sketch's counters are 16-bit), got " + std::to_string(b.admit_after());
    return "admit_after";
  }
  const float p = b.admit_probability();
  if (!std::isfinite(p) || p <= 0.0f || p > 1.0f) {
    *why = "must be in (0, 1], got " + std::to_string(p);
    return "admit_probability";
  }
  if (b.admit_after() > 0 && b.has_admit_probability()) {
    *why = "admit_after and admit_probability exclude each other; set one";
    return "admit_probability";
  }
  if ((b.evict() == LRU || b.evict() == LFU) && b.max_rows() == 0) {
    *why = std::string("evict ") + (b.evict() == LRU ? "LRU" : "LFU") + " needs max_rows ≥ 1 (the rows to keep)";
    return "max_rows";
  }
  if (b.evict() == TTL && b.ttl_clocks() == 0) {
    *why = "evict TTL needs ttl_clocks ≥ 1";
    return "ttl_clocks";
  }
  if (b.evict() != TTL && b.ttl_clocks() > 0) {
    *why = "is read only with evict: TTL";
    return "ttl_clocks";
  }
  return "";
}

Status ValidateTableSpecs(const std::vector<TableSpec>& tables, int num_servers) {
  std::set<std::string> names;
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableSpec& t = tables[i];
    // A peer's HELLO brings these: a name is quoted until it is checked.
    const std::string name = t.name().empty() ? "'#" + std::to_string(i) + "'" : QuoteForLog(t.name());
    auto bad = [&](const std::string& field, const std::string& why) {
      return Status::InvalidArgument("table " + name + ": field " + field + ": " + why);
    };
    if (t.id() != i) return bad("id", "is " + std::to_string(t.id()) + " but the table is number " + std::to_string(i) + " (ids are 0, 1, ... in order)");
    if (t.name().empty()) return bad("name", "is empty");
    if (const std::string why = NameProblem(t.name()); !why.empty()) return bad("name", why);
    if (!names.insert(t.name()).second) return bad("name", "is used by two tables");
    if (IsRowTable(t)) {
      if (t.dim() < 1) return bad("dim", "must be ≥ 1, got " + std::to_string(t.dim()));
    } else {
      if (t.size() < 1) return bad("size", "must be ≥ 1, got " + std::to_string(t.size()));
      if (t.size() >= (uint64_t{1} << 32))
        return bad("size", std::to_string(t.size()) + " floats; the limit is 2^32 - 1 (narrow the layers)");
    }
    if (!std::isfinite(t.init().bound()) || t.init().bound() < 0)
      return bad("init.bound", "must be a finite number ≥ 0, got " + FieldValue(t.init(), t.init().GetDescriptor()->FindFieldByName("bound"), -1));
    std::string why;
    const std::string field = OptimizerProblem(t.optimizer(), &why);
    if (!field.empty()) return bad("optimizer." + field, why);
    if (t.consistency().staleness() < -1) return bad("consistency.staleness", "must be ≥ 0, or -1 (inf) for ASP");
    if (t.optimizer().delay_compensation() > 0 && (t.backup_workers() < 1 || t.backup_workers() > kMaxBackupWorkers))
      return bad("backup_workers", "must be in [1, " + std::to_string(kMaxBackupWorkers) +
                                       "] (the worker ranks whose reads a shard backs up) with "
                                       "optimizer.delay_compensation > 0, got " + std::to_string(t.backup_workers()));
    if (t.optimizer().delay_compensation() == 0 && t.backup_workers() != 0)
      return bad("backup_workers", "is read only with optimizer.delay_compensation > 0, got " +
                                       std::to_string(t.backup_workers()));
    const std::string budget = TableBudgetProblem(t.budget(), IsRowTable(t), &why);
    if (!budget.empty()) return bad(budget == "budget" ? budget : "budget." + budget, why);
  }
  return CheckMessageSizes(tables, num_servers);
}

std::string DiffTableSpecs(const google::protobuf::RepeatedPtrField<TableSpec>& mine, const std::string& mine_name,
                           const google::protobuf::RepeatedPtrField<TableSpec>& theirs,
                           const std::string& theirs_name) {
  for (int i = 0; i < std::min(mine.size(), theirs.size()); ++i) {
    std::string path, a, b;
    if (FirstDifference(mine[i], theirs[i], "", &path, &a, &b)) {
      const std::string table = mine[i].name() == theirs[i].name() ? "'" + mine[i].name() + "'" : "number " + std::to_string(i);
      return "table " + table + ", field " + path + ": " + mine_name + " has " + a + ", " + theirs_name + " has " + b;
    }
  }
  if (mine.size() != theirs.size())
    return "tables: " + mine_name + " has " + std::to_string(mine.size()) + " (" + Names(mine) + "), " + theirs_name +
           " has " + std::to_string(theirs.size()) + " (" + Names(theirs) + ")";
  return "";
}

std::string DescribeTables(const google::protobuf::RepeatedPtrField<TableSpec>& tables) {
  std::string out;
  for (const auto& t : tables) {
    out += (out.empty() ? "" : ", ") + t.name() +
           (IsRowTable(t) ? " (row, dim " + std::to_string(t.dim()) + ")" : " (dense, " + std::to_string(t.size()) + " floats)");
  }
  return out;
}

}  // namespace tether
