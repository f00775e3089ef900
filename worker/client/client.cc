// WorkerClient: connecting (HELLO), the request plumbing shared by every
// call (request tags, key lists, sending a shard's part, lost pushes), the
// pull path, the replies, and the clock. The push path is client_push.cc.
#include "worker/client/client.h"
#include "worker/client/local_replica.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include <glog/logging.h>

#include "core/net/value_frames.h"
#include "core/partition.h"
#include "worker/client/client_frames.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

RequestChannel::Options ChannelOptions(const ClientOptions& o) {
  RequestChannel::Options c;
  c.rank = o.rank;
  c.servers = o.servers;
  c.heartbeat_interval_ms = o.heartbeat_interval_ms;
  c.request_timeout_ms = o.request_timeout_ms;
  c.max_outstanding = o.max_outstanding;
  c.send_hwm = o.send_hwm;
  c.recv_hwm = o.recv_hwm;
  c.context = o.context;
  c.abort = o.abort;
  c.frame_pool_idle_bytes = o.frame_pool_idle_bytes;
  c.liveness_timeout_ms = o.liveness_timeout_ms;
  c.first_connect_timeout_ms = o.first_connect_timeout_ms;
  c.servers_source = o.servers_source;
  c.server_lookup = o.server_lookup;
  c.claim_lookup = o.claim_lookup;
  c.curve = o.curve;
  c.stop_requested = o.stop_requested;
  c.widen_pull_replies = false;  // OnPullReply widens into the caller's buffer
  return c;
}

std::vector<ParamCache::TableOptions> CacheOptions(const std::vector<TableSpec>& tables) {
  std::vector<ParamCache::TableOptions> out(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const TableSpec& spec = tables[t];
    out[t].dense = IsDenseTable(spec);
    out[t].dim = spec.dim();
    out[t].size = spec.size();
    out[t].staleness = TableStaleness(spec);
    out[t].cache = spec.consistency().cache();
    out[t].refresh_on_push = spec.consistency().refresh_on_push();
  }
  return out;
}

// What the push encoder needs of each table.
std::vector<PushEncoder::Table> EncoderTables(const ClientOptions& o) {
  std::vector<PushEncoder::Table> out(o.tables.size());
  for (size_t t = 0; t < o.tables.size(); ++t) {
    const TableSpec& spec = o.tables[t];
    out[t].name = spec.name();
    out[t].wire = spec.push_wire();
    out[t].error_feedback = t < o.error_feedback.size() && o.error_feedback[t];
    out[t].dense = IsDenseTable(spec);
    out[t].dim = spec.dim();
    out[t].size = spec.size();
    out[t].num_keys = spec.num_keys();
  }
  return out;
}

// The body of this worker's HELLO to shard `shard` of `num_shards`.
HelloBody HelloFor(const ClientOptions& options, int shard, int num_shards) {
  HelloBody h;
  h.set_staleness(options.staleness);
  h.set_data_on_demand(options.data_on_demand);
  if (options.epochs > 0) h.set_train_epochs(options.epochs);
  if (options.num_workers > 0) h.set_num_workers(options.num_workers);
  if (options.checkpoint_dir.has_value()) h.set_checkpoint_dir(*options.checkpoint_dir);
  for (const auto& [field, digest] : options.data_digests) {
    DataDigest* d = h.add_data_digests();
    d->set_field(field);
    d->set_digest(digest);
  }
  if (options.keep_best_model) h.set_keep_best_model(true);
  h.set_consistency_model(options.consistency_model);
  h.set_job_id(options.job_id);
  h.set_generation(options.generation);
  h.set_shard(shard);
  h.set_num_shards(num_shards);
  for (const TableSpec& t : options.tables) *h.add_tables() = t;
  if (!options.resume_from.empty()) {
    h.set_resume_from(options.resume_from);
    h.set_resume_clock(options.resume_clock);
  }
  return h;
}

}  // namespace

WorkerClient::WorkerClient(const ClientOptions& options)
    : options_(options),
      num_shards_(static_cast<int>(options.servers.size())),
      channel_(ChannelOptions(options),
               [this](uint64_t tag, const Status& verdict, Message* reply) { return OnReply(tag, verdict, reply); }),
      cache_(CacheOptions(options.tables), std::max(1, num_shards_), options.cache_capacity_bytes),
      push_encoder_(EncoderTables(options), options.residual_bytes) {
  key_lists_.resize(std::max(1, num_shards_));  // capacity 0 until HELLO_REPLY
  channel_.set_values_placer(
      [this](uint64_t tag, const MessageHeader& h, uint64_t bytes) { return PullDestination(tag, h, bytes); });
}

