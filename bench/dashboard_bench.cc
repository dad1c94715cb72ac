// The dashboard at scale: a study of 10,000 trials (the size optuna-dashboard documents as its limit), each with 10
// evaluations of three metrics and 20 training steps, in a fresh SQLite store. Measures:
//   1. StudyJson — what `dltune serve` answers for the study page, its two parts (records read, every analysis and
//      diagnostic, every chart spec) — median of 3;
//   2. the study page in headless Chromium through `dltune serve`: tests/browser/check_page.mjs opening
//      http://127.0.0.1:PORT/#/study/NAME, the time from the start of navigation until the charts of the first
//      screen have drawn, and until every chart has (the page draws charts as they come near the screen; the check
//      scrolls down to each), as the page measures it (performance.now()), for the first view (the server builds
//      the JSON) and a second one (the server's cached JSON). Skipped with --api-only;
//   3. the dashboard under load while the study changes (a note written every 100 ms moves its version, as a running
//      study's writes do): the measurements' part (about 1 MB) asked for at 50 and at 200 requests a second for 10 s
//      each, each request on a connection of its own: how many were answered (200) and refused (503), and the 95th
//      percentile of the answers' times. Skipped with --api-only.
// Goals: the study page loads in under 2 s; under load every request is answered, p95 under 1 s. Plain main(); exits
// 1 when something could not run.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/files.h"
#include "core/rng.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/run/study_session.h"

