// The dashboard's page cache: a running study's documents are rebuilt once per interval, not once per poll, and no
// reader waits behind a rebuild once a document exists.
#include "dltune/report/dashboard_api.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

using Clock = std::chrono::steady_clock;

double WallNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(StudyPageCache, KeepsASettledStudysDocumentWhileItDoesNotChange) {
  StudyPageCache cache(/*max_age_seconds=*/0.0, /*settle_seconds=*/2.0);
  const double version = WallNow() - 60;  // last written a minute ago
  int built = 0;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(cache.Get("a", version, [&] { return "v" + std::to_string(++built); }), "v1");
  EXPECT_EQ(cache.Get("a", version + 1, [&] { return "v" + std::to_string(++built); }), "v2");  // it changed
  EXPECT_EQ(cache.builds(), 2u);
}

TEST(StudyPageCache, RebuildsARunningStudyOncePerInterval) {
  StudyPageCache cache(/*max_age_seconds=*/0.3, /*settle_seconds=*/2.0);
  int built = 0;
  const auto build = [&] { return std::to_string(++built); };
  // A study written to all the time: each poll sees a new version.
  for (int i = 0; i < 50; ++i) cache.Get("running", WallNow(), build);
  EXPECT_EQ(cache.builds(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  EXPECT_EQ(cache.Get("running", WallNow(), build), "2");
  // A version written within the settle time is not kept past max_age even when it stays the same.
  const double version = WallNow();
  cache.Get("just-written", version, build);
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  cache.Get("just-written", version, build);
  EXPECT_EQ(cache.builds(), 4u);
}

// While one thread rebuilds (slowly: a large study), the others are answered at once with the previous document.
TEST(StudyPageCache, NoReaderWaitsBehindARebuild) {
  StudyPageCache cache(/*max_age_seconds=*/0.0, /*settle_seconds=*/2.0);
  cache.Get("big", 1.0, [] { return std::string("old"); });
  std::atomic<bool> building{false};
  std::thread rebuild([&] {
    cache.Get("big", 2.0, [&] {
      building = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      return std::string("new");
    });
  });
  while (!building) std::this_thread::yield();
  std::vector<std::thread> readers;
  std::atomic<int> quick{0};
  for (int r = 0; r < 8; ++r) {
    readers.emplace_back([&] {
      const auto start = Clock::now();
      const std::string body = cache.Get("big", 3.0, [] { return std::string("never"); });
      if (body == "old" && Clock::now() - start < std::chrono::milliseconds(400)) ++quick;
    });
  }
  for (auto& reader : readers) reader.join();
  rebuild.join();
  EXPECT_EQ(quick.load(), 8);
  EXPECT_EQ(cache.builds(), 2u);
}

// The first request for a document waits for it; a failed build reaches every waiter, and the next request tries
// again.
TEST(StudyPageCache, FirstRequestsWaitAndFailuresReachThem) {
  StudyPageCache cache;
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      try {
        cache.Get("gone", 1.0, []() -> std::string {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          throw Error("no study 'gone'");
        });
      } catch (const Error&) {
        ++failed;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failed.load(), 4);
  EXPECT_EQ(cache.Get("gone", 1.0, [] { return std::string("back"); }), "back");
}

}  // namespace
}  // namespace dltune