WorkerClient::~WorkerClient() = default;

StatusOr<std::unique_ptr<WorkerClient>> WorkerClient::Connect(const ClientOptions& options) {
  if (options.servers.empty()) return Status::InvalidArgument("no server addresses given");
  std::unique_ptr<WorkerClient> c(new WorkerClient(options));
  TETHER_RETURN_IF_ERROR(c->channel_.Connect());
  RequestHandle hello = c->channel_.NewRequest(/*sticky=*/false);
  for (int s = 0; s < c->num_shards_; ++s) {
    Message m;
    m.header.set_type(HELLO);
    m.header.set_protocol_version(kProtocolVersion);
    *m.header.mutable_hello() = HelloFor(options, s, c->num_shards_);
    c->SendPart(s, &m, hello, c->NewShardRequest(HELLO_REPLY, s, 0));
  }
  // The first refusal ends the wait: another shard may never answer (it
  // was told by another worker that the job cannot run, and ended).
  Status st = hello.WaitFirstError();
  if (!st.ok()) {
    if (st.code() == Status::Code::kDeadlineExceeded) return st;
    // A shard gone before it answered may have ended because another shard
    // refused (another worker told it why the job cannot run): the other
    // shards get a moment to answer, and a refusal among their answers is
    // the reason given rather than the shard that went.
    constexpr int kRefusalWaitMs = 1000;
    if (c->hello_refusal_.empty()) hello.AwaitOtherParts(kRefusalWaitMs);
    if (!c->hello_refusal_.empty()) st = Status::FailedPrecondition(c->hello_refusal_);
    // A shard refused (say it could not load its checkpoint): the shards
    // that took this worker in learn why the job cannot run, naming that
    // shard, rather than waiting for a worker that fell silent. A shard
    // that failed on its own ignores the ABORT (server/server.h).
    c->leaving_ = true;
    c->channel_.SendAbort("worker " + std::to_string(options.rank) + " could not join: " + st.message(),
                          /*bound_ms=*/1000, options.job_id, options.generation, c->hello_refused_);
    return Status::FailedPrecondition(st.message());
  }
  return c;
}

uint64_t WorkerClient::NewShardRequest(MessageType expect, int shard, uint32_t table) {
  const uint32_t tag = requests_.Take();
  // Reset field by field: the vectors keep their capacity.
  ShardRequest& r = requests_[tag];
  r.expect = expect;
  r.shard = shard;
  r.table = table;
  r.out = nullptr;
  r.dim = 0;
  r.dense = false;
  r.dense_begin = 0;
  r.positions.clear();
  r.identity = false;
  r.first_position = 0;
  r.num_rows = 0;
  r.keys.clear();
  r.want_values = false;
  r.updates = 0;
  r.key_list = 0;
  r.push_version = 0;
  r.stamp_clock = -1;
  r.ahead = false;
  return tag;
}

void WorkerClient::Release(uint64_t tag) {
  ShardRequest& r = requests_[tag];
  r.list_keys.reset();
  r.resend_values = zmq::message_t();
  requests_.Give(static_cast<uint32_t>(tag));
}

