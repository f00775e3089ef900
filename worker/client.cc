#include "worker/client.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

#include "core/net/transport.h"
#include "core/partition.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A frame holding a copy of `bytes` bytes at `data`, in a pooled buffer
// when it is large (no page faults, sent zero-copy).
zmq::message_t CopyFrame(FramePool& pool, const void* data, size_t bytes) {
  zmq::message_t f = pool.Take(bytes);
  if (bytes > 0) std::memcpy(f.data(), data, bytes);
  return f;
}

// Row i of `rows` (n rows of dim floats) → out + pos[i]·dim. Consecutive
// positions are copied with one memcpy per run (a single shard's keys are
// all one run); dim 1 is a plain loop, a call per float would dominate.
void ScatterRows(const float* rows, const uint32_t* pos, size_t n, uint32_t dim, float* out) {
  if (dim == 1) {
    for (size_t i = 0; i < n; ++i) out[pos[i]] = rows[i];
    return;
  }
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && pos[j] == pos[j - 1] + 1) ++j;
    std::memcpy(out + size_t{pos[i]} * dim, rows + i * dim, (j - i) * dim * sizeof(float));
    i = j;
  }
}

// The inverse: src + pos[i]·dim → row i of `rows`.
void GatherRows(const float* src, const uint32_t* pos, size_t n, uint32_t dim, float* rows) {
  if (dim == 1) {
    for (size_t i = 0; i < n; ++i) rows[i] = src[pos[i]];
    return;
  }
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && pos[j] == pos[j - 1] + 1) ++j;
    std::memcpy(rows + i * dim, src + size_t{pos[i]} * dim, (j - i) * dim * sizeof(float));
    i = j;
  }
}

FramePool::Options PoolOptions(const ClientOptions& options) {
  FramePool::Options o;
  o.max_idle_bytes = options.frame_pool_idle_bytes;
  return o;
}

}  // namespace

WorkerClient::WorkerClient(const ClientOptions& options)
    : options_(options),
      num_shards_(static_cast<int>(options.servers.size())),
      log_prefix_("[worker " + std::to_string(options.rank) + "] "),
      own_ctx_(options.context == nullptr ? std::make_unique<zmq::context_t>(1) : nullptr),
      ctx_(options.context == nullptr ? own_ctx_.get() : options.context),
      frame_pool_(PoolOptions(options)),
      outstanding_(options.servers.size(), 0),
      last_send_(SteadyClock::now()) {
  caches_.resize(options.tables.size());
  for (size_t t = 0; t < options.tables.size(); ++t) {
    const TableSpec& spec = options.tables[t];
    caches_[t].enabled = spec.consistency.cache() && spec.staleness >= 0;
    caches_[t].refresh_on_push = spec.consistency.refresh_on_push();
    caches_[t].dense.resize(num_shards_);
    caches_[t].read_version.assign(num_shards_, UINT64_MAX);
  }
}

bool WorkerClient::Fresh(const CachedRow& row, int64_t staleness) const {
  return !row.values.empty() && row.pending_pushes == 0 && row.row_clock >= clock_ - staleness;
}

void WorkerClient::Store(uint32_t table, int shard, const uint64_t* keys, size_t n, const float* values,
                         int64_t row_clock, uint64_t version) {
  TableCache& c = caches_[table];
  if (!c.enabled) return;
  const TableSpec& spec = options_.tables[table];
  if (spec.kind == TableKind::kDense) {
    auto [b, e] = DenseRange(spec.size, shard, num_shards_);
    CachedRow& row = c.dense[shard];
    row.values.assign(values, values + (e - b));
    row.row_clock = row_clock;
    row.version = version;
    return;
  }
  const uint32_t dim = spec.dim;
  for (size_t i = 0; i < n; ++i) {
    CachedRow& row = c.rows[keys[i]];
    row.values.assign(values + i * dim, values + (i + 1) * dim);
    row.row_clock = row_clock;
    row.version = version;
  }
}

void WorkerClient::SendHeartbeats() {
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(HEARTBEAT);
    Send(s, &m, Sub{});
  }
}

WorkerClient::~WorkerClient() = default;

