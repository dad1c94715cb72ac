// The dashboard's writes on a real socket: a note or a decision sent from the page is recorded as `dltune note` and
// `dltune decide` record it (the same function, the same checks and messages), and a write without the token, with a
// wrong one, from another origin, as a form, without the token header or too large is refused and writes nothing.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/store/store.h"
#include "report/decision_log.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kAuthor = "tester@machine";

// A store with study "s" (one completed trial) and ServeDashboard answering from it on a free loopback port while
// the test lives.
class DashboardWrites : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dltune_dashboard_writes_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    url_ = "sqlite://" + (dir_ / "store.db").string();
    store_ = OpenStore(url_);
    const StudyRecord study = store_->CreateStudy(
        {.name = "s", .spec_text = "name: s\nmax_train_steps: 10\nspace: {lr: {min: 0.1, max: 1}}\n"});
    study_id_ = study.id;
    store_->AddTrials(study.id, {{.number = 0, .substudy_label = "all", .params = {{"lr", Value(0.5)}}}});
    auto claimed = store_->ClaimNext(study.id, "w");
    store_->Record(claimed->second, {.best_step = 10, .best_value = 0.25});
    store_->Finish(claimed->second, {.state = TrialState::kCompleted, .final_value = 0.25});
  }

  void Serve(bool writes = true) {
    std::promise<DashboardAddress> listening;
    serving_ = std::thread([&, writes] {
      ServeDashboard(url_, {.port = 0, .writes = writes, .author = kAuthor}, stop_,
                     [&](const DashboardAddress& address) { listening.set_value(address); });
    });
    address_ = listening.get_future().get();
    std::smatch match;
    ASSERT_TRUE(
        std::regex_match(address_.url, match, std::regex(R"(http://127\.0\.0\.1:(\d+)/(\?token=([0-9a-f]+))?)")))
        << address_.url;
    port_ = std::stoi(match[1].str());
    token_ = match[3].str();
  }

  void TearDown() override {
    if (serving_.joinable()) {
      stop_.store(true);
      serving_.join();
    }
    store_.reset();
    RemoveTree(dir_);
  }

  std::string Origin() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The headers the page's own fetch sends with a write.
  httplib::Headers PageHeaders() const {
    return {{"X-Dltune-Token", token_}, {"Origin", Origin()}, {"Sec-Fetch-Site", "same-origin"}};
  }

  httplib::Result Post(const std::string& path, const std::string& body, const httplib::Headers& headers,
                       const std::string& content_type = "application/json") {
    httplib::Client client("127.0.0.1", port_);
    return client.Post(path.c_str(), headers, body, content_type.c_str());
  }

  std::vector<StudyNote> Notes() { return store_->ListNotes(study_id_); }

  fs::path dir_;
  std::string url_;
  std::unique_ptr<Store> store_;
  std::int64_t study_id_ = 0;
  std::atomic<bool> stop_{false};
  std::thread serving_;
  DashboardAddress address_;
  int port_ = 0;
  std::string token_;
};

// The fields of a note a writer sets (not its id and time, which the store sets).
std::tuple<std::string, std::string, std::string, std::string, std::string> Written(const StudyNote& note) {
  return {NoteKindName(note.kind), note.adopt, note.text, note.author, note.resolves};
}

