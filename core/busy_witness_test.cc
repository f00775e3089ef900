#include "core/busy_witness.h"

#include <gtest/gtest.h>

#include <chrono>

namespace tether {
namespace {

using std::chrono::milliseconds;

TEST(GapMeterTest, TheLongestGapBetweenMarksCountsFromTheStart) {
  const GapMeter::Clock::time_point t0{};
  GapMeter meter(t0);
  EXPECT_EQ(meter.longest(), milliseconds(0));
  meter.Mark(t0 + milliseconds(40));
  meter.Mark(t0 + milliseconds(50));
  EXPECT_EQ(meter.longest(), milliseconds(40));
  meter.Mark(t0 + milliseconds(950));  // the process was stopped for 900 ms
  meter.Mark(t0 + milliseconds(960));
  EXPECT_EQ(meter.longest(), milliseconds(900));
}

TEST(BusyWitnessTest, AThreadBusyOnPurposeIsWitnessedRunning) {
  BusyWitness witness(milliseconds(5));
  // Work on this thread for 400 ms (computing, as a state build does).
  const auto until = BusyWitness::Clock::now() + milliseconds(400);
  volatile uint64_t sum = 0;
  while (BusyWitness::Clock::now() < until) sum = sum + 1;
  const BusyWitness::Verdict v = witness.Finish();
  EXPECT_GE(v.busy, milliseconds(400));
  // The witness woke every 5 ms or so; a loaded host delays it a little,
  // never by most of the work.
  EXPECT_LT(v.longest_gap, milliseconds(200));
  EXPECT_TRUE(v.RanThroughout(milliseconds(200)));
  EXPECT_FALSE(v.RanThroughout(milliseconds(-1)));
  // Finish again: the same verdict, the thread already joined.
  EXPECT_EQ(witness.Finish().busy, v.busy);
}

TEST(BusyWitnessTest, ShortWorkEndsAtOnceWithoutWaitingForATick) {
  const auto start = BusyWitness::Clock::now();
  BusyWitness witness(milliseconds(60000));
  const BusyWitness::Verdict v = witness.Finish();
  EXPECT_LT(BusyWitness::Clock::now() - start, milliseconds(5000));
  EXPECT_LE(v.longest_gap, v.busy);
}

}  // namespace
}  // namespace tether
