// The dashboard's server: its guards (Host and token checks) on a real socket, and ServeDashboard listening on a free
// port, answering from a store and stopping when asked.
#include "report/guarded_server.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <regex>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/store/store.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(GuardedServer, TellsLoopbackHostsApart) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1:8737"));
  EXPECT_TRUE(IsLoopbackHost("LocalHost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("[::1]:80"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
}

TEST(GuardedServer, MakesRandomHexTokens) {
  const std::string token = NewAccessToken();
  EXPECT_TRUE(std::regex_match(token, std::regex("[0-9a-f]{32}"))) << token;
  EXPECT_NE(token, NewAccessToken());
}

// A guarded server answering "ok" at / on a free loopback port, while the test lives.
class GuardedServerOnAPort : public ::testing::Test {
 protected:
  void Start(ServerGuards guards) {
    server_ = std::make_unique<GuardedServer>(std::move(guards));
    server_->Get(
        "/", [](const httplib::Request&, httplib::Response& response) { response.set_content("ok", "text/plain"); });
    server_->Post("/write", [this](const httplib::Request&, httplib::Response& response) {
      ++writes_;
      response.set_content("written", "text/plain");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    listener_ = std::thread([this] { server_->listen_after_bind(); });
  }

  void TearDown() override {
    if (!listener_.joinable()) return;
    server_->stop();
    listener_.join();
  }

  httplib::Result Get(const std::string& path, const httplib::Headers& headers = {}) {
    httplib::Client client("127.0.0.1", port_);
    return client.Get(path, headers);
  }

  httplib::Result Send(const std::string& method, const httplib::Headers& headers,
                       const std::string& content_type = "application/json") {
    httplib::Client client("127.0.0.1", port_);
    if (method == "OPTIONS") return client.Options("/write", headers);
    return client.Post("/write", headers, "{}", content_type.c_str());
  }

  std::unique_ptr<GuardedServer> server_;
  std::atomic<int> writes_{0};
  int port_ = 0;
  std::thread listener_;
};

TEST_F(GuardedServerOnAPort, RefusesAHostThatDoesNotNameIt) {
  Start({.allowed_hosts = {"127.0.0.1"}});
  const auto ours = Get("/");
  ASSERT_TRUE(ours);
  EXPECT_EQ(ours->status, 200);
  EXPECT_EQ(ours->body, "ok");
  const auto rebound = Get("/", {{"Host", "attacker.example"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 421);
  EXPECT_THAT(rebound->body, HasSubstr("does not answer for that Host"));
}

TEST_F(GuardedServerOnAPort, NeedsItsTokenInTheQueryAHeaderOrTheCookie) {
  Start({.token = "s3cret"});
  const auto without = Get("/");
  ASSERT_TRUE(without);
  EXPECT_EQ(without->status, 401);
  const auto wrong = Get("/?token=s3creT");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  const auto from_query = Get("/?token=s3cret");
  ASSERT_TRUE(from_query);
  EXPECT_EQ(from_query->status, 200);
  EXPECT_THAT(from_query->get_header_value("Set-Cookie"), HasSubstr("dltune_token=s3cret"));
  const auto bearer = Get("/", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200);
  const auto cookie = Get("/", {{"Cookie", "other=1; dltune_token=s3cret"}});
  ASSERT_TRUE(cookie);
  EXPECT_EQ(cookie->status, 200);
}

TEST_F(GuardedServerOnAPort, AWriteNeedsTheTokenHeaderAndItsOwnOriginWhereReadsAreOpen) {
  Start({.token = "s3cret", .reads_open = true, .writes = true});
  const auto read = Get("/");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->status, 200) << "reads need no token";
  const std::string origin = "http://127.0.0.1:" + std::to_string(port_);
  const auto refused = [&](const std::string& method, const httplib::Headers& headers, int status,
                           const std::string& content_type = "application/json") {
    const auto answer = Send(method, headers, content_type);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, status) << method << ": " << answer->body;
    EXPECT_EQ(answer->get_header_value("Access-Control-Allow-Origin"), "") << "no CORS grant, ever";
  };
  refused("POST", {}, 401);
  refused("POST", {{"Cookie", "dltune_token=s3cret"}, {"Authorization", "Bearer s3cret"}}, 401);
  refused("POST", {{"X-Dltune-Token", "s3cret"}, {"Origin", "http://127.0.0.1:1"}}, 403);
  refused("POST", {{"X-Dltune-Token", "s3cret"}, {"Sec-Fetch-Site", "same-site"}}, 403);
  refused("POST", {{"X-Dltune-Token", "s3cret"}, {"Origin", origin}}, 415, "multipart/form-data; boundary=x");
  // A cross-origin fetch with the token header is preceded by this preflight, which is refused: the browser never
  // sends the write.
  refused("OPTIONS",
          {{"Origin", "http://evil.example"},
           {"Access-Control-Request-Method", "POST"},
           {"Access-Control-Request-Headers", "x-dltune-token"}},
          403);
  EXPECT_EQ(writes_.load(), 0) << "a refused write reached its handler";
  const auto admitted =
      Send("POST", {{"X-Dltune-Token", "s3cret"}, {"Origin", origin}}, "application/json; charset=utf-8");
  ASSERT_TRUE(admitted);
  EXPECT_EQ(admitted->status, 200) << admitted->body;
  EXPECT_EQ(writes_.load(), 1);
}

TEST_F(GuardedServerOnAPort, RefusesEveryWriteWhenWritesAreOff) {
  Start({.token = "s3cret"});
  const auto answer = Send("POST", {{"X-Dltune-Token", "s3cret"}});
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 403);
  EXPECT_EQ(writes_.load(), 0);
}

TEST(ServeDashboard, AnswersFromTheStoreUntilStopped) {
  const fs::path dir = fs::temp_directory_path() / ("dltune_serve_dashboard_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string url = "sqlite://" + (dir / "store.db").string();
  (void)OpenStore(url);
  std::atomic<bool> stop{false};
  std::promise<DashboardAddress> listening;
  std::thread serving([&] {
    ServeDashboard(url, {.port = 0}, stop, [&](const DashboardAddress& address) { listening.set_value(address); });
  });
  const DashboardAddress address = listening.get_future().get();
  EXPECT_TRUE(address.loopback);
  std::smatch port;
  // With the token writes need; reads on loopback need none.
  ASSERT_TRUE(std::regex_match(address.url, port, std::regex(R"(http://127\.0\.0\.1:(\d+)/\?token=[0-9a-f]{32})")))
      << address.url;
  httplib::Client client("127.0.0.1", std::stoi(port[1].str()));
  const auto studies = client.Get("/api/studies");
  ASSERT_TRUE(studies);
  EXPECT_EQ(studies->status, 200);
  EXPECT_THAT(studies->body, HasSubstr("\"studies\":[]"));
  const auto outside = client.Get("/assets/..%2Fstore.db");
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->status, 404);
  stop.store(true);
  serving.join();
  RemoveTree(dir);
}

TEST(ServeDashboard, MakesUpATokenWhenOtherMachinesCanReachIt) {
  const fs::path dir = fs::temp_directory_path() / ("dltune_serve_token_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string url = "sqlite://" + (dir / "store.db").string();
  (void)OpenStore(url);
  const std::atomic<bool> stop{true};  // stops as soon as it listens
  DashboardAddress told;
  ServeDashboard(url, {.host = "0.0.0.0", .port = 0}, stop, [&](const DashboardAddress& address) { told = address; });
  EXPECT_FALSE(told.loopback);
  EXPECT_TRUE(std::regex_match(told.url, std::regex(R"(http://0\.0\.0\.0:\d+/\?token=[0-9a-f]{32})"))) << told.url;
  RemoveTree(dir);
}

}  // namespace
}  // namespace dltune