StatusOr<std::unique_ptr<WorkerClient>> WorkerClient::Connect(const ClientOptions& options) {
  if (options.servers.empty()) return Status::InvalidArgument("no server addresses given");
  std::unique_ptr<WorkerClient> c(new WorkerClient(options));
  SocketOptions so;
  so.send_timeout_ms = options.request_timeout_ms;
  so.send_hwm = options.send_hwm;
  so.recv_hwm = options.recv_hwm;
  // A fresh identity per process, so a restarted worker never collides with
  // the routing entry of its dead predecessor.
  std::random_device rd;
  const std::string identity =
      "w" + std::to_string(options.rank) + "-" + std::to_string(getpid()) + "-" + std::to_string(rd());
  for (const auto& ep : options.servers) {
    TETHER_ASSIGN_OR_RETURN(zmq::socket_t s, ConnectDealer(*c->ctx_, ep, identity, so));
    c->sockets_.push_back(std::move(s));
  }
  const int64_t ts = c->NewGroup(false);
  for (int s = 0; s < c->num_shards_; ++s) {
    Message m;
    m.header.set_type(HELLO);
    m.header.set_staleness(options.staleness);
    m.header.set_model_fingerprint(options.model_fingerprint);
    Sub sub;
    sub.ts = ts;
    sub.expect = HELLO_REPLY;
    c->Send(s, &m, std::move(sub));
  }
  Status st = c->Wait(ts);
  if (!st.ok()) {
    if (st.code() == Status::Code::kDeadlineExceeded) return st;
    return Status::FailedPrecondition(st.message());
  }
  return c;
}

int64_t WorkerClient::NewGroup(bool detached) {
  const int64_t ts = next_ts_++;
  Group& g = groups_[ts];
  g.detached = detached;
  return ts;
}

void WorkerClient::Send(int shard, Message* m, Sub sub) {
  // Flow control: never more than `window` requests in flight to a shard.
  // With the window at most both high-water marks, the replies owed to this
  // worker always fit its receive queue, so the shard never blocks sending
  // to it and always drains what this worker queued: a full send queue only
  // ever makes this worker wait (back-pressure), it never deadlocks and
  // ZeroMQ never drops (case C13).
  int window = options_.max_outstanding;
  for (int hwm : {options_.send_hwm, options_.recv_hwm})
    if (hwm > 0) window = std::min(window, hwm);
  window = std::max(window, 1);
  if (outstanding_[shard] >= window) ++stats_.send_waits;
  while (outstanding_[shard] >= window) {
    Status st = Progress(options_.request_timeout_ms);
    if (!st.ok()) {
      if (m->header.type() == PUSH) NoteLostPush(shard, *m, sub.updates, st);
      Fail(sub.ts, st);
      return;
    }
  }
  const uint64_t id = next_request_++;
  last_send_ = SteadyClock::now();
  m->header.set_request_id(id);
  m->header.set_sender_rank(options_.rank);
  m->header.set_clock(clock_);
  stats_.bytes_sent += m->keys.size() + m->values.size();
  const bool wants_reply = sub.expect != MSG_UNKNOWN;
  const int64_t ts = sub.ts;
  const bool is_push = m->header.type() == PUSH;
  const uint64_t updates = sub.updates;
  if (wants_reply) {
    sub.shard = shard;
    subs_.emplace(id, std::move(sub));
    groups_[ts].remaining++;
    outstanding_[shard]++;
  }
  // The key range goes into the error if the send fails (SendMessage
  // empties the frames only when it succeeds).
  const Message* lost = is_push ? m : nullptr;
  Status st = SendMessage(sockets_[shard], m, nullptr, "server " + std::to_string(shard) + " (" +
                                                         options_.servers[shard] + ")");
  if (st.ok() && is_push) stats_.updates_sent += updates;
  if (!st.ok()) {
    if (lost != nullptr) NoteLostPush(shard, *lost, updates, st);
    if (wants_reply) {
      subs_.erase(id);
      groups_[ts].remaining--;
      outstanding_[shard]--;
    }
    Fail(ts, st);
  }
}

