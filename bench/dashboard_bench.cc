// The dashboard at scale: a study of 10,000 trials (the size optuna-dashboard documents as its limit), each with 10
// evaluations of three metrics and 20 training steps, in a fresh SQLite store. Measures:
//   1. StudyJson — what `dltune serve` answers for the study page, its two parts (records read, every analysis and
//      diagnostic, every chart spec) — median of 3;
//   2. the study page in headless Chromium through `dltune serve`: tests/browser/check_page.mjs opening
//      http://127.0.0.1:PORT/#/study/NAME, the time from the start of navigation until the charts of the first
//      screen have drawn, and until every chart has (the page draws charts as they come near the screen; the check
//      scrolls down to each), as the page measures it (performance.now()), for the first view (the server builds
//      the JSON) and a second one (the server's cached JSON). Skipped with --api-only.
// Goal: the study page loads in under 2 s. Plain main(); exits 1 when something could not run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "dltune/core/rng.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/run/study_session.h"

namespace {

namespace fs = std::filesystem;
constexpr int kTrials = 10000;

double Seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

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
    const double start = Seconds();
    FillStudy(*store);
    std::printf("filled a study of %d trials in %.1f s\n", kTrials, Seconds() - start);
  }
  const auto store = dltune::OpenStore(url);
  for (const auto& [part, what] :
       {std::pair{dltune::StudyPart::kRecords, "the trial records' part (trials, axis and isolation plots, ...)"},
        {dltune::StudyPart::kMeasurements, "the measurements' part (diagnostics, curves, gradient norms)"}}) {
    std::vector<double> times;
    std::size_t bytes = 0;
    for (int i = 0; i < 3; ++i) {
      const double start = Seconds();
      bytes = dltune::StudyJson(*store, "big", part).dump().size();
      times.push_back(Seconds() - start);
    }
    std::sort(times.begin(), times.end());
    std::printf("study page JSON, %s: %.2f s (median of 3), %.1f MB\n", what, times[1],
                static_cast<double>(bytes) / 1e6);
  }
  int status = 0;
  if (!api_only) {
    const std::string serve_log = (dir / "serve.log").string();
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
    fs::remove_all(dir);
  }
  return status;
}
