// Helpers shared by the transport tests (transport_test.cc,
// transport_peers_test.cc, one test binary): an exact job (SUM, w1 from
// zero), a worker's HELLO header, client options with test timeouts, a glog
// sink that counts what is logged, and a CRC-32 of floats.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "core/net/message.h"
#include "core/net/transport.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model_registry.h"

namespace tether {
namespace transport_testing {

inline constexpr uint32_t kW1 = 0;  // XMC MLP tables: w1 (row, dim = hidden), b1 (dense, hidden), w2
inline constexpr uint32_t kB1 = 1;

using SteadyClock = std::chrono::steady_clock;

// The exact tests' two rows of w1 (dim 2 in ExactJob(1, 1, 2)).
inline const std::vector<uint64_t> kTwoKeys = {3, 7};

// One server shard, exact arithmetic: SUM (w += g) and w1 starting at 0, so
// every value a test reads back is a sum it can state exactly.
inline JobConfig ExactJob(int servers, int workers, int hidden) {
  JobConfig c;
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_num_workers(workers);
  c.mutable_cluster()->set_idle_timeout_ms(60000);
  c.mutable_cluster()->set_startup_timeout_ms(60000);
  c.mutable_cluster()->set_worker_timeout_ms(60000);
  c.mutable_data()->set_num_features(1000);
  c.mutable_data()->set_num_labels(3);
  c.mutable_model()->set_hidden(hidden);
  c.mutable_optimizer()->set_type(SUM);
  c.mutable_consistency()->set_staleness(-1);  // ASP: no test here is about the bound
  c.mutable_consistency()->set_model(ASP);
  c.mutable_consistency()->set_cache(false);   // every read crosses the wire
  TableConfig* w1 = c.add_table();
  w1->set_name("w1");
  w1->set_init(INIT_ZEROS);
  return c;
}


// A serialized HELLO of worker `rank` to `shard`, declaring the job's tables.
inline std::string HelloHeader(const JobConfig& c, int rank, int shard) {
  MessageHeader h;
  h.set_type(HELLO);
  h.set_sender_rank(rank);
  h.set_request_id(1);
  h.set_protocol_version(kProtocolVersion);
  HelloBody& body = *h.mutable_hello();
  body.set_staleness(EffectiveStaleness(c.consistency()));
  body.set_job_id(JobId(c));
  body.set_shard(shard);
  body.set_num_shards(c.cluster().num_servers());
  for (const TableSpec& t : TablesForJob(c)) *body.add_tables() = t;
  return h.SerializeAsString();
}

inline ClientOptions OptionsFor(const JobConfig& c, int rank, std::vector<std::string> servers) {
  ClientOptions o = ClientOptionsFor(c, rank, std::move(servers));
  o.request_timeout_ms = 20000;
  o.heartbeat_interval_ms = 1000;
  return o;
}


// Collects glog lines while alive, to assert what is logged.
class LogCapture : public google::LogSink {
 public:
  LogCapture() { google::AddLogSink(this); }
  ~LogCapture() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char*, const char*, int, const struct ::tm*, const char* message,
            size_t message_len) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back({severity, std::string(message, message_len)});
  }
  size_t Count(google::LogSeverity severity, const std::string& part) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [s, l] : lines_) n += s == severity && l.find(part) != std::string::npos;
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<google::LogSeverity, std::string>> lines_;
};

inline uint32_t Crc(const float* v, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(v);
  size_t bytes = n * sizeof(float);
  while (bytes > 0) {  // crc32 takes a 32-bit length
    const uInt chunk = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

// A serialized header of a request of `type` from worker `rank`.
inline std::string Header(MessageType type, int rank, uint64_t request, uint32_t table, uint64_t keys, uint32_t dim,
                   uint64_t values) {
  MessageHeader h;
  h.set_type(type);
  h.set_sender_rank(rank);
  h.set_request_id(request);
  h.set_table_id(table);
  h.set_num_keys(keys);
  h.set_value_dim(dim);
  h.set_num_values(values);
  return h.SerializeAsString();
}

}  // namespace transport_testing
}  // namespace tether