void WorkerClient::NoteLostPush(int shard, const Message& m, uint64_t updates, const Status& why) {
  // A lost update is never silent: counted, logged as an error naming the
  // peer and the key range, and the push's failure reaches the next Wait.
  stats_.updates_failed += updates;
  const MessageHeader& h = m.header;
  std::string range = h.num_keys() == 0 ? "dense slice" : std::to_string(h.num_keys()) + " keys";
  if (h.num_keys() > 0 && m.keys.size() == h.num_keys() * sizeof(uint64_t)) {
    std::vector<uint64_t> scratch;
    const uint64_t* k = m.KeyData(&scratch);
    range = std::to_string(h.num_keys()) + " keys " + std::to_string(k[0]) + ".." + std::to_string(k[h.num_keys() - 1]);
  }
  const std::string table =
      h.table_id() < options_.tables.size() ? options_.tables[h.table_id()].name : std::to_string(h.table_id());
  LOG(ERROR) << log_prefix_ << "push of " << updates << " update(s) to server " << shard << " ("
             << options_.servers[shard] << "), table " << table << ", " << range << " lost: " << why.message();
}

void WorkerClient::Fail(int64_t ts, const Status& st) {
  auto it = groups_.find(ts);
  if (it == groups_.end() || it->second.detached) {
    if (sticky_error_.ok()) sticky_error_ = st;
    if (it != groups_.end() && it->second.remaining == 0) groups_.erase(it);
    return;
  }
  if (it->second.status.ok()) it->second.status = st;
}

int64_t WorkerClient::PullRows(uint32_t table, const std::vector<uint64_t>& keys, float* out) {
  const int64_t ts = NewGroup(false);
  const TableSpec& spec = options_.tables[table];
  const uint32_t dim = spec.dim;
  TableCache& cache = caches_[table];
  Status drained = AwaitOwnPushes(table);
  if (!drained.ok()) Fail(ts, drained);
  std::fill(cache.read_version.begin(), cache.read_version.end(), UINT64_MAX);
  stats_.rows_read += keys.size();
  const std::vector<uint64_t>* to_fetch = &keys;
  std::vector<uint32_t> fetch_pos;
  std::vector<uint64_t> fetch_keys;
  if (cache.enabled) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = cache.rows.find(keys[i]);
      if (it != cache.rows.end() && Fresh(it->second, spec.staleness)) {
        std::memcpy(out + i * size_t{dim}, it->second.values.data(), dim * sizeof(float));
        uint64_t& rv = cache.read_version[ShardForKey(keys[i], num_shards_)];
        rv = std::min(rv, it->second.version);
        ++stats_.cache_hits;
      } else {
        fetch_keys.push_back(keys[i]);
        fetch_pos.push_back(static_cast<uint32_t>(i));
      }
    }
    to_fetch = &fetch_keys;
  }
  // One shard and nothing from the cache: every key goes to shard 0 in
  // order, so the rows of each reply land in one contiguous block and there
  // are no positions to split or keep.
  const bool whole = num_shards_ == 1 && !cache.enabled;
  if (!whole) SplitKeysByShard(*to_fetch, num_shards_, &split_keys_, &split_pos_);
  const size_t chunk = RowsPerMessage(dim);
  for (int s = 0; s < num_shards_; ++s) {
    const size_t shard_keys = whole ? keys.size() : split_keys_[s].size();
    // Keys [c0, c1) of this shard per message, so that no reply passes the
    // message size limit; the replies land at their keys' positions.
    for (size_t c0 = 0; c0 < shard_keys; c0 += chunk) {
      const size_t c1 = std::min(shard_keys, c0 + chunk);
      const uint64_t* ks = (whole ? keys.data() : split_keys_[s].data()) + c0;
      Message m;
      m.header.set_type(PULL);
      m.header.set_table_id(table);
      m.header.set_num_keys(c1 - c0);
      m.header.set_value_dim(dim);
      m.keys = CopyFrame(frame_pool_, ks, (c1 - c0) * sizeof(uint64_t));
      Sub sub;
      sub.ts = ts;
      sub.table = table;
      sub.out = out;
      sub.dim = dim;
      sub.num_rows = c1 - c0;
      if (whole) {
        sub.identity = true;
        sub.first_position = static_cast<uint32_t>(c0);
      } else {
        sub.positions.assign(split_pos_[s].begin() + c0, split_pos_[s].begin() + c1);
      }
      if (cache.enabled) {
        for (auto& p : sub.positions) p = fetch_pos[p];  // back to positions in `keys`
        sub.keys.assign(ks, ks + (c1 - c0));
      }
      sub.expect = PULL_REPLY;
      ++stats_.pulls;
      stats_.rows_pulled += c1 - c0;
      Send(s, &m, std::move(sub));
    }
  }
  return ts;
}