KeyListCache::List WorkerClient::SetRequestKeys(int s, uint32_t table, const uint64_t* ks, size_t n, Message* m,
                                                uint64_t tag) {
  KeyListCache& lists = key_lists_[s];
  // A table that admits or evicts moves its rows on the shard: plain keys.
  if (!options_.key_lists || n < kMinKeyListKeys || KeyListCache::Charge(n) > lists.capacity_bytes() ||
      AdmitsOrEvicts(options_.tables[table])) {
    m->keys = CopyFrame(channel_.frame_pool(), ks, n * sizeof(uint64_t));
    return nullptr;
  }
  // The name: the probe (64 of the keys), or, where this mirror holds
  // another list under the probe, the signature of every key, top bit set
  // (key_list_cache.h). Either way the whole list is compared with the one
  // held before it is named.
  // FixedKeys sent whole: a list held as their own vector holds them (it
  // is immutable), and a new list keeps that vector instead of a copy.
  const bool fixed = fixed_keys_ != nullptr && ks == fixed_keys_->data() && n == fixed_keys_->size();
  uint64_t id = KeyListProbe(ks, n);
  for (bool probe = true;; probe = false) {
    KeyListCache::List held = lists.Peek(table, id);
    if (!held) break;  // define it under id
    if (held->size() == n && ((fixed && held == fixed_keys_) || std::equal(ks, ks + n, held->begin()))) {
      // Use: the shard holds these keys' rows. Touched as the shard will.
      (void)lists.Find(table, id);
      m->header.set_key_list(id);
      ShardRequest& r = requests_[tag];
      r.key_list = id;
      r.list_keys = held;
      ++stats_.key_lists_used;
      stats_.key_list_bytes_saved += n * sizeof(uint64_t);
      return held;
    }
    if (!probe) {
      // Another list with the same signature too (a 64-bit collision):
      // sent plainly, the held ones left as they are, on both ends.
      m->keys = CopyFrame(channel_.frame_pool(), ks, n * sizeof(uint64_t));
      return nullptr;
    }
    id = KeyListSignature(ks, n) | (uint64_t{1} << 63);
  }
  // Define: the keys and the id; the shard keeps the list (same capacity,
  // same order of puts and uses, so it holds what this mirror holds).
  KeyListCache::List list = fixed ? fixed_keys_ : std::make_shared<const std::vector<uint64_t>>(ks, ks + n);
  (void)lists.Put(table, id, list);
  m->header.set_key_list(id);
  m->keys = CopyFrame(channel_.frame_pool(), ks, n * sizeof(uint64_t));
  ++stats_.key_lists_defined;
  return list;
}

Status WorkerClient::ResendWithKeys(uint64_t tag) {
  ShardRequest& r = requests_[tag];
  const int s = r.shard;
  key_lists_[s].Erase(r.table, r.key_list);  // the next request of these keys defines the list again
  const KeyListCache::List keys = std::move(r.list_keys);
  const uint64_t n = keys->size();
  Message m;
  m.header.set_type(r.expect == PUSH_REPLY ? PUSH : PULL);
  m.header.set_table_id(r.table);
  m.header.set_num_keys(n);
  m.header.set_value_dim(r.dim);
  m.keys = CopyFrame(channel_.frame_pool(), keys->data(), n * sizeof(uint64_t));
  if (r.expect == PUSH_REPLY) {
    m.header.set_num_values(n * r.dim);
    // The kept frame is in the table's push encoding (PushRowsAs).
    if (push_encoder_.narrows(r.table)) m.header.set_value_encoding(push_encoder_.wire(r.table));
    m.header.mutable_push()->set_base_version(r.push_version);
    if (r.want_values) m.header.mutable_push()->set_want_values(true);
    m.values = std::move(r.resend_values);
  }
  r.key_list = 0;
  ++stats_.key_lists_resent;
  stats_.key_list_bytes_saved -= std::min<uint64_t>(stats_.key_list_bytes_saved, n * sizeof(uint64_t));
  VLOG(1) << channel_.log_prefix() << "server " << s << " did not hold a key list of table "
          << options_.tables[r.table].name() << " (" << n << " keys): sent again with its keys";
  // The record stays taken: the new part answers to the same tag.
  const Status st = channel_.SendFromReply(s, &m, r.expect, tag, r.stamp_clock);
  if (st.ok()) return st;
  // Never sent: as SendPart's failure (requests_ may have grown: look the record up again).
  ShardRequest& again = requests_[tag];
  if (again.expect == PUSH_REPLY) {
    NoteLostPush(s, m, again.updates, st);
    if (again.want_values) cache_.FinishPushRows(again.table, keys->data(), n);
  }
  Release(tag);
  return st;
}

void WorkerClient::SendPart(int shard, Message* m, const RequestHandle& request, uint64_t tag, int64_t stamp_clock) {
  const MessageType expect = requests_[tag].expect;
  const uint64_t updates = requests_[tag].updates;
  const Status st = channel_.Send(shard, m, &request, expect, tag, stamp_clock);
  if (st.ok()) {
    if (expect == PUSH_REPLY) stats_.updates_sent += updates;
    return;
  }
  // Never sent: no reply will come for this record.
  ShardRequest& r = requests_[tag];
  if (expect == PUSH_REPLY) {
    NoteLostPush(shard, *m, updates, st);
    if (r.want_values) {
      if (r.dense) {
        cache_.FinishPushDense(r.table, shard);
      } else {
        cache_.FinishPushRows(r.table, r.keys.data(), r.keys.size());
      }
    }
  }
  Release(tag);
}

