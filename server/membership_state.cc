// Membership's state copy (Membership::SaveState / RestoreState,
// proto/shard_state.proto MembershipState): what a joining replica is sent
// of the shard's workers.
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "proto/shard_state.pb.h"
#include "server/membership.h"
#include "server/shard_input.h"

namespace tether {
namespace {

using TimePoint = std::chrono::steady_clock::time_point;

// The longest identity a ROUTER socket gives a peer (ZeroMQ: 255 bytes).
constexpr size_t kMaxIdentityBytes = 255;
// The oldest time a state may name (now − age stays far inside int64 ns).
constexpr int64_t kMaxAgeNs = int64_t{100} * 365 * 24 * 3600 * 1000000000;

int64_t AgeNs(TimePoint t, TimePoint now) {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - t).count();
  return ns > 0 ? ns : 0;
}

Status CheckAge(int64_t age_ns, const std::string& field) {
  if (age_ns < 0 || age_ns > kMaxAgeNs)
    return Status::DataLoss(field + ": " + std::to_string(age_ns) + " ns, not in [0, 100 years]");
  return Status::OK();
}

TimePoint FromAge(int64_t age_ns, TimePoint now) {
  return now - std::chrono::duration_cast<TimePoint::duration>(std::chrono::nanoseconds(age_ns));
}

Status CheckIdentity(const std::string& identity, const std::string& field) {
  if (identity.size() > kMaxIdentityBytes)
    return Status::DataLoss(field + ": " + std::to_string(identity.size()) + " bytes, a connection's is at most " +
                            std::to_string(kMaxIdentityBytes));
  return Status::OK();
}

void SaveWorker(const Membership::Worker& w, TimePoint now, MembershipState::Worker* out) {
  out->set_said_hello(w.said_hello);
  out->set_at_barrier(w.at_barrier);
  out->set_said_bye(w.said_bye);
  out->set_dead(w.dead);
  out->set_removed_why(w.removed_why);
  out->set_finished(w.finished);
  out->set_data_done(w.data_done);
  out->set_samples(w.samples);
  out->set_barrier_request(w.barrier_request);
  out->set_joined_clock(w.joined_clock);
  out->set_identity(w.identity);
  *out->mutable_stats() = w.stats;
  if (w.last_seen != TimePoint()) out->set_last_seen_age_ns(AgeNs(w.last_seen, now));
}

Status RestoreWorker(const MembershipState::Worker& in, TimePoint now, const std::string& field,
                     Membership::Worker* w) {
  TETHER_RETURN_IF_ERROR(CheckIdentity(in.identity(), field + "identity"));
  if (in.joined_clock() < -1)
    return Status::DataLoss(field + "joined_clock: " + std::to_string(in.joined_clock()) + " (≥ -1)");
  if (in.has_last_seen_age_ns()) TETHER_RETURN_IF_ERROR(CheckAge(in.last_seen_age_ns(), field + "last_seen_age_ns"));
  w->said_hello = in.said_hello();
  w->at_barrier = in.at_barrier();
  w->said_bye = in.said_bye();
  w->dead = in.dead();
  w->removed_why = in.removed_why();
  w->finished = in.finished();
  w->data_done = in.data_done();
  w->samples = in.samples();
  w->barrier_request = in.barrier_request();
  w->joined_clock = in.joined_clock();
  w->identity = in.identity();
  w->stats = in.stats();
  w->last_seen = in.has_last_seen_age_ns() ? FromAge(in.last_seen_age_ns(), now) : TimePoint();
  return Status::OK();
}

}  // namespace

void Membership::SaveState(MembershipState* state, TimePoint now) const {
  state->Clear();
  for (const Worker& w : workers_) SaveWorker(w, now, state->add_workers());
  for (const auto& [rank, p] : waiting_) state->add_waiting(EncodeShardInput(p.identity, p.hello));
  for (const HeldBye& b : held_byes_) {
    MembershipState::HeldBye* out = state->add_held_byes();
    out->set_identity(b.identity);
    out->set_request_id(b.request_id);
    out->set_rank(b.rank);
  }
  if (data_on_demand_.has_value()) state->set_data_on_demand(*data_on_demand_);
  if (epochs_.has_value()) state->set_epochs(*epochs_);
  for (const auto& [field, digest] : data_digests_) {
    DataDigest* d = state->add_data_digests();
    d->set_field(field);
    d->set_digest(digest);
  }
  if (first_hello_.has_value()) state->set_first_hello_age_ns(AgeNs(*first_hello_, now));
  state->set_first_hello_done(first_hello_done_);
  for (const auto& [rank, why] : refusals_) {
    MembershipState::Refusal* out = state->add_refusals();
    out->set_rank(rank);
    out->set_why(why);
    if (settings_refusals_.count(rank) != 0) out->set_for_settings(true);
  }
}