size_t WorkerClient::RowsPerMessage(uint32_t dim) const {
  const uint64_t limit = std::min<uint64_t>(options_.max_message_bytes, kMaxFrameBytes);
  return static_cast<size_t>(std::max<uint64_t>(1, limit / (uint64_t{dim} * sizeof(float))));
}

int64_t WorkerClient::PushRows(uint32_t table, const std::vector<uint64_t>& keys, const float* grads) {
  const int64_t ts = NewGroup(true);
  const uint32_t dim = options_.tables[table].dim;
  // One shard: the keys and gradients go as they are, in contiguous blocks.
  const bool whole = num_shards_ == 1;
  if (!whole) SplitKeysByShard(keys, num_shards_, &split_keys_, &split_pos_);
  const size_t chunk = RowsPerMessage(dim);
  for (int s = 0; s < num_shards_; ++s) {
    const size_t shard_keys = whole ? keys.size() : split_keys_[s].size();
    // Keys [c0, c1) of this shard per message, within the message size limit.
    for (size_t c0 = 0; c0 < shard_keys; c0 += chunk) {
      const size_t c1 = std::min(shard_keys, c0 + chunk);
      const size_t n = c1 - c0;
      const uint64_t* ks = (whole ? keys.data() : split_keys_[s].data()) + c0;
      Message m;
      m.header.set_type(PUSH);
      m.header.set_table_id(table);
      m.header.set_num_keys(n);
      m.header.set_value_dim(dim);
      m.header.set_num_values(n * dim);
      m.header.set_version(PushVersion(table, s));
      m.keys = CopyFrame(frame_pool_, ks, n * sizeof(uint64_t));
      // The gradients are copied now (the caller may reuse `grads` at once).
      if (whole) {
        m.values = CopyFrame(frame_pool_, grads + c0 * dim, n * dim * sizeof(float));
      } else {
        m.values = frame_pool_.Take(n * dim * sizeof(float));
        GatherRows(grads, split_pos_[s].data() + c0, n, dim, static_cast<float*>(m.values.data()));
      }
      Sub sub;
      sub.ts = ts;
      sub.table = table;
      sub.dim = dim;
      sub.expect = PUSH_REPLY;
      sub.updates = n;
      if (caches_[table].enabled && caches_[table].refresh_on_push) {
        m.header.set_want_values(true);
        caches_[table].pushes_in_flight++;
        for (size_t i = 0; i < n; ++i) caches_[table].rows[ks[i]].pending_pushes++;
        sub.keys.assign(ks, ks + n);
      } else if (caches_[table].enabled) {
        // Own write not in the cache: the next read must come from the server.
        for (size_t i = 0; i < n; ++i) caches_[table].rows.erase(ks[i]);
      }
      ++stats_.pushes;
      stats_.rows_pushed += n;
      Send(s, &m, std::move(sub));
    }
  }
  auto it = groups_.find(ts);
  if (it != groups_.end() && it->second.remaining == 0) groups_.erase(it);
  return ts;
}

int64_t WorkerClient::PullDense(uint32_t table, float* out) {
  const int64_t ts = NewGroup(false);
  const TableSpec& spec = options_.tables[table];
  const uint64_t size = spec.size;
  TableCache& cache = caches_[table];
  Status drained = AwaitOwnPushes(table);
  if (!drained.ok()) Fail(ts, drained);
  std::fill(cache.read_version.begin(), cache.read_version.end(), UINT64_MAX);
  for (int s = 0; s < num_shards_; ++s) {
    auto [b, e] = DenseRange(size, s, num_shards_);
    if (b == e) continue;
    if (cache.enabled && Fresh(cache.dense[s], spec.staleness)) {
      std::memcpy(out + b, cache.dense[s].values.data(), (e - b) * sizeof(float));
      cache.read_version[s] = cache.dense[s].version;
      ++stats_.cache_hits;
      continue;
    }
    Message m;
    m.header.set_type(PULL);
    m.header.set_table_id(table);
    Sub sub;
    sub.ts = ts;
    sub.table = table;
    sub.out = out;
    sub.dense = true;
    sub.dense_begin = b;
    sub.expect = PULL_REPLY;
    ++stats_.pulls;
    Send(s, &m, std::move(sub));
  }
  return ts;
}

