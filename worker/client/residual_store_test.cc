// ResidualStore (worker/client/residual_store.h): rows start at zero and
// keep what is written; at capacity the least recently used row goes,
// counted with its absolute sum.
#include "worker/client/residual_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace tether {
namespace {

TEST(ResidualStoreTest, RowsStartAtZeroAndKeepTheirValues) {
  ResidualStore s(/*dim=*/3, /*capacity_rows=*/4);
  float* r = s.Row(7);
  EXPECT_EQ(r[0] + r[1] + r[2], 0.0f);
  r[0] = 0.5f;
  r[2] = -0.25f;
  s.Row(9)[1] = 2.0f;
  ASSERT_NE(s.Find(7), nullptr);
  EXPECT_EQ(s.Find(7)[0], 0.5f);
  EXPECT_EQ(s.Find(7)[2], -0.25f);
  EXPECT_EQ(s.Find(9)[1], 2.0f);
  EXPECT_EQ(s.Find(8), nullptr);
  EXPECT_EQ(s.rows(), 2u);
  EXPECT_EQ(s.evicted(), 0u);
}

TEST(ResidualStoreTest, EvictsTheLeastRecentlyUsedAndCountsIt) {
  ResidualStore s(/*dim=*/2, /*capacity_rows=*/3);
  for (uint64_t k = 1; k <= 3; ++k) s.Row(k)[0] = static_cast<float>(k);
  s.Row(1);             // 1 is now the most recent: 2 is the least
  s.Row(4)[1] = -1.0f;  // evicts 2 (|2| + |0|)
  EXPECT_EQ(s.Find(2), nullptr);
  EXPECT_EQ(s.evicted(), 1u);
  EXPECT_EQ(s.evicted_l1(), 2.0);
  ASSERT_NE(s.Find(1), nullptr);
  EXPECT_EQ(s.Find(1)[0], 1.0f);
  s.Row(5);  // evicts 3
  EXPECT_EQ(s.Find(3), nullptr);
  EXPECT_EQ(s.evicted(), 2u);
  EXPECT_EQ(s.evicted_l1(), 5.0);
  EXPECT_EQ(s.rows(), 3u);
  // A row evicted and taken again starts from zero.
  EXPECT_EQ(s.Row(2)[0], 0.0f);
  EXPECT_EQ(s.Find(4)[1], -1.0f);
}

TEST(ResidualStoreTest, CapacityOfOneRow) {
  ResidualStore s(/*dim=*/1, /*capacity_rows=*/1);
  s.Row(10)[0] = 3.0f;
  EXPECT_EQ(s.Row(10)[0], 3.0f);
  s.Row(11)[0] = 1.0f;
  EXPECT_EQ(s.Find(10), nullptr);
  EXPECT_EQ(s.Find(11)[0], 1.0f);
  EXPECT_EQ(s.evicted(), 1u);
  EXPECT_EQ(s.evicted_l1(), 3.0);
}

TEST(ResidualStoreTest, KeysWithinARangeThatFitsAreAddressedDirectly) {
  ResidualStore s(/*dim=*/2, /*capacity_rows=*/10, /*key_range=*/10);
  EXPECT_EQ(s.Find(3), nullptr);
  s.Row(3)[1] = 0.5f;
  for (uint64_t k = 0; k < 10; ++k) s.Row(k);
  EXPECT_EQ(s.rows(), 10u);
  EXPECT_EQ(s.evicted(), 0u);  // never: every key has its row
  EXPECT_EQ(s.Find(3)[1], 0.5f);
  // A key past the range (a bad one) still gets a row, from the bounded part.
  s.Row(1000)[0] = 1.0f;
  EXPECT_EQ(s.Find(1000)[0], 1.0f);
  EXPECT_EQ(s.rows(), 11u);
}

TEST(ResidualStoreTest, ForEachRowGivesTheRecencyThatRowRebuilds) {
  ResidualStore s(/*dim=*/2, /*capacity_rows=*/3);
  for (uint64_t k = 1; k <= 3; ++k) s.Row(k)[0] = static_cast<float>(k);
  s.Row(1);  // recency, least recent first: 2, 3, 1
  std::vector<uint64_t> order;
  std::vector<float> firsts;
  s.ForEachRow([&](uint64_t key, const float* v) {
    order.push_back(key);
    firsts.push_back(v[0]);
  });
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_EQ(firsts, (std::vector<float>{2, 3, 1}));
  // A store filled in that order evicts what the original would: key 2.
  ResidualStore copy(2, 3);
  for (size_t i = 0; i < order.size(); ++i) copy.Row(order[i])[0] = firsts[i];
  copy.SetEvicted(5, 0.5);
  s.Row(4);
  copy.Row(4);
  EXPECT_EQ(s.Find(2), nullptr);
  EXPECT_EQ(copy.Find(2), nullptr);
  EXPECT_EQ(copy.Find(1)[0], 1.0f);
  EXPECT_EQ(copy.evicted(), 6u);
  EXPECT_EQ(copy.evicted_l1(), 2.5);
  // Rows addressed by key come in key order.
  ResidualStore direct(1, 10, /*key_range=*/10);
  direct.Row(7)[0] = 7;
  direct.Row(2)[0] = 2;
  order.clear();
  direct.ForEachRow([&](uint64_t key, const float*) { order.push_back(key); });
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 7}));
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// Random touches against a reference LRU (a list, most recent first):
// the same rows held, the same values, the same evictions and the same
// least-recent-first order, through many index growths and log compactions.
TEST(ResidualStoreTest, MatchesAReferenceLruOnRandomTouches) {
  for (uint64_t capacity : {1u, 3u, 50u, 700u}) {
    ResidualStore s(/*dim=*/2, capacity);
    std::list<uint64_t> order;  // most recent first
    std::map<uint64_t, float> value;
    uint64_t evicted = 0;
    std::mt19937_64 rng(capacity);
    for (int step = 0; step < 20000; ++step) {
      // Keys from a range a little larger than the capacity, some far apart.
      const uint64_t key = (rng() % (capacity + capacity / 2 + 2)) * 0x100000001b3ull;
      float* row = s.Row(key);
      auto it = std::find(order.begin(), order.end(), key);
      if (it != order.end()) {
        order.erase(it);
        ASSERT_EQ(row[0], value[key]) << "step " << step;
      } else {
        ASSERT_EQ(row[0], 0.0f);
        if (order.size() == capacity) {
          value.erase(order.back());
          order.pop_back();
          ++evicted;
        }
      }
      order.push_front(key);
      row[0] = value[key] = static_cast<float>(step);
      ASSERT_EQ(s.rows(), order.size());
      ASSERT_EQ(s.evicted(), evicted);
    }
    std::vector<uint64_t> walked;
    s.ForEachRow([&](uint64_t key, const float* v) {
      walked.push_back(key);
      EXPECT_EQ(v[0], value[key]);
    });
    EXPECT_EQ(walked, std::vector<uint64_t>(order.rbegin(), order.rend())) << "capacity " << capacity;
    for (const auto& [key, v] : value) {
      ASSERT_NE(s.Find(key), nullptr);
      EXPECT_EQ(s.Find(key)[0], v);
    }
  }
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// Rows() against Row() one key at a time on a second store: key lists
// pushed again (whole, in part, merged with another, with a key dropped or
// added), so that runs form, break, interleave and cross evictions and
// compactions;
// the same values, rows, evictions and recency order throughout.
TEST(ResidualStoreTest, RowsMatchesRowOneKeyAtATime) {
  for (uint64_t capacity : {1u, 2u, 40u, 100u, 1000u}) {
    ResidualStore runs(/*dim=*/2, capacity), single(/*dim=*/2, capacity);
    std::mt19937_64 rng(capacity + 7);
    std::vector<std::vector<uint64_t>> lists(3);
    for (auto& list : lists) {
      for (int k = 0; k < 60; ++k) list.push_back(rng() % 150 + 1);
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
    size_t longest = 0;
    float next = 1.0f;
    for (int step = 0; step < 600; ++step) {
      std::vector<uint64_t> keys = lists[rng() % lists.size()];
      if (rng() % 4 == 0) {  // two lists merged: their runs interleave
        const std::vector<uint64_t>& other = lists[rng() % lists.size()];
        keys.insert(keys.end(), other.begin(), other.end());
        std::sort(keys.begin(), keys.end());
        keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      }
      const size_t begin = rng() % 4 == 0 ? rng() % keys.size() : 0;
      keys.erase(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(begin));
      if (rng() % 5 == 0 && keys.size() > 1) keys.erase(keys.begin() + static_cast<std::ptrdiff_t>(rng() % keys.size()));
      if (rng() % 5 == 0) keys.insert(keys.begin() + static_cast<std::ptrdiff_t>(rng() % (keys.size() + 1)), rng() % 150 + 1);
      for (size_t i = 0; i < keys.size();) {
        size_t taken = 0;
        float* r = runs.Rows(keys.data() + i, keys.size() - i, &taken);
        ASSERT_GE(taken, 1u);
        ASSERT_LE(taken, keys.size() - i);
        longest = std::max(longest, taken);
        for (size_t j = 0; j < taken; ++j) {
          float* s = single.Row(keys[i + j]);
          ASSERT_EQ(r[2 * j], s[0]) << "capacity " << capacity << " step " << step << " key " << keys[i + j];
          ASSERT_EQ(r[2 * j + 1], s[1]);
          r[2 * j] = s[0] = next;
          r[2 * j + 1] = s[1] = -next;
          next += 1.0f;
        }
        i += taken;
      }
      ASSERT_EQ(runs.rows(), single.rows());
      ASSERT_EQ(runs.evicted(), single.evicted());
      ASSERT_EQ(runs.evicted_l1(), single.evicted_l1());
    }
    std::vector<std::pair<uint64_t, float>> a, b;
    runs.ForEachRow([&](uint64_t key, const float* v) { a.emplace_back(key, v[0]); });
    single.ForEachRow([&](uint64_t key, const float* v) { b.emplace_back(key, v[0]); });
    EXPECT_EQ(a, b) << "capacity " << capacity;
    // Runs were found where the store holds the lists (not at capacity 1).
    if (capacity >= 100) {
      EXPECT_GT(longest, 10u) << "capacity " << capacity;
    }
  }
}

// A long list whose rows lie among another list's (that list, a subset of
// it, came first) is laid out as one run by EndList(): the list pushed
// again is found in one Rows() call, and values, recency and evictions
// stay those of Row() one key at a time.
TEST(ResidualStoreTest, EndListLaysAnInterleavedListOutAsOneRun) {
  for (uint64_t capacity : {3000u, 4500u, 10000u}) {
    ResidualStore runs(/*dim=*/2, capacity), single(/*dim=*/2, capacity);
    std::mt19937_64 rng(capacity);
    std::vector<uint64_t> all, subset, fresh;
    for (uint64_t k = 0; k < 4000; ++k) all.push_back(k * 7 + 3);
    for (uint64_t k : all)
      if (rng() % 3 == 0) subset.push_back(k);
    for (uint64_t k = 0; k < 2000; ++k) fresh.push_back(100000 + k);
    float next = 1.0f;
    size_t last_runs = 0;
    const auto push = [&](const std::vector<uint64_t>& keys) {
      runs.BeginList();
      last_runs = 0;
      for (size_t i = 0; i < keys.size();) {
        size_t taken = 0;
        float* r = runs.Rows(keys.data() + i, keys.size() - i, &taken);
        for (size_t j = 0; j < taken; ++j) {
          float* s = single.Row(keys[i + j]);
          ASSERT_EQ(r[2 * j], s[0]) << "capacity " << capacity << " key " << keys[i + j];
          ASSERT_EQ(r[2 * j + 1], s[1]);
          r[2 * j] = s[0] = next;
          r[2 * j + 1] = s[1] = -next;
          next += 1.0f;
        }
        i += taken;
        ++last_runs;
      }
      runs.EndList();
      ASSERT_EQ(runs.rows(), single.rows());
      ASSERT_EQ(runs.evicted(), single.evicted());
      ASSERT_EQ(runs.evicted_l1(), single.evicted_l1());
    };
    for (const auto* keys : {&subset, &subset, &all, &all, &all, &fresh, &all, &subset, &all}) push(*keys);
    // With room for every list, the first push of `all` was laid out:
    // this one is one run. At 4,500 rows `all` took the slots of evicted
    // rows in a few long runs, left as they are; at 3,000 every push of it
    // evicts, and nothing moves.
    push(all);
    if (capacity == 10000) {
      EXPECT_EQ(last_runs, 1u);
    } else if (capacity == 4500) {
      EXPECT_LE(last_runs, 8u);
    } else {
      EXPECT_GT(last_runs, 100u) << "capacity " << capacity;
    }
    std::vector<std::pair<uint64_t, float>> a, b;
    runs.ForEachRow([&](uint64_t key, const float* v) { a.emplace_back(key, v[1]); });
    single.ForEachRow([&](uint64_t key, const float* v) { b.emplace_back(key, v[1]); });
    EXPECT_EQ(a, b) << "capacity " << capacity;
  }
}

// Named lists (BeginList(list)): a list found in one run is taken again by
// KnownRun() without comparing keys while no slot changes; a list object
// with other keys, the same keys in a new object, a key added elsewhere or
// rows evicted make it look its rows up again. Throughout, the same values,
// rows, evictions and recency order as Row() one key at a time, checkpoint
// order (ForEachRow) included, with the repeated runs' stamps kept lazily.
TEST(ResidualStoreTest, KnownRunsMatchRowOneKeyAtATime) {
  for (uint64_t capacity : {50u, 300u, 5000u}) {
    ResidualStore runs(/*dim=*/2, capacity), single(/*dim=*/2, capacity);
    std::mt19937_64 rng(capacity + 3);
    std::vector<ResidualStore::KeyList> lists;
    for (int l = 0; l < 3; ++l) {
      std::vector<uint64_t> keys;
      for (uint64_t k = 0; k < 200; ++k) keys.push_back(l * 1000 + k * 3 + 1);
      lists.push_back(std::make_shared<const std::vector<uint64_t>>(keys));
    }
    float next = 1.0f;
    int known = 0;
    const auto check = [&](const float* r, uint64_t key, int step) {
      float* s = single.Row(key);
      ASSERT_EQ(r[0], s[0]) << "capacity " << capacity << " step " << step << " key " << key;
      ASSERT_EQ(r[1], s[1]);
    };
    for (int step = 0; step < 400; ++step) {
      const int what = static_cast<int>(rng() % 10);
      if (what <= 1) {  // one key: a list's (held), or elsewhere (a new row)
        const std::vector<uint64_t>& some = *lists[rng() % lists.size()];
        const uint64_t key = what == 0 ? some[rng() % some.size()] : rng() % 4000 + 1;
        float* r = runs.Row(key);
        check(r, key, step);
        continue;
      }
      ResidualStore::KeyList list = lists[rng() % lists.size()];
      if (what == 2) {  // the same keys in a new object
        list = std::make_shared<const std::vector<uint64_t>>(*list);
      } else if (what == 3) {  // a list that changed: one key replaced
        std::vector<uint64_t> keys = *list;
        keys[rng() % keys.size()] = rng() % 4000 + 5000;
        list = std::make_shared<const std::vector<uint64_t>>(keys);
      }
      const std::vector<uint64_t>& keys = *list;
      runs.BeginList(list);
      float* whole = runs.KnownRun();
      known += whole != nullptr;
      for (size_t i = 0; i < keys.size();) {
        size_t taken = keys.size();
        float* r = whole;
        if (r == nullptr) r = runs.Rows(keys.data() + i, keys.size() - i, &taken);
        for (size_t j = 0; j < taken; ++j) {
          check(r + 2 * j, keys[i + j], step);
          float* s = single.Row(keys[i + j]);
          r[2 * j] = s[0] = next;
          r[2 * j + 1] = s[1] = -next;
          next += 1.0f;
        }
        i += taken;
      }
      runs.EndList();
      ASSERT_EQ(runs.rows(), single.rows());
      ASSERT_EQ(runs.evicted(), single.evicted());
      ASSERT_EQ(runs.evicted_l1(), single.evicted_l1());
      if (step % 50 == 0) {
        std::vector<std::pair<uint64_t, float>> a, b;
        runs.ForEachRow([&](uint64_t key, const float* v) { a.emplace_back(key, v[0]); });
        single.ForEachRow([&](uint64_t key, const float* v) { b.emplace_back(key, v[0]); });
        ASSERT_EQ(a, b) << "capacity " << capacity << " step " << step;
      }
    }
    std::vector<std::pair<uint64_t, float>> a, b;
    runs.ForEachRow([&](uint64_t key, const float* v) { a.emplace_back(key, v[0]); });
    single.ForEachRow([&](uint64_t key, const float* v) { b.emplace_back(key, v[0]); });
    EXPECT_EQ(a, b) << "capacity " << capacity;
    // Where every list fits, most pushes of a list take its known run; at
    // 50 rows each push evicts, and none does.
    if (capacity == 5000) {
      EXPECT_GT(known, 100) << "capacity " << capacity;
    } else if (capacity == 50) {
      EXPECT_EQ(known, 0);
    }
  }
}

// KnownRun() on exact values: a list pushed, pushed again (its run
// taken), then the same keys under another object and a changed list.
TEST(ResidualStoreTest, KnownRunIsTheListsRowsAndOnlyItsOwn) {
  ResidualStore store(/*dim=*/1, /*capacity_rows=*/1000);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 100; ++k) keys.push_back(500 + 7 * k);
  const auto list = std::make_shared<const std::vector<uint64_t>>(keys);
  const auto push = [&](const ResidualStore::KeyList& l, float add) {
    store.BeginList(l);
    float* run = store.KnownRun();
    const bool known = run != nullptr;
    for (size_t i = 0; i < l->size();) {
      size_t taken = l->size() - i;
      float* r = run != nullptr ? run : store.Rows(l->data() + i, l->size() - i, &taken);
      for (size_t j = 0; j < taken; ++j) r[j] += add;
      run = nullptr;
      i += taken;
    }
    store.EndList();
    return known;
  };
  EXPECT_FALSE(push(list, 1.0f));  // new rows
  EXPECT_FALSE(push(list, 2.0f));  // found in one run, no slot changed: known from now on
  EXPECT_TRUE(push(list, 4.0f));
  EXPECT_TRUE(push(list, 8.0f));
  for (uint64_t k : keys) EXPECT_EQ(*store.Find(k), 15.0f) << k;
  // The same keys in another object: compared again, then known too.
  const auto copy = std::make_shared<const std::vector<uint64_t>>(keys);
  EXPECT_FALSE(push(copy, 16.0f));
  EXPECT_TRUE(push(copy, 32.0f));
  EXPECT_TRUE(push(list, 64.0f));
  for (uint64_t k : keys) EXPECT_EQ(*store.Find(k), 127.0f) << k;
  // A changed list (its last key replaced): a new row; every list's run is
  // forgotten (a slot changed).
  std::vector<uint64_t> changed = keys;
  changed.back() = 1;
  const auto other = std::make_shared<const std::vector<uint64_t>>(changed);
  EXPECT_FALSE(push(other, 128.0f));
  EXPECT_FALSE(push(list, 256.0f));
  EXPECT_EQ(*store.Find(1), 128.0f);
  EXPECT_EQ(*store.Find(keys.back()), 383.0f);
  EXPECT_EQ(*store.Find(keys.front()), 511.0f);
  EXPECT_EQ(store.rows(), 101u);
  // Without a list, never known.
  store.BeginList();
  EXPECT_EQ(store.KnownRun(), nullptr);
  store.EndList();
}

// A named list whose rows lie in a few long runs (one of its keys was
// pushed alone before it) is laid out once it is found the same way twice,
// and is a known run from then on; values and recency stay those of Row().
TEST(ResidualStoreTest, ARepeatedListInAFewRunsIsLaidOutOnce) {
  ResidualStore runs(/*dim=*/1, /*capacity_rows=*/1000), single(/*dim=*/1, /*capacity_rows=*/1000);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 200; ++k) keys.push_back(10 + k);
  const auto list = std::make_shared<const std::vector<uint64_t>>(keys);
  *runs.Row(110) = *single.Row(110) = 0.5f;  // the middle key, alone first
  std::vector<bool> known;
  for (int push = 0; push < 5; ++push) {
    runs.BeginList(list);
    float* run = runs.KnownRun();
    known.push_back(run != nullptr);
    for (size_t i = 0; i < keys.size();) {
      size_t taken = keys.size() - i;
      float* r = run != nullptr ? run : runs.Rows(keys.data() + i, keys.size() - i, &taken);
      for (size_t j = 0; j < taken; ++j) {
        float* s = single.Row(keys[i + j]);
        ASSERT_EQ(r[j], *s) << "push " << push << " key " << keys[i + j];
        r[j] = *s = *s + static_cast<float>(push + 1);
      }
      run = nullptr;
      i += taken;
    }
    runs.EndList();
  }
  // Push 0 adds rows (3 runs), push 1 finds 3 runs, push 2 the same 3
  // (laid out after it), push 3 one run, and push 4 takes it.
  EXPECT_EQ(known, (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(*runs.Find(110), 15.5f);
  std::vector<std::pair<uint64_t, float>> a, b;
  runs.ForEachRow([&](uint64_t key, const float* v) { a.emplace_back(key, v[0]); });
  single.ForEachRow([&](uint64_t key, const float* v) { b.emplace_back(key, v[0]); });
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tether
