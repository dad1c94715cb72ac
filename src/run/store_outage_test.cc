#include "run/store_outage.h"

#include <gtest/gtest.h>

namespace dltune {
namespace {

class Notices : public RunObserver {
 public:
  void Notice(const std::string& message) override { messages.push_back(message); }
  std::vector<std::string> messages;
};

// A clock that moves only when the outage waits.
class StoreOutageTest : public ::testing::Test {
 protected:
  StoreOutage Outage(double patience) {
    return StoreOutage(
        patience, notices_, [this] { return now_; },
        [this](double seconds) {
          waits_.push_back(seconds);
          now_ += seconds;
        });
  }

  double now_ = 1000;
  std::vector<double> waits_;
  Notices notices_;
  const StoreUnavailableError error_{"connection refused"};
};

TEST_F(StoreOutageTest, WaitsLongerEachTimeUpToTenSeconds) {
  StoreOutage outage = Outage(300);
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(outage.Wait(error_));
  EXPECT_EQ(waits_, (std::vector<double>{0.5, 1, 2, 4, 8, 10, 10}));
  ASSERT_EQ(notices_.messages.size(), 1u);  // told once, when it began
  EXPECT_NE(notices_.messages[0].find("connection refused"), std::string::npos) << notices_.messages[0];
  EXPECT_NE(notices_.messages[0].find("for up to 300 s"), std::string::npos) << notices_.messages[0];
}

TEST_F(StoreOutageTest, GivesUpPastItsPatienceWithoutWaiting) {
  StoreOutage outage = Outage(20);
  int tries = 0;
  while (outage.Wait(error_)) ++tries;
  // Within its patience after 0.5 + 1 + 2 + 4 + 8 = 15.5 s, it waits 10 more; at 25.5 s it gives up.
  EXPECT_EQ(tries, 6);
  EXPECT_DOUBLE_EQ(now_, 1025.5);
  EXPECT_EQ(waits_.size(), 6u);
  EXPECT_TRUE(outage.down());
}

TEST_F(StoreOutageTest, AnAnswerEndsTheOutageAndTheNextOneStartsAfresh) {
  StoreOutage outage = Outage(300);
  outage.Answered();
  EXPECT_TRUE(notices_.messages.empty());  // no outage, nothing to tell
  EXPECT_TRUE(outage.Wait(error_));
  EXPECT_TRUE(outage.Wait(error_));
  now_ += 2.5;
  outage.Answered();
  EXPECT_FALSE(outage.down());
  ASSERT_EQ(notices_.messages.size(), 2u);
  EXPECT_EQ(notices_.messages[1], "the store is back after 4 s");
  EXPECT_TRUE(outage.Wait(error_));
  EXPECT_EQ(waits_.back(), 0.5);
  EXPECT_EQ(notices_.messages.size(), 3u);
}

}  // namespace
}  // namespace dltune