void WorkerClient::NoteLostPush(int shard, const Message& m, uint64_t updates, const Status& why) {
  // A lost update is never silent: counted, logged as an error naming the
  // peer and the key range, and the push's failure is sticky.
  stats_.updates_failed += updates;
  const MessageHeader& h = m.header;
  std::string range = h.num_keys() == 0 ? "dense slice" : std::to_string(h.num_keys()) + " keys";
  if (h.num_keys() > 0 && m.keys.size() == h.num_keys() * sizeof(uint64_t)) {
    std::vector<uint64_t> scratch;
    const uint64_t* k = m.KeyData(&scratch);
    range = std::to_string(h.num_keys()) + " keys " + std::to_string(k[0]) + ".." + std::to_string(k[h.num_keys() - 1]);
  }
  const std::string table =
      h.table_id() < options_.tables.size() ? options_.tables[h.table_id()].name() : std::to_string(h.table_id());
  LOG(ERROR) << channel_.log_prefix() << "push of " << updates << " update(s) to server " << shard << " ("
             << options_.servers[shard] << "), table " << table << ", " << range << " lost: " << why.message();
}

size_t WorkerClient::RowsPerMessage(uint32_t table) const {
  const TableSpec& spec = options_.tables[table];
  const uint64_t limit = std::min<uint64_t>(options_.max_message_bytes, kMaxFrameBytes);
  uint64_t rows = std::max<uint64_t>(1, limit / (uint64_t{spec.dim()} * sizeof(float)));
  // A shard refuses a request for more rows of a budgeted table than it may
  // hold (the rows a request touches are never evicted for it): a request
  // that would need more, an evaluation minibatch's, goes in messages of at
  // most max_rows keys, each of which fits.
  if (spec.budget().max_rows() > 0) rows = std::min<uint64_t>(rows, spec.budget().max_rows());
  return static_cast<size_t>(rows);
}

RequestHandle WorkerClient::StartPull(uint32_t table, bool ahead) {
  RequestHandle request = channel_.NewRequest(/*sticky=*/false);
  Status drained = AwaitOwnPushes(table);
  if (!drained.ok()) channel_.Fail(request, drained);
  if (!ahead) cache_.StartRead(table);  // a read ahead was begun by StartReadAhead
  return request;
}

Status WorkerClient::AwaitOwnPushes(uint32_t table) {
  if (!cache_.refresh_on_push(table) || cache_.pushes_in_flight(table) == 0) return Status::OK();
  const auto start = SteadyClock::now();
  Status st;
  while (st.ok() && cache_.pushes_in_flight(table) > 0) st = channel_.Progress(options_.request_timeout_ms);
  own_wait_seconds_ += std::chrono::duration<double>(SteadyClock::now() - start).count();
  return st;
}

RequestHandle WorkerClient::PullRows(uint32_t table, const std::vector<uint64_t>& keys, float* out) {
  if (replica_ != nullptr && !replica_paused_) return replica_->PullRows(table, keys, out);
  return PullRowsFrom(table, keys, out, /*absent_as_zeros=*/false);
}

FixedKeys WorkerClient::FixKeys(std::vector<uint64_t> keys) {
  FixedKeys fixed;
  fixed.keys_ = std::make_shared<const std::vector<uint64_t>>(std::move(keys));
  return fixed;
}

RequestHandle WorkerClient::PullRows(uint32_t table, const FixedKeys& keys, float* out) {
  const FixedKeysInUse in_use(&fixed_keys_, keys.keys_);
  return PullRows(table, *keys.keys_, out);
}

RequestHandle WorkerClient::PullRowsAt(uint32_t table, const std::vector<uint64_t>& keys, const uint32_t* out_rows,
                                       float* out, int64_t read_clock) {
  if (replica_ != nullptr && !replica_paused_) {
    RequestHandle failed = DoneRequest();
    channel_.Fail(failed, Status::FailedPrecondition("PullRowsAt: a worker training a local replica (consistency "
                                                     "model AVERAGE) reads it with PullRows"));
    return failed;
  }
  return PullRowsFrom(table, keys, out, /*absent_as_zeros=*/false, out_rows, read_clock);
}

