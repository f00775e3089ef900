// KeyListCache: key lists a worker has sent to one shard, remembered on both
// ends so that a request whose keys repeat (a push after the pull of the
// same minibatch, or a benchmark's fixed request) names the list instead of
// carrying its keys, and the shard reuses the rows it looked up the first
// time (ps-lite's key-list caching, Li et al., OSDI 2014, §3.5).
//
// Protocol (MessageHeader.key_list, proto/wire.proto). A list is named by
// (table, id), id ≠ 0 chosen by the worker: KeyListProbe(keys), a hash of
// the count and 64 of the keys (two loads per cache line of a 10⁶-key list
// instead of a pass over all of it), or, when the worker holds another
// list under that probe, KeyListSignature(keys), a hash of every key, with
// the top bit set. The shard takes ids as opaque names.
//  - Define: a PULL or PUSH carries its keys and key_list = id. The shard
//    checks the keys as any request's, looks them up (creating rows as a
//    pull or push does) and keeps their row offsets under (table, id).
//  - Use: a PULL or PUSH with key_list = id, num_keys = n and an empty keys
//    frame. The shard serves it from the kept offsets (no keys on the wire,
//    no checks or lookups: the keys were checked when defined, and a row
//    never moves while its shard lives, server/table.h). A list it does not
//    hold (evicted, a restarted shard, a lost define) or whose count is not
//    n is answered ERROR_REPLY with key_list_unknown set; the worker then
//    sends the same request again with its keys (WorkerClient), so the
//    user never sees the miss.
// Both ends keep one KeyListCache per (worker, shard) pair with the same
// capacity (the shard's, from HELLO_REPLY.key_list_cache_bytes) and apply
// the same Put/Find sequence (a shard handles one worker's messages in
// arrival order), so the worker's copy mirrors exactly which lists the
// shard holds and a miss happens only after a shard restart or a refused
// define. The worker's copy keeps the keys themselves and compares them
// before it names a list, so two lists with the same signature are never
// confused (the colliding one is sent with its keys and without an id).
//
// Memory bound: a list of n keys is charged Charge(n) = 8·n + 64 bytes (its
// n uint64 values, keys on the worker or row offsets on the shard, plus the
// entry); entries are evicted least recently used first so that bytes()
// stays ≤ capacity_bytes(); a list larger than the capacity is not kept.
// Capacity 0: nothing is kept. A shard's budget (tether-server
// --key_list_cache_bytes) is split evenly over the job's workers, so it
// holds at most that much in all; each worker holds its share per shard.
//
// Ownership and thread-safety: lists are shared, immutable vectors (a
// deferred pull keeps its list alive after an eviction). Not thread-safe:
// one owner thread (the shard's loop, the worker's thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace tether {

/// Default bytes of key lists one shard keeps, over all its workers (each
/// gets an even share): 64 MiB, eight lists of 10⁶ keys for one worker.
inline constexpr uint64_t kDefaultKeyListCacheBytes = uint64_t{64} << 20;
/// Requests with fewer keys are sent with their keys and no list id: below
/// this the lookups cost less than the bookkeeping.
inline constexpr uint64_t kMinKeyListKeys = 256;

/// The signature of n keys: a 64-bit hash of the keys and n; never 0.
uint64_t KeyListSignature(const uint64_t* keys, size_t n);
/// The probe of n keys: a hash of n and of the keys at kKeyListProbes
/// evenly spaced positions (the first and the last among them; all of them
/// when n ≤ kKeyListProbes), in [1, 2⁶³): top bit clear. Lists that differ
/// only between those positions share it, so a worker compares a list with
/// the one held under its probe before naming it (WorkerClient).
inline constexpr size_t kKeyListProbes = 64;
uint64_t KeyListProbe(const uint64_t* keys, size_t n);

class KeyListCache {
 public:
  using List = std::shared_ptr<const std::vector<uint64_t>>;
  static constexpr uint64_t kEntryBytes = 64;
  /// The bytes a list of n values is charged.
  static constexpr uint64_t Charge(uint64_t n) { return n * sizeof(uint64_t) + kEntryBytes; }

  struct Stats {
    uint64_t puts = 0;       // lists stored (defines)
    uint64_t hits = 0;       // Find that returned a list
    uint64_t misses = 0;     // Find that returned none
    uint64_t evictions = 0;  // lists dropped for room
    uint64_t peak_bytes = 0;
  };

  explicit KeyListCache(uint64_t capacity_bytes = 0) : capacity_(capacity_bytes) {}
  KeyListCache(const KeyListCache&) = delete;
  KeyListCache& operator=(const KeyListCache&) = delete;
  KeyListCache(KeyListCache&&) = default;  // std::list keeps its iterators valid
  KeyListCache& operator=(KeyListCache&&) = default;

  /// Stores `list` (non-null) as (table, id), replacing one there, as the
  /// most recently used; evicts the least recently used lists until
  /// bytes() ≤ capacity_bytes(). Returns false (nothing stored, and a list
  /// held under (table, id) is dropped) when the list alone is larger than
  /// the capacity.
  bool Put(uint32_t table, uint64_t id, List list);
  /// The list (table, id), made the most recently used; null when absent.
  List Find(uint32_t table, uint64_t id);
  /// The list (table, id) or null, leaving the order and the counters as
  /// they are (the worker compares a list before it names it: a signature
  /// collision must not reorder its mirror).
  List Peek(uint32_t table, uint64_t id) const;
  /// Drops (table, id) if held.
  void Erase(uint32_t table, uint64_t id);
  void Clear();

  /// Calls fn(table, id, list) for every list, least recently used first
  /// (Put in that order into a cache of the same capacity rebuilds it).
  template <typename Fn>
  void ForEachLeastRecentFirst(Fn&& fn) const {
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) fn(it->table, it->id, it->list);
  }
  /// Sets the counters (a copy rebuilt with Put takes its original's).
  void RestoreStats(const Stats& stats) { stats_ = stats; }

  uint64_t capacity_bytes() const { return capacity_; }
  uint64_t bytes() const { return bytes_; }
  size_t size() const { return lru_.size(); }
  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    uint32_t table;
    uint64_t id;
    List list;
  };
  // (table, id). An ordered index: a cache holds few lists (each is large),
  // and a pair needs no hash or equality of its own.
  using Key = std::pair<uint32_t, uint64_t>;
  using Index = std::map<Key, std::list<Entry>::iterator>;
  void Drop(Index::iterator it);

  uint64_t capacity_;
  uint64_t bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  Index index_;
  Stats stats_;
};

}  // namespace tether