int64_t WorkerClient::PushDense(uint32_t table, const float* grad) {
  const int64_t ts = NewGroup(true);
  const uint64_t size = options_.tables[table].size;
  for (int s = 0; s < num_shards_; ++s) {
    auto [b, e] = DenseRange(size, s, num_shards_);
    if (b == e) continue;
    Message m;
    m.header.set_type(PUSH);
    m.header.set_table_id(table);
    m.header.set_num_values(e - b);
    m.header.set_version(PushVersion(table, s));
    m.values = CopyFrame(frame_pool_, grad + b, (e - b) * sizeof(float));
    Sub sub;
    sub.ts = ts;
    sub.table = table;
    sub.dense = true;
    sub.expect = PUSH_REPLY;
    sub.updates = 1;
    if (caches_[table].enabled && caches_[table].refresh_on_push) {
      m.header.set_want_values(true);
      caches_[table].pushes_in_flight++;
      caches_[table].dense[s].pending_pushes++;
    } else if (caches_[table].enabled) {
      caches_[table].dense[s].values.clear();
    }
    ++stats_.pushes;
    Send(s, &m, std::move(sub));
  }
  auto it = groups_.find(ts);
  if (it != groups_.end() && it->second.remaining == 0) groups_.erase(it);
  return ts;
}

void WorkerClient::Complete(uint64_t request_id, Message* reply) {
  auto it = subs_.find(request_id);
  if (it == subs_.end()) {
    LOG(WARNING) << log_prefix_ << "reply " << TypeName(reply->header.type()) << " for unknown request "
                 << request_id << "; ignored";
    return;
  }
  Sub& sub = it->second;
  outstanding_[sub.shard]--;
  if (sub.expect == PUSH_REPLY && caches_[sub.table].enabled && caches_[sub.table].refresh_on_push) {
    TableCache& cache = caches_[sub.table];
    cache.pushes_in_flight--;
    if (sub.dense) {
      cache.dense[sub.shard].pending_pushes--;
    } else {
      for (uint64_t k : sub.keys) cache.rows[k].pending_pushes--;
    }
  }
  auto git = groups_.find(sub.ts);
  Status st;
  const MessageHeader& h = reply->header;
  if (h.type() == ERROR_REPLY) {
    st = Status::FailedPrecondition(h.error());
  } else if (h.type() != sub.expect) {
    st = Status::DataLoss("server " + std::to_string(sub.shard) + " answered " + TypeName(h.type()) +
                          " to a request expecting " + TypeName(sub.expect));
  } else if (h.type() == HELLO_REPLY) {
    clock_ = std::max(clock_, h.clock());
  } else if (h.type() == PUSH_REPLY) {
    TableCache& cache = caches_[sub.table];
    if (cache.enabled && cache.refresh_on_push && h.num_values() > 0) {
      const float* v = reply->ValueData(&scratch_);
      const auto [b, e] = DenseRange(options_.tables[sub.table].size, sub.shard, num_shards_);
      if (sub.dense) {
        if (h.num_values() == e - b) Store(sub.table, sub.shard, nullptr, 0, v, h.min_clock(), h.version());
      } else if (h.num_values() == sub.keys.size() * size_t{sub.dim}) {
        Store(sub.table, sub.shard, sub.keys.data(), sub.keys.size(), v, h.min_clock(), h.version());
      }
    }
  } else if (h.type() == PULL_REPLY) {
    const float* v = reply->ValueData(&scratch_);
    TableCache& cache = caches_[sub.table];
    uint64_t& rv = cache.read_version[sub.shard];
    rv = std::min(rv, h.version());
    if (!sub.dense) {
      if (h.num_values() != sub.num_rows * sub.dim) {
        st = Status::DataLoss("server " + std::to_string(sub.shard) + " returned " +
                              std::to_string(h.num_values()) + " floats for " +
                              std::to_string(sub.num_rows) + " rows of dim " + std::to_string(sub.dim));
      } else {
        if (sub.identity) {
          std::memcpy(sub.out + size_t{sub.first_position} * sub.dim, v, h.num_values() * sizeof(float));
        } else {
          ScatterRows(v, sub.positions.data(), sub.num_rows, sub.dim, sub.out);
        }
        if (!sub.keys.empty()) Store(sub.table, sub.shard, sub.keys.data(), sub.keys.size(), v, h.min_clock(), h.version());
      }
    } else {
      // The reply must fill exactly this shard's slice: fewer floats would
      // leave stale values, more would write past the caller's buffer.
      const auto [b, e] = DenseRange(options_.tables[sub.table].size, sub.shard, num_shards_);
      if (h.num_values() != e - b) {
        st = Status::DataLoss("server " + std::to_string(sub.shard) + " returned " + std::to_string(h.num_values()) +
                              " floats of dense table " + options_.tables[sub.table].name + " for a slice of " +
                              std::to_string(e - b));
      } else {
        std::memcpy(sub.out + sub.dense_begin, v, h.num_values() * sizeof(float));
        Store(sub.table, sub.shard, nullptr, 0, v, h.min_clock(), h.version());
      }
    }
  } else if (h.type() == STATS_REPLY && stats_sink_ != nullptr) {
    *stats_sink_ = h.shard_stats();
  } else if (h.type() == BARRIER_REPLY && git != groups_.end()) {
    git->second.samples = h.samples();
  }
  if (!st.ok() && sub.expect == PUSH_REPLY) {
    stats_.updates_failed += sub.updates;
    LOG(ERROR) << log_prefix_ << "push of " << sub.updates << " update(s) to server " << sub.shard << " ("
               << options_.servers[sub.shard] << "), table " << options_.tables[sub.table].name
               << " refused: " << st.message();
  }
  const int64_t ts = sub.ts;
  subs_.erase(it);
  if (git == groups_.end()) return;
  if (!st.ok()) Fail(ts, st);
  if (--git->second.remaining == 0 && git->second.detached) {
    groups_.erase(git);
  }
}