TEST_F(DashboardWrites, RecordsANoteAndADecisionAsTheCommandsDo) {
  Serve();
  ASSERT_FALSE(token_.empty()) << "a loopback dashboard that writes has a token";
  // Reading on loopback still needs none.
  httplib::Client reader("127.0.0.1", port_);
  const auto read = reader.Get("/api/studies/s");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->status, 200);
  const auto writes = reader.Get("/api/writes");
  ASSERT_TRUE(writes);
  EXPECT_EQ(writes->body, R"({"writes":true})");

  const auto noted = Post("/api/studies/s/notes", R"({"text": "lr <b>at</b> the top"})", PageHeaders());
  ASSERT_TRUE(noted);
  EXPECT_EQ(noted->status, 201) << noted->body;
  const auto decided =
      Post("/api/studies/s/decisions", R"({"adopt": "trial:0", "because": "best run"})", PageHeaders());
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->status, 201) << decided->body;
  // What `dltune note` and `dltune decide` record, through the function they call.
  const RecordedNote by_note = RecordNote(*store_, {.study = "s", .text = "lr <b>at</b> the top", .author = kAuthor});
  const RecordedNote by_decide =
      RecordDecision(*store_, {.study = "s", .adopt = "trial:0", .because = "best run", .author = kAuthor});
  const std::vector<StudyNote> notes = Notes();
  ASSERT_EQ(notes.size(), 4U);
  EXPECT_EQ(Written(notes[0]), Written(by_note.note));
  EXPECT_EQ(Written(notes[1]), Written(by_decide.note));
  EXPECT_EQ(notes[0].text, "lr <b>at</b> the top");
  EXPECT_EQ(notes[0].author, kAuthor);
  EXPECT_EQ(notes[1].adopt, by_decide.note.adopt);
  const auto answer = nlohmann::json::parse(noted->body);
  EXPECT_EQ(answer["summary"], "noted on study s (note " + std::to_string(notes[0].id) + ")");
  EXPECT_EQ(answer["note"]["text"], "lr <b>at</b> the top");
  EXPECT_EQ(nlohmann::json::parse(decided->body)["summary"],
            "decided on study s: adopt " + by_decide.note.adopt + ", because best run");
  // The study page shows them.
  const auto page = reader.Get("/api/studies/s");
  ASSERT_TRUE(page);
  EXPECT_THAT(page->body, HasSubstr("lr <b>at</b> the top"));
}

TEST_F(DashboardWrites, RefusesWhatTheCommandsRefuseWithTheirMessages) {
  Serve();
  const auto expect = [&](const std::string& path, const std::string& body, int status, const std::string& message) {
    const auto answer = Post(path, body, PageHeaders());
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, status) << path << " " << body << ": " << answer->body;
    EXPECT_THAT(nlohmann::json::parse(answer->body)["error"].get<std::string>(), HasSubstr(message)) << body;
  };
  expect("/api/studies/s/notes", R"({"text": ""})", 400, "a note needs some text");
  expect("/api/studies/s/notes", R"({"text": "x", "resolves": "no_such"})", 400,
         "--resolves no_such: study s has no such finding");
  expect("/api/studies/s/decisions", R"({"adopt": "0", "because": ""})", 400,
         "a decision needs --because: why it is taken");
  expect("/api/studies/s/decisions", R"({"adopt": "trial:7", "because": "x"})", 400, "trial");
  expect("/api/studies/nope/notes", R"({"text": "x"})", 404, "nope");
  expect("/api/studies/s/notes", R"({"text": 3})", 400, "must be a string");
  expect("/api/studies/s/notes", R"({"txt": "x"})", 400, "unknown field \"txt\"");
  expect("/api/studies/s/notes", R"(["x"])", 400, "a JSON object");
  expect("/api/studies/s/notes", "{not json", 400, "a JSON object");
  // The same input through the function `dltune note` and `dltune decide` call: the same messages.
  try {
    RecordNote(*store_, {.study = "s", .text = ""});
    ADD_FAILURE() << "an empty note was recorded";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "a note needs some text");
  }
  EXPECT_TRUE(Notes().empty());
}