RequestHandle WorkerClient::PullRowsFrom(uint32_t table, const std::vector<uint64_t>& keys, float* out,
                                         bool absent_as_zeros, const uint32_t* out_rows, int64_t read_clock) {
  const bool ahead = read_clock >= 0;
  RequestHandle request = StartPull(table, ahead);
  // A read ahead (PullRowsAt) is stamped with its clock; a read now with none.
  const int64_t stamp = read_clock > channel_.clock() ? read_clock : -1;
  const int64_t at = stamp >= 0 ? stamp : channel_.clock();
  // Where row i of `keys` lands in `out` (PullRowsAt), in rows.
  const auto row_of = [out_rows](size_t i) { return out_rows != nullptr ? out_rows[i] : static_cast<uint32_t>(i); };
  const uint32_t dim = options_.tables[table].dim();
  // An absent-as-zeros pull bypasses the cache both ways: its zeros are not
  // rows, and it must not serve or keep them.
  const bool cached = !absent_as_zeros && cache_.enabled(table);
  stats_.rows_read += keys.size();
  if (cached) {
    // Hits land at row i; with out_rows, in scratch first, then at out_rows[i].
    float* read_out = out;
    if (out_rows != nullptr) {
      at_scratch_.resize(keys.size() * size_t{dim});
      read_out = at_scratch_.data();
    }
    const size_t hits =
        cache_.ReadRows(table, keys.data(), keys.size(), at, read_out, &fetch_keys_, &fetch_pos_, ahead);
    stats_.cache_hits += hits;
    if (out_rows != nullptr && hits > 0) {
      size_t miss = 0;  // fetch_pos_ is ascending
      for (size_t i = 0; i < keys.size(); ++i) {
        if (miss < fetch_pos_.size() && fetch_pos_[miss] == i) {
          ++miss;
          continue;
        }
        std::memcpy(out + size_t{out_rows[i]} * dim, read_out + i * dim, dim * sizeof(float));
      }
    }
  }
  // One shard and nothing from the cache: every key goes to shard 0 in
  // order, so the rows of each reply land in one contiguous block and there
  // are no positions to split or keep. Otherwise the replies land at their
  // keys' positions.
  const bool whole = num_shards_ == 1 && !cached;
  ForEachRowMessage(cached ? fetch_keys_ : keys, whole, table,
                    [&](int s, size_t c0, size_t c1, const uint64_t* ks) {
    Message m;
    m.header.set_type(PULL);
    m.header.set_table_id(table);
    m.header.set_num_keys(c1 - c0);
    m.header.set_value_dim(dim);
    const uint64_t tag = NewShardRequest(PULL_REPLY, s, table);
    if (absent_as_zeros) {
      m.header.mutable_pull()->set_absent_as_zeros(true);  // its zeros are no rows: never a key list
      m.keys = CopyFrame(channel_.frame_pool(), ks, (c1 - c0) * sizeof(uint64_t));
    } else {
      (void)SetRequestKeys(s, table, ks, c1 - c0, &m, tag);
    }
    ShardRequest& r = requests_[tag];
    r.out = out;
    r.dim = dim;
    r.num_rows = c1 - c0;
    r.stamp_clock = stamp;
    r.ahead = ahead;
    if (whole && out_rows == nullptr) {
      r.identity = true;
      r.first_position = static_cast<uint32_t>(c0);
    } else if (whole) {
      r.positions.assign(out_rows + c0, out_rows + c1);
    } else if (cached) {
      // Positions among the misses, back to positions in `keys`.
      for (size_t i = c0; i < c1; ++i) r.positions.push_back(row_of(fetch_pos_[split_pos_[s][i]]));
      r.keys.assign(ks, ks + (c1 - c0));
    } else if (out_rows == nullptr) {
      r.positions.assign(split_pos_[s].begin() + c0, split_pos_[s].begin() + c1);
    } else {
      for (size_t i = c0; i < c1; ++i) r.positions.push_back(row_of(split_pos_[s][i]));
    }
    ++stats_.pulls;
    stats_.rows_pulled += c1 - c0;
    SendPart(s, &m, request, tag, stamp);
  });
  return request;
}

