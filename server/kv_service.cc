#include "server/kv_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "core/net/value_frames.h"
#include "core/partition.h"
#include "core/wire_codec.h"
#include "core/wire_limits.h"
#include "optim/schedule.h"

namespace tether {

KvService::KvService(int shard, int num_shards, const ClockTracker* clocks, ServerStats* stats, Outbox* outbox)
    : shard_(shard), num_shards_(num_shards), clocks_(clocks), stats_(stats), outbox_(outbox) {}

void KvService::DefineTables(const google::protobuf::RepeatedPtrField<TableSpec>& specs) {
  job_tables_ = specs;
  // AVERAGE (ValidateJobConfig makes it job-wide): the tables take merged
  // deltas as they are (SUM, no optimizer state here: the job's optimizer
  // runs on the workers' replicas), and the averager merges the rounds.
  const bool average = !specs.empty() && specs[0].consistency().model() == AVERAGE;
  for (const TableSpec& spec : specs) {
    uint64_t begin = 0, end = 0;
    if (IsDenseTable(spec)) std::tie(begin, end) = DenseRange(spec.size(), shard_, num_shards_);
    if (!average) {
      tables_.push_back(std::make_unique<ServerTable>(spec, begin, end));
      continue;
    }
    TableSpec merged = spec;
    merged.mutable_optimizer()->Clear();
    merged.mutable_optimizer()->set_type(SUM);
    tables_.push_back(std::make_unique<ServerTable>(merged, begin, end));
  }
  if (average) {
    averager_ = std::make_unique<ModelAverager>(specs[0].consistency().model_momentum());
    LOG(INFO) << outbox_->log_prefix() << "consistency AVERAGE: merging the workers' deltas per round, model momentum "
              << specs[0].consistency().model_momentum();
  }
  LOG(INFO) << outbox_->log_prefix() << "tables from worker 0: " << DescribeTables(specs);
  for (const auto& t : tables_)
    if (t->delay_compensated())
      LOG(INFO) << outbox_->log_prefix() << "table " << t->spec().name() << ": delay compensation λ "
                << t->spec().optimizer().delay_compensation() << ", the reads of " << t->spec().backup_workers()
                << " worker rank(s) kept (" << DelayBackupFloats(t->spec(), 1) * sizeof(float)
                << " bytes per weight)";
}

void KvService::Refuse(const std::string& identity, const MessageHeader& h, const std::string& what) {
  ++stats_->bad_messages;
  LOG(ERROR) << outbox_->log_prefix() << what;
  outbox_->SendError(identity, h, what);
}

void KvService::Pull(const std::string& identity, Message* m) {
  const MessageHeader& h = m->header;
  KeyListCache::List offsets;
  if (!ResolveKeyList(identity, *m, &offsets)) return;
  ++stats_->pulls;
  if (clocks_->PullReady(h.clock(), tables_[h.table_id()]->staleness())) {
    ServePull(identity, *m, offsets.get());
    return;
  }
  ++stats_->deferred_pulls;
  VLOG(2) << outbox_->log_prefix() << "pull from worker " << h.sender_rank() << " at clock " << h.clock()
          << " waits: min_clock " << clocks_->min_clock();
  parked_.push_back({identity, std::move(*m), std::chrono::steady_clock::now(), std::move(offsets)});
}

void KvService::Push(const std::string& identity, const Message& m) {
  KeyListCache::List offsets;
  if (!ResolveKeyList(identity, m, &offsets)) return;
  ApplyPush(identity, m, offsets.get());
}

bool KvService::ResolveKeyList(const std::string& identity, const Message& m, KeyListCache::List* offsets) {
  const MessageHeader& h = m.header;
  if (h.key_list() == 0) return true;
  ServerTable& t = *tables_[h.table_id()];  // checked: a known table
  const bool omitted = m.keys.size() == 0;  // checked: a dense table has num_keys 0
  const uint64_t n = h.num_keys();
  if (!IsRowTable(t.spec()) || n == 0) return true;
  if (h.pull().absent_as_zeros()) {
    if (!omitted) return true;  // served as a plain absent-as-zeros pull
    ++stats_->bad_messages;
    outbox_->SendError(identity, h, "PULL from worker " + std::to_string(h.sender_rank()) +
                                        ": an absent_as_zeros pull must carry its keys, not name key list " +
                                        std::to_string(h.key_list()));
    return false;
  }
  auto lists = key_lists_.find(h.sender_rank());  // checked: the rank said HELLO
  if (!omitted) {
    // Define: kept when it fits; otherwise served as a plain request (the
    // worker's mirror, of the same capacity, does not keep it either).
    // A budgeted table's rows move (eviction) or are not made (admission):
    // its requests are served plain.
    if (lists == key_lists_.end() || KeyListCache::Charge(n) > lists->second.capacity_bytes() || t.budgeted())
      return true;
    auto list = std::make_shared<std::vector<uint64_t>>();
    const Status st = t.ResolveRows(m.KeyData(&key_scratch_), n, list.get());
    if (!st.ok()) {
      Refuse(identity, h, TypeName(h.type()) + " from worker " + std::to_string(h.sender_rank()) + ": " + st.message());
      return false;
    }
    (void)lists->second.Put(h.table_id(), h.key_list(), list);
    ++key_list_stats_.defined;
    *offsets = std::move(list);
    return true;
  }
  KeyListCache::List list = lists == key_lists_.end() ? nullptr : lists->second.Find(h.table_id(), h.key_list());
  if (list != nullptr && list->size() == n) {
    DCHECK(t.ValidOffsets(list->data(), n));  // rows never move (server/table.h)
    ++key_list_stats_.used;
    key_list_stats_.bytes_saved += n * sizeof(uint64_t);
    *offsets = std::move(list);
    return true;
  }
  // Not kept here (evicted, this shard restarted, or its define failed):
  // the worker sends the request again with its keys. No bad message.
  ++key_list_stats_.unknown;
  VLOG(1) << outbox_->log_prefix() << "worker " << h.sender_rank() << " named key list " << h.key_list()
          << " of table " << t.spec().name() << " (" << n << " keys), which this shard does not hold";
  Message reply;
  reply.header.set_type(ERROR_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.mutable_error_reply()->set_key_list_unknown(true);
  reply.header.mutable_error_reply()->set_error(outbox_->log_prefix() + TypeName(h.type()) + " names key list " +
                         std::to_string(h.key_list()) + " of table " + t.spec().name() + " (" + std::to_string(n) +
                         " keys), which server " + std::to_string(shard_) + " does not hold; send the keys");
  outbox_->Send(identity, &reply, h.sender_rank());
  return false;
}

void KvService::ServePull(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets) {
  const MessageHeader& h = m.header;
  ServerTable& t = *tables_[h.table_id()];
  Message reply;
  reply.header.set_type(PULL_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.set_min_clock(clocks_->settled_clock());
  reply.header.mutable_pull_reply()->set_table_version(t.version());
  t.set_clock(h.clock());
  const int64_t s = t.staleness();
  if (s >= 0 && clocks_->min_clock() < h.clock() - s) ++stats_->bound_violations;  // invariant check
  Status filled;
  if (IsRowTable(t.spec()) && h.pull().absent_as_zeros()) {
    FillValuesIfPresent(t, m.KeyData(&key_scratch_), h.num_keys(), &reply);
  } else {
    const uint64_t* keys = IsDenseTable(t.spec()) || offsets != nullptr ? nullptr : m.KeyData(&key_scratch_);
    bool while_sent = false;
    filled = FillWhileSent(t, keys, h.num_keys(), offsets, &reply, &while_sent);
    if (filled.ok() && !while_sent) filled = FillValues(t, keys, h.num_keys(), &reply, offsets);
  }
  if (!filled.ok()) {
    Refuse(identity, h, "PULL from worker " + std::to_string(h.sender_rank()) + ": " + filled.message());
    return;
  }
  if (IsRowTable(t.spec())) stats_->rows_pulled += h.num_keys();
  // Delay compensation: what this worker now reads. Zeros for absent rows
  // (evaluation of a hashed model) are not cached by the worker: not kept.
  if (t.delay_compensated() && !h.pull().absent_as_zeros())
    NoteSent(t, h.sender_rank(), IsDenseTable(t.spec()) || offsets != nullptr ? nullptr : m.KeyData(&key_scratch_),
             h.num_keys(), offsets);
  outbox_->Send(identity, &reply, h.sender_rank());
}

Status KvService::FillWhileSent(ServerTable& t, const uint64_t* keys, uint64_t n, const std::vector<uint64_t>* offsets,
                                Message* reply, bool* deferred) {
  *deferred = false;
  const bool dense = IsDenseTable(t.spec());
  // A budgeted table's pull touches its rows (eviction order); a delay-
  // compensated one notes the rows read: both are filled at once.
  if (IsHalfWire(t.spec().pull_wire()) || t.delay_compensated() || (!dense && t.budgeted())) return Status::OK();
  const uint32_t dim = dense ? 1 : t.spec().dim();
  const uint64_t count = dense ? t.dense_end() - t.dense_begin() : n * dim;
  const uint64_t bytes = count * sizeof(float);
  if (bytes <= kReplyChunkBytes || !outbox_->WritesValuesWhileSending(bytes)) return Status::OK();
  // The lookups (they may fail, and they create rows) are made now; only
  // the copy waits for the send.
  const uint64_t* at = offsets != nullptr ? offsets->data() : nullptr;
  if (!dense && at == nullptr) TETHER_RETURN_IF_ERROR(t.LookUpRows(keys, n, &at));
  reply->values = reply_pool_.Take(bytes);
  float* out = static_cast<float*>(reply->values.data());
  if (dense) {
    const ServerTable* table = &t;
    reply->write_values = [table, out, count, done = uint64_t{0}](size_t end) mutable {
      const uint64_t through = std::min<uint64_t>(count, (end + sizeof(float) - 1) / sizeof(float));
      if (through > done) std::memcpy(out + done, table->dense_values() + done, (through - done) * sizeof(float));
      done = std::max(done, through);
    };
    reply->header.set_num_values(count);
  } else {
    // `at` (the key list's, held by the caller, or the table's own lookup
    // scratch) stays valid: the reply is sent inside this pull's
    // Outbox::Send, with no other request served in between.
    const size_t row_bytes = size_t{dim} * sizeof(float);
    const ServerTable* table = &t;
    reply->write_values = [table, at, out, n, dim, row_bytes, done = uint64_t{0}](size_t end) mutable {
      const uint64_t through = std::min<uint64_t>(n, (end + row_bytes - 1) / row_bytes);
      if (through > done) table->PullRowsAt(at + done, through - done, out + done * dim);
      done = std::max(done, through);
    };
    reply->header.set_value_dim(dim);
    reply->header.set_num_values(count);
  }
  *deferred = true;
  return Status::OK();
}

void KvService::NoteSent(ServerTable& t, int rank, const uint64_t* keys, uint64_t n,
                         const std::vector<uint64_t>* offsets) {
  if (IsDenseTable(t.spec())) {
    t.NoteDenseRead(rank);
  } else if (offsets != nullptr) {
    t.NoteReadAt(rank, offsets->data(), n);
  } else {
    t.NoteRead(rank, keys, n);
  }
}

Status KvService::FillValues(ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply,
                             const std::vector<uint64_t>* offsets) {
  if (IsDenseTable(t.spec())) {
    const uint64_t size = t.dense_end() - t.dense_begin();
    reply->header.set_num_values(size);
    if (IsHalfWire(t.spec().pull_wire())) {
      NarrowDense(t, reply);
    } else {
      t.PullDense(ValuesOut(t, size, reply));
    }
    return Status::OK();
  }
  const uint32_t dim = t.spec().dim();
  if (IsHalfWire(t.spec().pull_wire()) && dim >= kMinNarrowedRowFloats && !t.budgeted()) {
    const uint64_t* at = offsets != nullptr ? offsets->data() : nullptr;
    if (at == nullptr) TETHER_RETURN_IF_ERROR(t.LookUpRows(keys, n, &at));
    NarrowRows(t, at, n, reply);
    return Status::OK();
  }
  float* out = ValuesOut(t, n * dim, reply);
  if (offsets != nullptr) {
    t.PullRowsAt(offsets->data(), n, out);
  } else {
    TETHER_RETURN_IF_ERROR(t.PullRows(keys, n, out));
  }
  reply->header.set_value_dim(dim);
  reply->header.set_num_values(n * dim);
  NarrowReply(t, reply);
  return Status::OK();
}

void KvService::FillValuesIfPresent(const ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply) {
  const uint32_t dim = t.spec().dim();
  t.PullRowsIfPresent(keys, n, ValuesOut(t, n * dim, reply));
  reply->header.set_value_dim(dim);
  reply->header.set_num_values(n * dim);
  NarrowReply(t, reply);
}

float* KvService::ValuesOut(const ServerTable& t, uint64_t n, Message* reply) {
  if (IsHalfWire(t.spec().pull_wire())) {
    // Gathered into a buffer that stays in cache, then narrowed into the frame.
    if (pull_scratch_.size() < n) pull_scratch_.resize(n);
    return pull_scratch_.data();
  }
  reply->values = reply_pool_.Take(n * sizeof(float));
  return static_cast<float*>(reply->values.data());
}

void KvService::NarrowReply(const ServerTable& t, Message* reply) {
  const WireEncoding e = t.spec().pull_wire();
  if (!IsHalfWire(e)) return;
  uint64_t saturated = 0;  // FP16: weights beyond ±65504 reach the worker as ±65504
  reply->values = NarrowFrame(pull_scratch_.data(), reply->header.num_values(), 1.0f, e, nullptr, &reply_pool_,
                              &saturated);
  reply->header.set_value_encoding(e);
  SetSaturated(saturated, reply);
}

void KvService::SetSaturated(uint64_t saturated, Message* reply) {
  // The worker counts them (WorkerStats.wire_saturated_received): a value
  // clamped on its way is a weight the worker did not read.
  if (saturated > 0) reply->header.set_values_saturated(saturated);
}

void KvService::NarrowRows(const ServerTable& t, const uint64_t* offsets, uint64_t n, Message* reply) {
  const WireEncoding e = t.spec().pull_wire();
  const uint32_t dim = t.spec().dim();
  const size_t row_bytes = size_t{dim} * WireBytesPerValue(e);
  reply->values = reply_pool_.Take(n * row_bytes);
  auto* out = static_cast<unsigned char*>(reply->values.data());
  // Narrowed from the table into the frame, each run of rows in one call:
  // the values are read once and written once, at half their width.
  uint64_t saturated = 0;
  t.ForEachRowRun(offsets, n, [&](uint64_t i, const float* src, uint64_t rows) {
    saturated += EncodeValues(src, rows * dim, 1.0f, e, nullptr, out + i * row_bytes);
  });
  reply->header.set_value_dim(dim);
  reply->header.set_num_values(n * dim);
  reply->header.set_value_encoding(e);
  SetSaturated(saturated, reply);
}

void KvService::NarrowDense(const ServerTable& t, Message* reply) {
  const WireEncoding e = t.spec().pull_wire();
  const uint64_t n = reply->header.num_values();
  reply->values = reply_pool_.Take(n * WireBytesPerValue(e));
  const uint64_t saturated = n > 0 ? EncodeValues(t.dense_values(), n, 1.0f, e, nullptr, reply->values.data()) : 0;
  reply->header.set_value_encoding(e);
  SetSaturated(saturated, reply);
}

void KvService::ServeReadyPulls() {
  // AVERAGE: rounds every counted worker ended are merged before any pull
  // of the next round is answered.
  MergeAverageRounds();
  // Pulls wait in arrival order; serve every one the new min_clock admits.
  for (auto it = parked_.begin(); it != parked_.end();) {
    const MessageHeader& rh = it->request.header;
    if (!clocks_->PullReady(rh.clock(), tables_[rh.table_id()]->staleness())) {
      ++it;
      continue;
    }
    // Pulls of one minibatch wait side by side: charge the worker only for
    // the longest wait since its last release, not for each table.
    const size_t rank = static_cast<size_t>(rh.sender_rank());
    if (bound_wait_.size() <= rank) bound_wait_.resize(rank + 1);
    BoundWait& w = bound_wait_[rank];
    const auto now = std::chrono::steady_clock::now();
    const auto from = std::max(it->since, w.counted_until);
    if (now > from) w.seconds += std::chrono::duration<double>(now - from).count();
    w.counted_until = now;
    ServePull(it->identity, it->request, it->offsets.get());
    it = parked_.erase(it);
  }
}

void KvService::ApplyPush(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets) {
  const MessageHeader& h = m.header;
  ++stats_->pushes;
  ServerTable& t = *tables_[h.table_id()];
  // τ: updates to this table applied since the version the gradient was
  // computed from (a version from the future means a confused peer: τ = 0).
  t.set_clock(h.clock());
  const PushBody& body = h.push();
  const uint64_t tau = body.base_version() <= t.version() ? t.version() - body.base_version() : 0;
  stats_->staleness.Add(tau);
  float lr_scale = 1.0f;
  switch (t.spec().consistency().staleness_policy()) {
    case INVERSE: lr_scale = 1.0f / static_cast<float>(std::max<uint64_t>(1, tau)); break;
    case INVERSE_PLUS_ONE: lr_scale = 1.0f / static_cast<float>(tau + 1); break;
    default: break;
  }
  // Adaptive batch sizes, step_scaling SERVER_WEIGHT: the push's batch size
  // over the job's mean (the check refused a weight that is not finite > 0).
  if (body.has_push_weight()) lr_scale *= body.push_weight();
  // The learning-rate schedule's factor at the clock the gradient was
  // computed at (optim/schedule.h; 1 without a schedule).
  lr_scale *= ScheduleFactor(t.spec().optimizer().schedule(), h.clock());
  const uint64_t* keys = nullptr;
  Status st;
  if (IsDenseTable(t.spec())) {
    st = t.PushDense(m.ValueData(&value_scratch_), lr_scale, h.sender_rank());
  } else {
    // A key list's rows: no lookups (keys, when sent, only name a row in an error).
    if (offsets == nullptr || m.keys.size() != 0) keys = m.KeyData(&key_scratch_);
    st = StepRows(t, m, keys, offsets, lr_scale);
  }
  if (!st.ok()) {
    // Nothing applied: the worker counts it as lost. A step that made a NaN
    // is the server's optimizer's doing (C22), not the worker's: its
    // gradients were finite (the check refuses others).
    Refuse(identity, h,
           st.code() == Status::Code::kFailedPrecondition
               ? st.message() + " (the gradients pushed by worker " + std::to_string(h.sender_rank()) + " were finite)"
               : "PUSH from worker " + std::to_string(h.sender_rank()) + ": " + st.message());
    return;
  }
  if (!IsDenseTable(t.spec())) stats_->rows_pushed += h.num_keys();
  stats_->updates_applied += IsDenseTable(t.spec()) ? 1 : h.num_keys();
  Message reply;
  reply.header.set_type(PUSH_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.mutable_push_reply()->set_table_version(t.version());
  reply.header.set_min_clock(clocks_->settled_clock());
  if (body.want_values()) {
    // The rows as they are now, own update included: the worker's cache
    // takes them instead of pulling again (read-my-writes).
    if (t.budgeted()) {
      // Read, not touched again (the push touched them: eviction order and
      // counts stay one touch a request); a key not admitted reads zeros.
      FillValuesIfPresent(t, keys, h.num_keys(), &reply);
    } else {
      (void)FillValues(t, keys, h.num_keys(), &reply, offsets);  // the push just created every row: cannot fail
    }
    // The worker's cache takes these values: its next gradient of these
    // rows is computed on them (delay compensation).
    if (t.delay_compensated()) NoteSent(t, h.sender_rank(), keys, h.num_keys(), offsets);
  }
  outbox_->Send(identity, &reply, h.sender_rank());
}

Status KvService::StepRows(ServerTable& t, const Message& m, const uint64_t* keys,
                           const std::vector<uint64_t>* offsets, float lr_scale) {
  const MessageHeader& h = m.header;
  const uint64_t row_bytes = uint64_t{t.spec().dim()} * sizeof(float);
  bool spans = !m.value_pieces.empty();
  for (const zmq::message_t& piece : m.value_pieces) spans = spans && piece.size() % row_bytes == 0;
  if (spans) {
    // Read where they landed (core/net/inbox.h): no joined copy.
    spans_.clear();
    for (const zmq::message_t& piece : m.value_pieces)
      spans_.push_back({static_cast<const float*>(piece.data()), piece.size() / row_bytes});
    return t.PushRowSpans(keys, offsets != nullptr ? offsets->data() : nullptr, h.num_keys(), spans_.data(),
                          spans_.size(), lr_scale, h.sender_rank());
  }
  const float* g = m.ValueData(&value_scratch_);
  if (offsets != nullptr) return t.PushRowsAt(offsets->data(), h.num_keys(), g, lr_scale, keys, h.sender_rank());
  return t.PushRows(keys, h.num_keys(), g, lr_scale, h.sender_rank());
}

void KvService::PushDelta(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const ServerTable& t = *tables_[h.table_id()];
  Status st;
  if (averager_ == nullptr) {
    st = Status::FailedPrecondition("table " + t.spec().name() +
                                    " is not trained with consistency.model AVERAGE: model deltas are refused");
  } else if (IsDenseTable(t.spec())) {
    st = averager_->AddDense(h.sender_rank(), h.clock(), h.table_id(), m.ValueData(&value_scratch_), h.num_values());
  } else {
    st = averager_->AddRows(h.sender_rank(), h.clock(), h.table_id(), m.KeyData(&key_scratch_), h.num_keys(),
                            t.spec().dim(), m.ValueData(&value_scratch_));
  }
  if (!st.ok()) {
    Refuse(identity, h, "PUSH_DELTA from worker " + std::to_string(h.sender_rank()) + ": " + st.message());
    return;
  }
  ++stats_->pushes;
  if (!IsDenseTable(t.spec())) stats_->rows_pushed += h.num_keys();
  Message reply;
  reply.header.set_type(PUSH_DELTA_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.set_min_clock(clocks_->settled_clock());
  outbox_->Send(identity, &reply, h.sender_rank());
}

void KvService::RoundEnded(int rank, int64_t clock, uint64_t updates) {
  // The CLOCK ending a round carries the sender's weight; its deltas join
  // the round before the round can close (the min clock moves after this).
  if (averager_ == nullptr) return;
  if (Status st = averager_->Complete(rank, clock - 1, updates); !st.ok())
    LOG(ERROR) << outbox_->log_prefix() << st.message();
}

void KvService::MergeAverageRounds() {
  if (averager_ == nullptr) return;
  const auto rows = [this](uint32_t table, const uint64_t* keys, uint64_t n, uint32_t, const float* step) {
    stats_->updates_applied += n;
    return tables_[table]->PushRows(keys, n, step);
  };
  const auto dense = [this](uint32_t table, const float* step, uint64_t) {
    ++stats_->updates_applied;
    return tables_[table]->PushDense(step);
  };
  // Rounds every counting worker ended, parked or not: a worker parked at
  // the validation round may be partway into a round whose delta it sends
  // after the round (ClockTracker::settled_clock).
  StatusOr<int64_t> merged = averager_->MergeThrough(clocks_->settled_clock(), rows, dense);
  if (!merged.ok()) {
    // A merged step that is not finite (SUM refuses it, C22): the job
    // cannot go on with a model that lost a round.
    fatal_ = Status::FailedPrecondition(outbox_->log_prefix() + "merging a round of model deltas: " +
                                        merged.status().message());
    LOG(ERROR) << fatal_.message();
    return;
  }
  if (*merged > 0)
    VLOG(1) << outbox_->log_prefix() << "merged " << *merged << " round(s); " << averager_->rounds_merged()
            << " so far";
}

void KvService::DropAverageDeltas(int rank, const char* why) {
  if (averager_ == nullptr) return;
  const uint64_t dropped = averager_->Drop(rank);
  if (dropped > 0)
    LOG(WARNING) << outbox_->log_prefix() << "worker " << rank << " " << why << " before ending its round: " << dropped
                 << " row(s) of its model delta discarded";
}

void KvService::WorkerJoined(int rank, bool rejoined, uint64_t key_list_bytes) {
  if (rejoined) DropAverageDeltas(rank, "rejoined");
  if (static_cast<size_t>(rank) < bound_wait_.size()) bound_wait_[rank] = BoundWait();
  key_lists_.erase(rank);  // a (re)joining worker's client starts with no lists
  key_lists_.emplace(rank, KeyListCache(key_list_bytes));
}

void KvService::WorkerLeft(int rank, const std::string& identity) {
  key_lists_.erase(rank);
  // A worker leaving early (a stop request) may leave pulls parked on the
  // bound: nobody is there to take their replies any more.
  parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                               [&](const ParkedPull& p) { return p.identity == identity; }),
                parked_.end());
  DropAverageDeltas(rank, "left");
}

void KvService::WorkerRemoved(int rank) { DropAverageDeltas(rank, "timed out"); }

int KvService::FailWaiting(const std::string& why) {
  for (const ParkedPull& p : parked_) {
    Message reply;
    reply.header.set_type(ERROR_REPLY);
    reply.header.set_request_id(p.request.header.request_id());
    reply.header.mutable_error_reply()->set_error(why);
    outbox_->Send(p.identity, &reply, p.request.header.sender_rank());
  }
  return static_cast<int>(parked_.size());
}

double KvService::bound_wait_s(int rank) const {
  return rank >= 0 && static_cast<size_t>(rank) < bound_wait_.size() ? bound_wait_[rank].seconds : 0.0;
}

const KeyListCache* KvService::key_lists(int rank) const {
  auto it = key_lists_.find(rank);
  return it == key_lists_.end() ? nullptr : &it->second;
}

void KvService::FillStats(ShardStats* s) const {
  for (const auto& t : tables_) {
    const bool rows = IsRowTable(t->spec());
    s->add_table_rows(rows ? t->num_rows() : 0);
    s->add_rows_admitted(rows ? t->rows_admitted() : 0);
    s->add_rows_evicted(rows ? t->rows_evicted() : 0);
    s->add_rows_not_admitted(rows ? t->rows_not_admitted() : 0);
    s->add_resident_bytes(t->resident_bytes());
  }
  ShardKeyListStats* kl = s->mutable_key_lists();
  kl->set_defined(key_list_stats_.defined);
  kl->set_used(key_list_stats_.used);
  kl->set_unknown(key_list_stats_.unknown);
  kl->set_bytes_saved(key_list_stats_.bytes_saved);
  if (averager_ != nullptr) {
    ShardAverageStats* av = s->mutable_average();
    av->set_rounds_merged(static_cast<uint64_t>(averager_->rounds_merged()));
    av->set_deltas_merged(averager_->deltas_merged());
    av->set_deltas_discarded(averager_->deltas_discarded());
    av->set_rows_discarded(averager_->deltas_dropped());
  }
}

void KvService::LogExit() const {
  const std::string& prefix = outbox_->log_prefix();
  std::string held;  // rows of each row table at exit (hashed models: the distinct ids trained)
  for (const auto& t : tables_)
    if (IsRowTable(t->spec())) held += (held.empty() ? "" : ", ") + t->spec().name() + " " + std::to_string(t->num_rows());
  if (!held.empty()) LOG(INFO) << prefix << "rows held at exit: " << held;
  if (key_list_stats_.defined + key_list_stats_.unknown > 0)
    VLOG(1) << prefix << "key lists: " << key_list_stats_.defined << " defined, " << key_list_stats_.used
              << " requests served from one, " << key_list_stats_.unknown << " named a list not held";
  const FramePool::Stats pool = reply_pool_.stats();
  VLOG(1) << prefix << "reply frames: " << pool.takes << " pooled, " << pool.reuses << " reused, " << pool.maps
            << " mapped, " << pool.unmaps << " unmapped, " << pool.idle_bytes / 1e6 << " MB idle";
}

}  // namespace tether
