// PushRowWriter and PushDenseWriter (worker/client/push_writer.h): a 16-bit
// push written in steps, as a chunked send asks for it, is bit for bit the
// push written at once (PushEncoder::EncodeRows, EncodeDense), with the
// same residuals and saturation counts, over repeated, gathered, named and
// changed key lists; a writer writes whole rows (values), no more than a
// step needs.
#include "worker/client/push_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "core/wire_codec.h"
#include "worker/client/push_encoder_testing.h"

namespace tether {
namespace {

using push_testing::Pool;
using push_testing::RowTable;

std::vector<unsigned char> Bytes(const zmq::message_t& f) {
  const auto* b = static_cast<const unsigned char*>(f.data());
  return std::vector<unsigned char>(b, b + f.size());
}

std::vector<std::pair<uint64_t, std::vector<float>>> Residuals(const PushEncoder& e, uint32_t dim) {
  std::vector<std::pair<uint64_t, std::vector<float>>> out;
  if (e.residuals(0) == nullptr) return out;
  e.residuals(0)->ForEachRow([&](uint64_t key, const float* v) { out.emplace_back(key, std::vector<float>(v, v + dim)); });
  return out;
}

// Twelve pushes of 300 rows through two encoders, one written at once and
// one in steps of `step` bytes (as the chunks of a send end): every frame
// and every residual equal.
void ExpectStepsWriteWhatOnePassWrites(WireEncoding wire, bool feedback, size_t step) {
  const uint32_t dim = 5;
  PushEncoder once({RowTable(wire, feedback, dim)}, 1 << 20), steps({RowTable(wire, feedback, dim)}, 1 << 20);
  FramePool pool = Pool();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(100 + 7 * k);
  auto list = std::make_shared<const std::vector<uint64_t>>(keys);
  std::vector<uint32_t> rows(keys.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint32_t>(i < 120 ? i : i + 3);  // a gap
  std::vector<float> g((keys.size() + 3) * dim);
  for (int k = 0; k < 12; ++k) {
    if (k == 6) {  // a changed list: one key replaced
      keys[200] = 3;
      list = std::make_shared<const std::vector<uint64_t>>(keys);
    }
    for (float& x : g) x = (k == 3 ? 300000.0f : 1.0f) * u(rng);  // push 3 saturates FP16
    const uint32_t* at = k % 2 == 0 ? nullptr : rows.data();
    const ResidualStore::KeyList named = k % 3 == 0 ? nullptr : list;
    const zmq::message_t a = once.EncodeRows(0, keys.data(), keys.size(), g.data(), at, 0.5f, &pool, named);
    PushRowWriter w(&steps, 0, keys.data(), keys.size(), g.data(), at, 0.5f, &pool, named);
    for (size_t end = step; end < w.frame().size(); end += step) w.WriteThrough(end);
    const zmq::message_t b = w.TakeFrame();
    ASSERT_EQ(Bytes(a), Bytes(b)) << "push " << k;
  }
  EXPECT_EQ(Residuals(once, dim), Residuals(steps, dim));
  EXPECT_EQ(once.stats().saturated, steps.stats().saturated);
  if (wire == FP16) {
    EXPECT_GT(steps.stats().saturated, 0u);
  }
  if (feedback) {
    EXPECT_EQ(once.residuals(0)->known_runs(), steps.residuals(0)->known_runs());
  }
}

TEST(PushRowWriterTest, StepsWriteWhatOnePassWrites) {
  for (size_t step : {size_t{1}, size_t{7}, size_t{10}, size_t{333}, size_t{4096}}) {
    SCOPED_TRACE(step);
    ExpectStepsWriteWhatOnePassWrites(BF16, true, step);
  }
  ExpectStepsWriteWhatOnePassWrites(FP16, true, 250);
  ExpectStepsWriteWhatOnePassWrites(BF16, false, 250);
  ExpectStepsWriteWhatOnePassWrites(FP16, false, 3);
}

// WriteThrough(end) writes the whole rows that cover bytes [0, end) and no
// more; an end already covered writes nothing; the rest waits for Finish.
TEST(PushRowWriterTest, WritesTheWholeRowsAStepNeeds) {
  PushEncoder enc({RowTable(BF16, true, 4)}, 1 << 20);  // a row: 8 bytes
  FramePool pool = Pool();
  std::vector<uint64_t> keys(10);
  for (uint64_t k = 0; k < keys.size(); ++k) keys[k] = k;
  const std::vector<float> g(40, 0.25f);
  PushRowWriter w(&enc, 0, keys.data(), keys.size(), g.data(), nullptr, 1.0f, &pool);
  ASSERT_EQ(w.frame().size(), 80u);
  EXPECT_EQ(w.written_rows(), 0u);
  EXPECT_EQ(enc.residuals(0)->rows(), 0u);  // nothing looked up before the first write
  w.WriteThrough(17);
  EXPECT_EQ(w.written_rows(), 3u);
  w.WriteThrough(16);
  EXPECT_EQ(w.written_rows(), 3u);
  w.WriteThrough(24);
  EXPECT_EQ(w.written_rows(), 3u);
  w.WriteThrough(25);
  EXPECT_EQ(w.written_rows(), 4u);
  w.WriteThrough(1000);
  EXPECT_EQ(w.written_rows(), 10u);
  w.Finish();
  w.Finish();
  EXPECT_EQ(enc.residuals(0)->rows(), 10u);
  const auto* bf = static_cast<const uint16_t*>(w.frame().data());
  for (size_t i = 0; i < 40; ++i) ASSERT_EQ(bf[i], 0x3e80) << i;  // 0.25 in BF16
}

// A writer dropped before anything was written (a send that failed before
// it began) still writes every row into the frame a kept copy shares, and
// closes the residual store's bracket.
TEST(PushRowWriterTest, DestructionWritesTheRestIntoSharedCopies) {
  PushEncoder enc({RowTable(BF16, true, 2)}, 1 << 20);
  FramePool pool = Pool();
  std::vector<uint64_t> keys(40);  // 160 bytes: a frame ZeroMQ shares when copied
  std::vector<float> g(80);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 5 + i;
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i + 1);  // exact in BF16
  zmq::message_t kept;
  {
    PushRowWriter w(&enc, 0, keys.data(), keys.size(), g.data(), nullptr, 1.0f, &pool);
    kept.copy(w.frame());
    w.WriteThrough(20);  // 5 rows
    EXPECT_EQ(w.written_rows(), 5u);
  }
  std::vector<float> got(g.size());
  DecodeValues(kept.data(), got.size(), BF16, got.data());
  EXPECT_EQ(got, g);
  EXPECT_EQ(enc.residuals(0)->rows(), 40u);
  // The next push of the table opens a bracket of its own.
  const zmq::message_t next = enc.EncodeRows(0, keys.data(), keys.size(), g.data(), nullptr, 1.0f, &pool);
  EXPECT_EQ(next.size(), 160u);
}

// A dense table's range (floats [300, 1300) of 1,500) written in steps of
// 333 bytes, eight times: the frames and the residuals are EncodeDense's.
TEST(PushDenseWriterTest, StepsWriteWhatOnePassWrites) {
  for (const WireEncoding wire : {BF16, FP16}) {
    PushEncoder::Table t = RowTable(wire, true, 1);
    t.dense = true;
    t.size = 1500;
    PushEncoder once({t}, 1 << 20), steps({t}, 1 << 20);
    FramePool pool = Pool();
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> g(1500);
    for (int k = 0; k < 8; ++k) {
      for (float& x : g) x = (k == 2 ? 300000.0f : 1.0f) * u(rng);
      const zmq::message_t a = once.EncodeDense(0, 300, 1300, g.data(), 0.25f, &pool);
      PushDenseWriter w(&steps, 0, 300, 1300, g.data(), 0.25f, &pool);
      for (size_t end = 333; end < w.frame().size(); end += 333) w.WriteThrough(end);
      EXPECT_EQ(w.written_values(), 999u);  // the last step: bytes [0, 1998)
      ASSERT_EQ(Bytes(a), Bytes(w.TakeFrame())) << "push " << k;
    }
    EXPECT_EQ(std::vector<float>(once.dense_residuals(0), once.dense_residuals(0) + 1500),
              std::vector<float>(steps.dense_residuals(0), steps.dense_residuals(0) + 1500));
    EXPECT_EQ(once.stats().saturated, steps.stats().saturated);
    EXPECT_EQ(steps.dense_residuals(0)[0], 0.0f);  // outside the range: untouched
  }
}

}  // namespace
}  // namespace tether