RequestHandle WorkerClient::PullRowsIfPresent(uint32_t table, const std::vector<uint64_t>& keys, float* out) {
  const uint32_t dim = options_.tables[table].dim();
  const uint64_t row_bytes = uint64_t{dim} * sizeof(float);
  const size_t slice = static_cast<size_t>(std::max<uint64_t>(1, options_.eval_pull_bytes / row_bytes));
  if (keys.size() <= slice) return PullRowsFrom(table, keys, out, /*absent_as_zeros=*/true);
  // One slice in flight at a time: its reply frames are all a shard holds
  // for this pull. PullRowsFrom copies the keys into its messages, so the
  // slice's vector is free once it returns.
  std::vector<uint64_t> part;
  for (size_t b = 0;; b += slice) {
    const size_t e = std::min(keys.size(), b + slice);
    part.assign(keys.begin() + static_cast<ptrdiff_t>(b), keys.begin() + static_cast<ptrdiff_t>(e));
    RequestHandle h = PullRowsFrom(table, part, out + b * dim, /*absent_as_zeros=*/true);
    if (e == keys.size() || !h.Wait().ok()) return h;
  }
}

RequestHandle WorkerClient::PullDense(uint32_t table, float* out) {
  if (replica_ != nullptr && !replica_paused_) return replica_->PullDense(table, out);
  return PullDenseFrom(table, out);
}

RequestHandle WorkerClient::PullDenseFrom(uint32_t table, float* out) {
  RequestHandle request = StartPull(table);
  const uint64_t size = options_.tables[table].size();
  for (int s = 0; s < num_shards_; ++s) {
    auto [b, e] = DenseRange(size, s, num_shards_);
    if (b == e) continue;
    if (cache_.ReadDense(table, s, channel_.clock(), out + b)) {
      ++stats_.cache_hits;
      continue;
    }
    Message m;
    m.header.set_type(PULL);
    m.header.set_table_id(table);
    const uint64_t tag = NewShardRequest(PULL_REPLY, s, table);
    ShardRequest& r = requests_[tag];
    r.out = out;
    r.dense = true;
    r.dense_begin = b;
    ++stats_.pulls;
    SendPart(s, &m, request, tag);
  }
  return request;
}

Status WorkerClient::OnReply(uint64_t tag, const Status& verdict, Message* reply) {
  if ((tag & kControlTag) != 0)  // a JobSession's
    return control_replies_ ? control_replies_(tag & ~kControlTag, verdict, reply) : verdict;
  // A list the shard did not hold: the same request again, with its keys
  // (the user sees no failure; the push is still pending in the cache).
  if (!verdict.ok() && reply->header.error_reply().key_list_unknown() && requests_[tag].list_keys != nullptr && !leaving_)
    return ResendWithKeys(tag);
  const ShardRequest& r = requests_[tag];
  if (r.want_values) {
    if (r.dense) {
      cache_.FinishPushDense(r.table, r.shard);
    } else {
      cache_.FinishPushRows(r.table, r.keys.data(), r.keys.size());
    }
  }
  Status st = verdict;
  const MessageHeader& h = reply->header;
  if (!st.ok() && r.expect == HELLO_REPLY) {
    if (hello_refused_.size() < static_cast<size_t>(num_shards_)) hello_refused_.resize(num_shards_);
    hello_refused_[static_cast<size_t>(r.shard)] = true;
    st = Status::FailedPrecondition("server " + options_.servers[r.shard] + " (listed as shard " +
                                    std::to_string(r.shard) + ") refused to pair: " + st.message());
    if (hello_refusal_.empty()) hello_refusal_ = st.message();
  }
  if (st.ok()) {
    switch (r.expect) {
      case HELLO_REPLY:
        st = OnHelloReply(r, h.hello_reply());
        break;
      case PUSH_REPLY:
        if (r.want_values && h.num_values() > 0) {
          const float* v = reply->ValueData(&scratch_);
          if (r.dense) {
            cache_.InsertDense(r.table, r.shard, v, h.num_values(), h.min_clock(), h.push_reply().table_version());
          } else if (h.num_values() == r.keys.size() * size_t{r.dim}) {
            cache_.InsertRows(r.table, r.keys.data(), r.keys.size(), v, h.min_clock(),
                              h.push_reply().table_version());
          }
        }
        break;
      case PULL_REPLY:
        // A leaving worker's pull buffers may be gone with its model: the
        // replies still arriving are taken and dropped.
        if (!leaving_) st = OnPullReply(r, reply);
        break;
      case CLOCK_REPLY:
        if (h.clock_reply().checkpoint_clock() >= 0) due_checkpoint_clock_ = h.clock_reply().checkpoint_clock();
        if (h.clock_reply().batch_size() > 0) adaptive_batch_size_ = h.clock_reply().batch_size();
        break;
      default:
        break;
    }
  }
  if (!st.ok() && (r.expect == PUSH_REPLY || r.expect == PUSH_DELTA_REPLY)) {
    stats_.updates_failed += r.updates;
    LOG(ERROR) << channel_.log_prefix() << "push of " << r.updates << " update(s) to server " << r.shard << " ("
               << options_.servers[r.shard] << "), table " << options_.tables[r.table].name()
               << " refused: " << st.message();
  }
  Release(tag);
  return st;
}