namespace {

namespace fs = std::filesystem;
using dltune::SteadySeconds;
constexpr int kTrials = 10000;

void FillStudy(dltune::Store& store) {
  const dltune::StudySpec spec = dltune::ParseStudySpec(
      "name: big\nworkload: synthetic\nmax_train_steps: 1000\ntrials: " + std::to_string(kTrials / 2) +
          "\nsampler: random\nspace:\n  optimizer: {values: [sgd, adam], role: scientific}\n"
          "  learning_rate: {min: 0.0001, max: 1, scale: log}\n  dropout: {min: 0, max: 0.5}\n",
      "big.yaml");
  dltune::StudySession session = dltune::StudySession::OpenOrCreate(store, spec, "dashboard bench");
  dltune::Rng rng(1);
  while (auto trial = session.Ask("bench:1")) {
    const double quality = rng.Uniform();
    for (int step = 1; step <= 1000; step += 50) {
      trial->ReportTrain({.step = step,
                          .loss = 2.0 / (1 + step * quality / 100),
                          .learning_rate = 0.1,
                          .grad_norm = 1 + rng.Uniform(),
                          .step_time = 0.01,
                          .data_wait = 0.0001});
    }
    for (int step = 100; step <= 1000; step += 100) {
      const double error = 0.1 + 0.8 / (1 + step * quality / 50) + 0.01 * rng.Uniform();
      trial->ReportEval(step, "valid", {{"error_rate", error}, {"loss", error * 3}});
      trial->ReportEval(step, "train", {{"error_rate", error * 0.9}});
    }
    trial->Complete();
  }
}

// The status code of GET `path` from the server at 127.0.0.1:`port` on a new connection (0 when it failed), reading
// the whole answer.
int Get(int port, const std::string& path) {
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{30, 0};
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (::connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(sock);
    return 0;
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nConnection: close\r\n\r\n";
  (void)!::send(sock, request.data(), request.size(), MSG_NOSIGNAL);
  std::string head;
  char buffer[65536];
  for (ssize_t n; (n = ::recv(sock, buffer, sizeof(buffer), 0)) > 0;) {
    if (head.size() < 16) head.append(buffer, static_cast<std::size_t>(std::min<ssize_t>(n, 16)));
  }
  ::close(sock);
  return head.size() >= 12 ? std::atoi(head.c_str() + 9) : 0;
}

// Polls `path` at `rate` requests a second for `seconds`, from 32 client threads; prints the outcome.
void PollUnderLoad(int port, const std::string& path, double rate, double seconds) {
  const int requests = static_cast<int>(rate * seconds);
  std::atomic<int> next{0}, answered{0}, refused{0}, other{0};
  std::mutex mutex;
  std::vector<double> times;
  const double start = SteadySeconds();
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&] {
      for (int i; (i = next++) < requests;) {
        const double due = start + i / rate;
        if (const double wait = due - SteadySeconds(); wait > 0)
          std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        const double sent = SteadySeconds();
        const int status = Get(port, path);
        const double took = SteadySeconds() - sent;
        if (status == 200) {
          ++answered;
          const std::lock_guard<std::mutex> lock(mutex);
          times.push_back(took);
        } else if (status == 503) {
          ++refused;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& client : clients) client.join();
  std::sort(times.begin(), times.end());
  const double p95 = times.empty() ? -1 : times[std::min(times.size() - 1, times.size() * 95 / 100)];
  std::printf(
      "  %.0f requests/s for %.0f s: %d answered, %d refused (503), %d failed otherwise; p95 %.3f s (goal: "
      "all answered, p95 < 1 s: %s)\n",
      rate, seconds, answered.load(), refused.load(), other.load(), p95,
      answered == requests && p95 < 1 ? "met" : "NOT met");
}

}  // namespace

int main(int argc, char** argv) {
  bool api_only = false, keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--api-only") {
      api_only = true;
    } else if (arg == "--keep") {
      keep = true;  // leave the store and the screenshot for a look
    } else {
      std::fprintf(stderr, "usage: dltune_bench_dashboard [--api-only] [--keep]\n");
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("dltune_bench_dashboard_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string url = "sqlite://" + (dir / "big.db").string();
  {
    const auto store = dltune::OpenStore(url);
    const double start = SteadySeconds();
    FillStudy(*store);
    std::printf("filled a study of %d trials in %.1f s\n", kTrials, SteadySeconds() - start);
  }
  const auto store = dltune::OpenStore(url);
  for (const auto& [part, what] :
       {std::pair{dltune::StudyPart::kRecords, "the trial records' part (trials, axis and isolation plots, ...)"},
        {dltune::StudyPart::kMeasurements, "the measurements' part (diagnostics, curves, gradient norms)"}}) {
    std::vector<double> times;
    std::size_t bytes = 0;
    for (int i = 0; i < 3; ++i) {
      const double start = SteadySeconds();
      bytes = dltune::StudyJson(*store, "big", part).dump().size();
      times.push_back(SteadySeconds() - start);
    }
    std::sort(times.begin(), times.end());
    std::printf("study page JSON, %s: %.2f s (median of 3), %.1f MB\n", what, times[1],
                static_cast<double>(bytes) / 1e6);
  }
  int status = 0;
  if (!api_only) {
    const std::string serve_log = (dir / "serve.log").string();
    std::fflush(stdout);  // else the child flushes what is buffered a second time
    const pid_t server = fork();
    if (server == 0) {
      std::freopen(serve_log.c_str(), "w", stdout);
      execl(DLTUNE_CLI_PATH, DLTUNE_CLI_PATH, "serve", "--storage", url.c_str(), "--port", "0", nullptr);
      _exit(127);
    }
    std::string base;
    for (int i = 0; i < 100 && base.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::ifstream in(serve_log);
      std::string line;
      std::getline(in, line);
      const auto at = line.find("http://");
      if (at != std::string::npos) base = line.substr(at, line.find('/', at + 7) - at + 1);
    }
    // The first view computes the study's JSON; later ones (the page's polls, another reader) get it from the
    // server's cache while the study does not change.
    struct View {
      double first_screen_ms = -1;  // the charts of the first screen drawn
      double all_ms = -1;           // every chart drawn, scrolling down to each
    };
    View cold, warm;
    for (View* view : {&cold, &warm}) {
      const std::string log = (dir / "page.log").string();
      const std::string command = std::string("node ") + DLTUNE_SOURCE_DIR + "/tests/browser/check_page.mjs '" + base +
                                  "#/study/big' " + (dir / "big.png").string() + " --min-charts 8 > " + log + " 2>&1";
      if (base.empty() || std::system(command.c_str()) != 0) {
        std::fprintf(stderr, "the page check failed; see %s\n", log.c_str());
        status = 1;
        break;
      }
      std::ifstream in(log);
      for (std::string line; std::getline(in, line);) {
        for (const auto& [marker, ms] :
             {std::pair<std::string, double*>{"first screen's charts drawn ", &view->first_screen_ms},
              {"every chart drawn ", &view->all_ms}}) {
          if (const auto at = line.find(marker); at != std::string::npos)
            *ms = std::stod(line.substr(at + marker.size()));
        }
      }
    }
    // A running study: its version moves with every write, here a note every 100 ms.
    std::printf("the measurements' part of a study that changes every 100 ms, polled by many clients:\n");
    std::atomic<bool> writing{true};
    std::thread writer([&] {
      const auto writes = dltune::OpenStore(url);
      const std::int64_t id = writes->FindStudy("big")->id;
      while (writing) {
        writes->AddNote(id, {.text = "still running", .author = "bench"});
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    const int port = base.empty() ? 0 : std::atoi(base.substr(base.rfind(':') + 1).c_str());
    for (const double rate : {50.0, 200.0}) {
      if (port > 0) PollUnderLoad(port, "/api/studies/big/measurements", rate, 10);
    }
    writing = false;
    writer.join();
    kill(server, SIGTERM);
    waitpid(server, nullptr, 0);
    if (status != 0) return status;
    std::printf(
        "study page in Chromium, from navigation until the first screen's charts drew: first view %.2f s, "
        "then %.2f s (goal < 2 s: %s)\n",
        cold.first_screen_ms / 1000, warm.first_screen_ms / 1000,
        cold.first_screen_ms >= 0 && cold.first_screen_ms < 2000 ? "met" : "NOT met");
    std::printf("  until every chart drew, scrolling down to each: first view %.2f s, then %.2f s\n",
                cold.all_ms / 1000, warm.all_ms / 1000);
  }
  if (keep) {
    std::printf("kept %s\n", dir.c_str());
  } else {
    dltune::RemoveTree(dir);
  }
  return status;
}