Status WorkerClient::Progress(int timeout_ms) {
  std::vector<zmq::pollitem_t> items;
  for (auto& s : sockets_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  int n = 0;
  const auto start = SteadyClock::now();
  try {
    while (true) {
      if (options_.abort != nullptr && options_.abort->load())
        return Status::Unavailable(log_prefix_ + "aborted: another worker of this process failed");
      // Poll in heartbeat-sized slices: a worker blocked on the staleness
      // bound must still look alive to the servers (and see an abort).
      const int64_t waited = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
      const int64_t slice = std::min<int64_t>(timeout_ms - waited, options_.heartbeat_interval_ms);
      n = zmq::poll(items.data(), items.size(), std::chrono::milliseconds(std::max<int64_t>(0, slice)));
      if (n > 0 || waited + slice >= timeout_ms) break;
      if (SteadyClock::now() - last_send_ >= std::chrono::milliseconds(options_.heartbeat_interval_ms))
        SendHeartbeats();
    }
  } catch (const zmq::error_t& e) {
    return Status::IOError(log_prefix_ + "poll: " + e.what());
  }
  if (n == 0) {
    std::string silent;
    for (int s = 0; s < num_shards_; ++s)
      if (outstanding_[s] > 0) silent += (silent.empty() ? "" : ", ") + options_.servers[s];
    return Status::DeadlineExceeded(log_prefix_ + "no reply within " + std::to_string(timeout_ms) +
                                    " ms from server(s) " + silent);
  }
  Message reply;
  for (int s = 0; s < num_shards_; ++s) {
    if (!(items[s].revents & ZMQ_POLLIN)) continue;
    while (true) {
      Status st = RecvMessage(sockets_[s], &reply, nullptr);
      if (st.code() == Status::Code::kUnavailable) break;
      if (!st.ok()) return Status::DataLoss(log_prefix_ + "from server " + options_.servers[s] + ": " + st.message());
      stats_.bytes_received += reply.values.size() + reply.keys.size();
      Complete(reply.header.request_id(), &reply);
    }
  }
  return Status::OK();
}

Status WorkerClient::Wait(int64_t ts) { return Wait(ts, options_.request_timeout_ms); }

Status WorkerClient::Wait(int64_t ts, int timeout_ms) {
  const auto start = SteadyClock::now();
  Status result;
  while (true) {
    auto it = groups_.find(ts);
    if (it == groups_.end()) {
      result = sticky_error_;
      break;
    }
    if (it->second.remaining == 0) {
      result = it->second.status;
      groups_.erase(it);
      if (result.ok()) result = sticky_error_;
      break;
    }
    const int left_ms = timeout_ms - static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          SteadyClock::now() - start).count());
    Status st = left_ms > 0 ? Progress(left_ms)
                            : Status::DeadlineExceeded(log_prefix_ + "request not answered within " +
                                                       std::to_string(timeout_ms) + " ms");
    if (!st.ok()) {
      result = st;
      break;
    }
  }
  stats_.wait_seconds += std::chrono::duration<double>(SteadyClock::now() - start).count();
  return result;
}