Status WorkerClient::OnHelloReply(const ShardRequest& r, const HelloReplyBody& h) {
  Status st;
  if (h.shard() != r.shard || h.job_id() != options_.job_id) {
    st = Status::FailedPrecondition("server " + options_.servers[r.shard] + " is shard " + std::to_string(h.shard()) +
                                    " of job '" + h.job_id() + "' but is listed as shard " + std::to_string(r.shard) +
                                    " of job '" + options_.job_id + "' in --server_addresses");
  }
  channel_.set_clock(std::max(channel_.clock(), h.start_clock()));
  if (h.has_rejoin_clock()) rejoin_clock_ = std::max(rejoin_clock_, h.rejoin_clock());
  if (r.shard == 0) rejoin_samples_ = h.rejoin_samples();
  key_lists_[r.shard] = KeyListCache(options_.key_lists ? h.key_list_cache_bytes() : 0);
  // A replicated shard: where to send when its primary is gone.
  if (st.ok() && h.chain_endpoints_size() > 0)
    st = channel_.SetChain(r.shard, {h.chain_endpoints().begin(), h.chain_endpoints().end()});
  return st;
}

char* WorkerClient::PullDestination(uint64_t tag, const MessageHeader& h, uint64_t bytes) {
  if ((tag & kControlTag) != 0) return nullptr;
  const ShardRequest& r = requests_[tag];
  if (r.expect != PULL_REPLY) return nullptr;
  uint64_t at = 0, floats = 0;
  if (r.dense) {
    const auto [b, e] = DenseRange(options_.tables[r.table].size(), r.shard, num_shards_);
    at = r.dense_begin;
    floats = e - b;
  } else if (r.identity) {
    at = uint64_t{r.first_position} * r.dim;
    floats = uint64_t{r.num_rows} * r.dim;
  } else {
    return nullptr;
  }
  if (h.num_values() != floats || bytes != floats * sizeof(float)) return nullptr;
  return reinterpret_cast<char*>(r.out + at);
}

Status WorkerClient::OnPullReply(const ShardRequest& r, Message* reply) {
  const MessageHeader& h = reply->header;
  const uint64_t version = h.pull_reply().table_version();
  cache_.NoteReadVersion(r.table, r.shard, version, r.ahead);
  // Values reach the caller's buffer in one pass, widened on the way when
  // 16-bit (the channel leaves pulls' replies in their wire encoding); the
  // size checks come first, so a bad reply writes nothing.
  if (r.dense) {
    // The reply must fill exactly this shard's slice: fewer floats would
    // leave stale values, more would write past the caller's buffer.
    const auto [b, e] = DenseRange(options_.tables[r.table].size(), r.shard, num_shards_);
    if (h.num_values() != e - b) {
      return Status::DataLoss("server " + std::to_string(r.shard) + " returned " + std::to_string(h.num_values()) +
                              " floats of dense table " + options_.tables[r.table].name() + " for a slice of " +
                              std::to_string(e - b));
    }
    float* const slice = r.out + r.dense_begin;
    if (reply->placed_values_bytes == 0) ReadValuesInto(*reply, slice);  // else there already (PullDestination)
    cache_.InsertDense(r.table, r.shard, slice, h.num_values(), h.min_clock(), version);
    return Status::OK();
  }
  if (h.num_values() != r.num_rows * r.dim) {
    return Status::DataLoss("server " + std::to_string(r.shard) + " returned " + std::to_string(h.num_values()) +
                            " floats for " + std::to_string(r.num_rows) + " rows of dim " + std::to_string(r.dim));
  }
  if (r.identity) {
    float* const rows = r.out + size_t{r.first_position} * r.dim;
    if (reply->placed_values_bytes == 0) ReadValuesInto(*reply, rows);
    if (!r.keys.empty()) cache_.InsertRows(r.table, r.keys.data(), r.keys.size(), rows, h.min_clock(), version);
  } else if (r.keys.empty()) {
    ScatterValueRows(*reply, r.positions.data(), r.num_rows, r.dim, r.out);
  } else {
    // The cache keeps the rows in reply order: widened once, then both.
    WidenValues(reply, &channel_.frame_pool());
    const float* v = reply->ValueData(&scratch_);
    ScatterValueRows(*reply, r.positions.data(), r.num_rows, r.dim, r.out);
    cache_.InsertRows(r.table, r.keys.data(), r.keys.size(), v, h.min_clock(), version);
  }
  return Status::OK();
}