Status Membership::RestoreState(const MembershipState& state, TimePoint now) {
  TETHER_RETURN_IF_ERROR(RestoreWorkers(state, now));
  TETHER_RETURN_IF_ERROR(RestoreWaiting(state));
  return RestoreHeld(state, now);
}

Status Membership::RestoreWorkers(const MembershipState& state, TimePoint now) {
  const std::string at = "shard state: members.";
  const int n = state.workers_size();
  const int most = std::max(options_.initial_workers, options_.max_workers);
  if (n < options_.initial_workers || n > most)
    return Status::DataLoss(at + "workers: " + std::to_string(n) + " slots, this job's shard holds " +
                            std::to_string(options_.initial_workers) + " to " + std::to_string(most) +
                            " (cluster.num_workers to cluster.max_workers)");
  if (clocks_->num_workers() > n)
    return Status::DataLoss(at + "workers: " + std::to_string(n) + " slots, fewer than the clocks' " +
                            std::to_string(clocks_->num_workers()));
  std::vector<Worker> workers(n);
  for (int r = 0; r < n; ++r)
    TETHER_RETURN_IF_ERROR(
        RestoreWorker(state.workers(r), now, at + "workers[" + std::to_string(r) + "].", &workers[r]));
  workers_ = std::move(workers);
  return Status::OK();
}

Status Membership::RestoreWaiting(const MembershipState& state) {
  waiting_.clear();
  int last = 0;  // worker 0's HELLO never waits
  for (int i = 0; i < state.waiting_size(); ++i) {
    const std::string field = "shard state: members.waiting[" + std::to_string(i) + "]";
    ShardInput in;
    Status st = DecodeShardInput(state.waiting(i), "the primary", &in);
    if (!st.ok()) return Status::DataLoss(field + ": " + st.message());
    const MessageHeader& h = in.message.header;
    if (h.type() != HELLO) return Status::DataLoss(field + ": a " + TypeName(h.type()) + ", not a HELLO");
    const int rank = h.sender_rank();
    if (rank <= last || rank >= slots())
      return Status::DataLoss(field + ": worker " + std::to_string(rank) + "'s HELLO, not a rank in (" +
                              std::to_string(last) + ", " + std::to_string(slots()) +
                              ") (rank order, worker 0's never waits)");
    last = rank;
    waiting_[rank] = {std::move(in.identity), std::move(in.message)};
  }
  return Status::OK();
}

Status Membership::RestoreHeld(const MembershipState& state, TimePoint now) {
  const std::string at = "shard state: members.";
  held_byes_.clear();
  for (int i = 0; i < state.held_byes_size(); ++i) {
    const MembershipState::HeldBye& b = state.held_byes(i);
    const std::string field = at + "held_byes[" + std::to_string(i) + "].";
    TETHER_RETURN_IF_ERROR(CheckIdentity(b.identity(), field + "identity"));
    if (b.rank() < 0 || b.rank() >= slots())
      return Status::DataLoss(field + "rank: " + std::to_string(b.rank()) + ", not in [0, " +
                              std::to_string(slots()) + ")");
    held_byes_.push_back({b.identity(), b.request_id(), b.rank()});
  }
  data_on_demand_.reset();
  if (state.has_data_on_demand()) data_on_demand_ = state.data_on_demand();
  epochs_.reset();
  if (state.has_epochs()) epochs_ = state.epochs();
  data_digests_.clear();
  for (const DataDigest& d : state.data_digests()) data_digests_.push_back({d.field(), d.digest()});
  first_hello_.reset();
  if (state.has_first_hello_age_ns()) {
    TETHER_RETURN_IF_ERROR(CheckAge(state.first_hello_age_ns(), at + "first_hello_age_ns"));
    first_hello_ = FromAge(state.first_hello_age_ns(), now);
  }
  first_hello_done_ = state.first_hello_done();
  refusals_.clear();
  settings_refusals_.clear();
  int last = -1;
  for (int i = 0; i < state.refusals_size(); ++i) {
    const MembershipState::Refusal& r = state.refusals(i);
    if (r.rank() <= last || r.rank() >= options_.initial_workers)
      return Status::DataLoss(at + "refusals[" + std::to_string(i) + "].rank: " + std::to_string(r.rank()) +
                              ", not an initial rank in (" + std::to_string(last) + ", " +
                              std::to_string(options_.initial_workers) + ") (rank order)");
    last = r.rank();
    refusals_[r.rank()] = r.why();
    if (r.for_settings()) settings_refusals_.insert(r.rank());
  }
  return Status::OK();
}

}  // namespace tether
