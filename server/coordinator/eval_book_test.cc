#include "server/coordinator/eval_book.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace tether {
namespace {

EvalPartial Part(int rank, int64_t rows) {
  EvalPartial p;
  p.set_rank(rank);
  p.set_rows(rows);
  return p;
}

TEST(EvalBookTest, CompleteOnceEveryRankSentAndHandedOutInRankOrder) {
  EvalBook book(3);
  const auto none = [](int) { return false; };
  EXPECT_FALSE(book.Complete(1, none));
  // Arrival order 2, 0, 1: the partials come back in rank order.
  ASSERT_TRUE(book.Put(1, Part(2, 20)));
  ASSERT_TRUE(book.Put(1, Part(0, 5)));
  std::vector<EvalPartial> out;
  EXPECT_FALSE(book.TakeComplete(1, none, &out));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(book.Put(1, Part(1, 7)));
  ASSERT_TRUE(book.TakeComplete(1, none, &out));
  ASSERT_EQ(out.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r].rank(), r);
  EXPECT_EQ(out[0].rows() + out[1].rows() + out[2].rows(), 32);
  EXPECT_EQ(book.rounds(), 0u);  // handed out: forgotten
}

TEST(EvalBookTest, RoundsAreKeptApartAndARepeatReplaces) {
  EvalBook book(2);
  const auto none = [](int) { return false; };
  ASSERT_TRUE(book.Put(0, Part(0, 1)));
  ASSERT_TRUE(book.Put(kFinalEvalRound, Part(1, 9)));
  ASSERT_TRUE(book.Put(kFinalEvalRound, Part(1, 10)));  // a resend replaces
  EXPECT_FALSE(book.Complete(0, none));
  EXPECT_FALSE(book.Complete(kFinalEvalRound, none));
  ASSERT_TRUE(book.Put(kFinalEvalRound, Part(0, 3)));
  std::vector<EvalPartial> out;
  ASSERT_TRUE(book.TakeComplete(kFinalEvalRound, none, &out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].rows(), 10);
  EXPECT_EQ(book.rounds(), 1u);  // round 0 still waits for rank 1
  ASSERT_TRUE(book.Put(0, Part(1, 2)));
  ASSERT_TRUE(book.TakeComplete(0, none, &out));
  ASSERT_EQ(out.size(), 2u);
  // Round 0 stays: a worker that rejoins asks for it again.
  ASSERT_TRUE(book.TakeComplete(0, none, &out));
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(book.rounds(), 1u);
  EXPECT_FALSE(book.Put(0, Part(2, 1)));  // no such rank
  EXPECT_FALSE(book.Put(0, Part(-1, 1)));
}

TEST(EvalBookTest, ExcusedRanksCompleteARoundWithoutTheirPartial) {
  EvalBook book(3);
  ASSERT_TRUE(book.Put(4, Part(0, 2)));
  ASSERT_TRUE(book.Put(4, Part(2, 2)));
  std::set<int> gone;
  const auto excused = [&](int r) { return gone.count(r) > 0; };
  EXPECT_FALSE(book.Complete(4, excused));
  gone.insert(1);
  std::vector<EvalPartial> out;
  ASSERT_TRUE(book.TakeComplete(4, excused, &out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].rank(), 0);
  EXPECT_EQ(out[1].rank(), 2);
}

TEST(EvalBookTest, WaitersAreKeptPerRound) {
  EvalBook book(2);
  book.Park(0, {"a", 11, 0});
  book.Park(0, {"b", 12, 1});
  book.Park(kFinalEvalRound, {"a", 13, 0});
  EXPECT_EQ(book.WaitingRounds(), (std::vector<int64_t>{0, kFinalEvalRound}));
  const auto w = book.TakeWaiters(0);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].request_id, 12u);
  EXPECT_EQ(book.WaitingRounds(), (std::vector<int64_t>{kFinalEvalRound}));
  EXPECT_TRUE(book.TakeWaiters(0).empty());
}