Status WorkerClient::WaitAll() { return channel_.WaitAll(); }

void WorkerClient::AttachReplica(std::unique_ptr<LocalReplica> replica) {
  owned_replica_ = std::move(replica);
  replica_ = owned_replica_.get();
}

Status WorkerClient::Clock(bool want_checkpoint) {
  // AVERAGE: the round's deltas go first (sent at this round's clock), and
  // the CLOCK that ends the round carries the replica's update count.
  uint64_t average_updates = 0;
  if (replica_ != nullptr) average_updates = replica_->EndPeriod();
  channel_.set_clock(channel_.clock() + 1);
  // Shard 0 answers; the others only count the clock.
  RequestHandle previous = clock_reply_;
  clock_reply_ = channel_.NewRequest(/*sticky=*/true);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(CLOCK);
    if (replica_ != nullptr) m.header.mutable_clock_report()->set_average_updates(average_updates);
    if (s == 0) {
      m.header.mutable_clock_report()->set_samples(samples_trained_);
      if (want_checkpoint) m.header.mutable_clock_report()->set_want_checkpoint(true);
      if (adaptive_report_) {
        *m.header.mutable_clock_report()->mutable_adaptive_batch() = *adaptive_report_;
        adaptive_report_.reset();
      }
      SendPart(0, &m, clock_reply_, NewShardRequest(CLOCK_REPLY, 0, 0));
    } else {
      (void)channel_.Send(s, &m, nullptr, MSG_UNKNOWN, 0);  // a failure is sticky
    }
  }
  // The answer to the previous clock's CLOCK: a checkpoint clock shard 0
  // picked is known before this worker can pass it.
  if (!previous.empty()) TETHER_RETURN_IF_ERROR(previous.Wait());
  return channel_.sticky_error();
}

Status WorkerClient::ParkClock(bool parked) {
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(CLOCK);
    m.header.mutable_clock_report()->set_parked(parked);
    (void)channel_.Send(s, &m, nullptr, MSG_UNKNOWN, 0);  // a failure is sticky
  }
  return channel_.sticky_error();
}

void WorkerClient::CheckpointTaken() {
  cache_.Clear();
  if (due_checkpoint_clock_ <= channel_.clock()) due_checkpoint_clock_ = -1;
}

void WorkerClient::BeginLeaving(int bound_ms) {
  leaving_ = true;
  channel_.BeginLeaving(bound_ms);
}

Status WorkerClient::Idle(int ms) { return channel_.Idle(ms); }

const ClientStats& WorkerClient::stats() const {
  const RequestChannel::Stats& c = channel_.stats();
  stats_.bytes_sent = c.bytes_sent;
  stats_.bytes_received = c.bytes_received;
  stats_.bytes_placed = c.bytes_placed;
  stats_.send_waits = c.send_waits;
  stats_.failovers = c.failovers;
  stats_.wait_seconds = c.wait_seconds + own_wait_seconds_;
  stats_.cache_evictions = cache_.stats().evictions;
  stats_.cache_bytes = cache_.bytes();
  stats_.cache_peak_bytes = cache_.stats().peak_bytes;
  stats_.cache_capacity_bytes = cache_.capacity_bytes();
  stats_.wire = c.wire.tables();
  const PushEncoder::Stats e = push_encoder_.stats();
  stats_.push_values_saturated = e.saturated;
  stats_.reply_values_saturated = c.wire.received_saturated();
  stats_.residual_rows = e.residual_rows;
  stats_.residual_evicted = e.residual_evicted;
  stats_.residual_evicted_l1 = e.residual_evicted_l1;
  return stats_;
}

}  // namespace tether