Status WorkerClient::WaitAll() {
  while (!subs_.empty()) TETHER_RETURN_IF_ERROR(Progress(options_.request_timeout_ms));
  groups_.clear();
  return sticky_error_;
}

Status WorkerClient::Clock() {
  ++clock_;
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(CLOCK);
    Send(s, &m, Sub{});
  }
  return sticky_error_;
}

StatusOr<uint64_t> WorkerClient::Barrier(uint64_t samples, const WorkerStats& stats) {
  TETHER_RETURN_IF_ERROR(WaitAll());
  const int64_t ts = NewGroup(false);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(BARRIER);
    m.header.set_samples(samples);
    *m.header.mutable_worker_stats() = stats;
    Sub sub;
    sub.ts = ts;
    sub.expect = BARRIER_REPLY;
    Send(s, &m, std::move(sub));
  }
  uint64_t total = 0;
  // Record the total before Wait erases the group.
  while (true) {
    auto it = groups_.find(ts);
    if (it == groups_.end()) break;
    if (it->second.remaining == 0) {
      total = it->second.samples;
      break;
    }
    TETHER_RETURN_IF_ERROR(Progress(options_.request_timeout_ms));
  }
  TETHER_RETURN_IF_ERROR(Wait(ts));
  return total;
}

Status WorkerClient::Bye() {
  TETHER_RETURN_IF_ERROR(WaitAll());
  const int64_t ts = NewGroup(false);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(BYE);
    Sub sub;
    sub.ts = ts;
    sub.expect = BYE_REPLY;
    Send(s, &m, std::move(sub));
  }
  Status st = Wait(ts);
  // The worker's half of "updates sent == updates applied" (the servers log theirs).
  LOG(INFO) << log_prefix_ << "leaving: " << stats_.updates_sent << " updates sent, " << stats_.updates_failed
            << " lost, " << stats_.send_waits << " sends waited on back-pressure";
  const FramePool::Stats pool = frame_pool_.stats();
  LOG(INFO) << log_prefix_ << "request frames: " << pool.takes << " pooled, " << pool.reuses << " reused, "
            << pool.maps << " mapped, " << pool.unmaps << " unmapped, " << pool.idle_bytes / 1e6 << " MB idle";
  return st;
}

}  // namespace tether

namespace tether {

Status WorkerClient::AwaitOwnPushes(uint32_t table) {
  const TableCache& cache = caches_[table];
  if (!cache.enabled || !cache.refresh_on_push) return Status::OK();
  const auto start = SteadyClock::now();
  while (cache.pushes_in_flight > 0) TETHER_RETURN_IF_ERROR(Progress(options_.request_timeout_ms));
  stats_.wait_seconds += std::chrono::duration<double>(SteadyClock::now() - start).count();
  return Status::OK();
}

uint64_t WorkerClient::PushVersion(uint32_t table, int shard) const {
  const uint64_t v = caches_[table].read_version[shard];
  return v == UINT64_MAX ? 0 : v;
}

Status WorkerClient::Idle(int ms) {
  const auto until = SteadyClock::now() + std::chrono::milliseconds(ms);
  while (true) {
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - SteadyClock::now()).count();
    if (left <= 0) return sticky_error_;
    if (SteadyClock::now() - last_send_ >= std::chrono::milliseconds(options_.heartbeat_interval_ms))
      SendHeartbeats();
    Status st = Progress(static_cast<int>(std::min<int64_t>(left, options_.heartbeat_interval_ms)));
    if (!st.ok() && st.code() != Status::Code::kDeadlineExceeded) return st;
  }
}

StatusOr<std::vector<ShardStats>> WorkerClient::FetchServerStats() {
  TETHER_RETURN_IF_ERROR(WaitAll());
  std::vector<ShardStats> out(num_shards_);
  for (int s = 0; s < num_shards_; ++s) {
    const int64_t ts = NewGroup(false);
    Message m;
    m.header.set_type(STATS);
    Sub sub;
    sub.ts = ts;
    sub.expect = STATS_REPLY;
    sub.positions.clear();
    stats_sink_ = &out[s];
    Send(s, &m, std::move(sub));
    Status st = Wait(ts);
    stats_sink_ = nullptr;
    TETHER_RETURN_IF_ERROR(st);
  }
  return out;
}

}  // namespace tether