// Elastic membership: the book holds cluster.max_workers ranks; the ranks
// that never joined and the joiners are excused, so a round completes with
// the initial ranks' partials, and a joiner's partial is merged in rank
// order when it came.
TEST(EvalBookTest, SlotsNeverJoinedAndJoinersAreExcused) {
  EvalBook book(/*max_workers=*/5);
  const int initial = 2;
  const auto excused = [&](int r) { return r >= initial; };
  ASSERT_TRUE(book.Put(3, Part(1, 7)));
  EXPECT_FALSE(book.Complete(3, excused));
  ASSERT_TRUE(book.Put(3, Part(4, 0)));  // a joiner's empty partial
  EXPECT_FALSE(book.Complete(3, excused));
  ASSERT_TRUE(book.Put(3, Part(0, 5)));
  std::vector<EvalPartial> out;
  ASSERT_TRUE(book.TakeComplete(3, excused, &out));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].rank(), 0);
  EXPECT_EQ(out[1].rank(), 1);
  EXPECT_EQ(out[2].rank(), 4);
  EXPECT_FALSE(book.Put(3, Part(5, 1)));  // beyond max_workers
  // Rank 0 left: the round completes without it.
  const auto zero_left = [&](int r) { return r == 0 || r >= initial; };
  ASSERT_TRUE(book.Put(kFinalEvalRound, Part(1, 7)));
  ASSERT_TRUE(book.TakeComplete(kFinalEvalRound, zero_left, &out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rank(), 1);
}

TEST(EvalBookTest, SnapshotRestoresPartialsAndWaitersExactly) {
  EvalBook book(3);
  const auto none = [](int) { return false; };
  ASSERT_TRUE(book.Put(kSetupEvalRound, Part(0, 1)));
  ASSERT_TRUE(book.Put(2, Part(2, 20)));
  ASSERT_TRUE(book.Put(2, Part(0, 5)));
  book.Park(2, {"w0", 17, 0});
  book.Park(2, {std::string("\0\x01", 2), 18, 2});
  EvalBookState state;
  book.Snapshot(&state);
  EvalBook copy(3);
  ASSERT_TRUE(copy.Restore(state).ok());
  EvalBookState again;
  copy.Snapshot(&again);
  EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());
  // Both complete round 2 alike, in rank order, with the same waiters.
  for (EvalBook* b : {&book, &copy}) {
    ASSERT_TRUE(b->Put(2, Part(1, 7)));
    std::vector<EvalPartial> out;
    ASSERT_TRUE(b->TakeComplete(2, none, &out));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[1].rows(), 7);
    const std::vector<EvalBook::Waiter> w = b->TakeWaiters(2);
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(w[1].identity, std::string("\0\x01", 2));
    EXPECT_EQ(w[1].request_id, 18u);
    EXPECT_EQ(b->rounds(), 1u);  // round 0 stays
  }
  // A partial of a rank outside [0, 3) is refused; nothing changes.
  state.mutable_rounds(0)->mutable_partials(0)->set_rank(3);
  EXPECT_EQ(copy.Restore(state).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(copy.rounds(), 1u);
}

TEST(EvalBookTest, WaitingRanksDropWaitersAndRoundNames) {
  EvalBook book(3);
  book.Park(kValidationEvalRound + 4, {"w0", 1, 0});
  book.Park(kValidationEvalRound + 2, {"w0", 2, 0});
  book.Park(kFinalEvalRound, {"w2", 3, 2});
  const std::map<int, int64_t> waiting = book.WaitingRanks();
  ASSERT_EQ(waiting.size(), 2u);
  EXPECT_EQ(waiting.at(0), kValidationEvalRound + 2);  // the lower of its two rounds
  EXPECT_EQ(waiting.at(2), kFinalEvalRound);
  book.DropWaiters(0);
  EXPECT_EQ(book.WaitingRanks(), (std::map<int, int64_t>{{2, kFinalEvalRound}}));
  EXPECT_EQ(book.WaitingRounds(), std::vector<int64_t>{kFinalEvalRound});
  EXPECT_EQ(EvalBook::RoundName(kSetupEvalRound), "the start");
  EXPECT_EQ(EvalBook::RoundName(3), "the evaluation after epoch 3");
  EXPECT_EQ(EvalBook::RoundName(kFinalEvalRound), "the final evaluation");
  EXPECT_EQ(EvalBook::RoundName(kValidationEvalRound + 3), "the validation after epoch 3");
}

}  // namespace
}  // namespace tether