TEST_F(DashboardWrites, RefusesAWriteThatIsNotFromItsOwnPageAndWritesNothing) {
  Serve();
  const std::string note = R"({"text": "forged"})";
  struct Case {
    std::string what;
    httplib::Headers headers;
    std::string content_type;
    std::string path;
    int status;
  };
  const std::string origin = Origin();
  const std::vector<Case> cases = {
      {"no token", {{"Origin", origin}}, "application/json", "/api/studies/s/notes", 401},
      {"a wrong token",
       {{"X-Dltune-Token", token_.substr(1) + "0"}, {"Origin", origin}},
       "application/json",
       "/api/studies/s/notes",
       401},
      {"the token only in the URL and the cookie, not in its header",
       {{"Origin", origin}, {"Cookie", "dltune_token=" + token_}, {"Authorization", "Bearer " + token_}},
       "application/json",
       "/api/studies/s/notes?token=" + token_,
       401},
      {"another Origin",
       {{"X-Dltune-Token", token_}, {"Origin", "http://evil.example"}},
       "application/json",
       "/api/studies/s/notes",
       403},
      {"another port's Origin",
       {{"X-Dltune-Token", token_}, {"Origin", "http://127.0.0.1:1"}},
       "application/json",
       "/api/studies/s/notes",
       403},
      {"a null Origin",
       {{"X-Dltune-Token", token_}, {"Origin", "null"}},
       "application/json",
       "/api/studies/s/notes",
       403},
      {"a cross-site fetch",
       {{"X-Dltune-Token", token_}, {"Sec-Fetch-Site", "cross-site"}},
       "application/json",
       "/api/studies/s/notes",
       403},
      {"a form's body",
       {{"X-Dltune-Token", token_}, {"Origin", origin}},
       "application/x-www-form-urlencoded",
       "/api/studies/s/notes",
       415},
      {"a text/plain body", {{"X-Dltune-Token", token_}}, "text/plain", "/api/studies/s/notes", 415},
  };
  for (const Case& c : cases) {
    const auto answer =
        Post(c.path, c.content_type == "application/json" ? note : "text=forged", c.headers, c.content_type);
    ASSERT_TRUE(answer) << c.what;
    EXPECT_EQ(answer->status, c.status) << c.what << ": " << answer->body;
    EXPECT_TRUE(Notes().empty()) << c.what << " wrote a note";
  }
  // Too large a body.
  const auto large = Post("/api/studies/s/notes", R"({"text": ")" + std::string(20000, 'x') + "\"}", PageHeaders());
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 413) << large->body;
  EXPECT_TRUE(Notes().empty());
  // And a decision without the token either.
  const auto decision = Post("/api/studies/s/decisions", R"({"adopt": "0", "because": "x"})", {{"Origin", origin}});
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->status, 401);
  EXPECT_TRUE(Notes().empty());
  // The same request from its page is recorded: the refusals were for what they lacked.
  const auto from_page = Post("/api/studies/s/notes", note, PageHeaders());
  ASSERT_TRUE(from_page);
  EXPECT_EQ(from_page->status, 201) << from_page->body;
  EXPECT_EQ(Notes().size(), 1U);
}

TEST_F(DashboardWrites, ARefusedWriteClosesItsConnection) {
  Serve();
  httplib::Client client("127.0.0.1", port_);
  client.set_keep_alive(true);
  const auto refused =
      client.Post("/api/studies/s/notes", {{"Origin", "http://evil.example"}}, R"({"text": "x"})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(refused->get_header_value("Connection"), "close");
  const auto next = client.Get("/api/studies");  // on a new connection, answered as usual
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
}

TEST_F(DashboardWrites, ReadOnlyServesNoWrites) {
  Serve(/*writes=*/false);
  EXPECT_FALSE(address_.writes);
  EXPECT_TRUE(token_.empty()) << "a read-only loopback dashboard needs no token: " << address_.url;
  const auto answer = Post("/api/studies/s/notes", R"({"text": "x"})", {{"Origin", Origin()}});
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 403);
  EXPECT_THAT(answer->body, HasSubstr("read-only"));
  EXPECT_TRUE(Notes().empty());
  // The page asks before it shows its forms.
  httplib::Client client("127.0.0.1", port_);
  const auto writes = client.Get("/api/writes");
  ASSERT_TRUE(writes);
  EXPECT_EQ(writes->body, R"({"writes":false})");
}

}  // namespace
}  // namespace dltune
