// `dltune studies`, `show` and `export` on a store filled through the library, as a user would read them.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/files.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"
#include "quickstart_store.h"

namespace dltune {
namespace {

using test::RunDltune;
using ::testing::HasSubstr;

class StoreCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("dltune_store_cli_" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    url_ = new std::string("sqlite://" + (*dir_ / "runs.db").string());
    test::FillQuickstartStore(*url_);
  }
  static void TearDownTestSuite() {
    dltune::RemoveTree(*dir_);
    delete dir_;
    delete url_;
  }
  static std::string Storage() { return " --storage " + *url_; }

  static std::filesystem::path* dir_;
  static std::string* url_;
};
std::filesystem::path* StoreCli::dir_ = nullptr;
std::string* StoreCli::url_ = nullptr;

TEST_F(StoreCli, StudiesIsTheTrackingTable) {
  // One line a study within 120 columns, its latest note cut to fit.
  const auto compact = RunDltune("studies" + Storage());
  ASSERT_EQ(compact.exit_code, 0) << compact.err;
  EXPECT_THAT(compact.out, HasSubstr("2 done, 29 pend, 1 inf"));
  EXPECT_THAT(compact.out, HasSubstr("latest note or decision"));
  std::istringstream lines(compact.out);
  for (std::string line; std::getline(lines, line);) {
    const auto columns = std::count_if(line.begin(), line.end(), [](char c) { return (c & 0xC0) != 0x80; });
    EXPECT_LE(columns, 120) << line;
  }
  const auto result = RunDltune("studies --wide" + Storage());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("quickstart"));
  EXPECT_THAT(result.out, HasSubstr("examples/quickstart.yaml"));
  // The 28 trials the study has not made yet count as pending.
  EXPECT_THAT(result.out, HasSubstr("2 completed, 29 pending, 1 infeasible"));
  EXPECT_THAT(result.out, HasSubstr("valid/error_rate 0.15 (single run, variance unknown) — trial 1, step 2000"));
  EXPECT_THAT(result.out, HasSubstr("dltune run examples/quickstart.yaml"));
}

TEST_F(StoreCli, ShowSummarizesTheStudyAndItsTrials) {
  const auto study = RunDltune("show quickstart" + Storage());
  ASSERT_EQ(study.exit_code, 0) << study.err;
  EXPECT_THAT(study.out, HasSubstr("optimizer=nesterov  0.2 (single run, variance unknown) — trial 0, step 2000"));
  EXPECT_THAT(study.out, HasSubstr("optimizer=adam      0.15 (single run, variance unknown) — trial 1, step 2000"));
  EXPECT_THAT(study.out, HasSubstr("infeasible"));
  EXPECT_THAT(study.out, HasSubstr("nesterov_learning_rate"));

  const auto trial = RunDltune("show quickstart 2" + Storage());
  ASSERT_EQ(trial.exit_code, 0) << trial.err;
  EXPECT_THAT(trial.out, HasSubstr("infeasible: loss is NaN at step 37"));
  const auto best = RunDltune("show quickstart 1" + Storage());
  EXPECT_THAT(best.out, HasSubstr("0.15 at step 2000"));
  EXPECT_THAT(best.out, HasSubstr("last evaluation, at step 2000"));
  EXPECT_THAT(best.out, HasSubstr("/ckpt/t1/2000"));
  EXPECT_THAT(best.out, HasSubstr("param adam_learning_rate"));
}

TEST_F(StoreCli, ExportIsReadyForASpreadsheet) {
  const auto csv = RunDltune("export quickstart" + Storage());
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::istringstream lines(csv.out);
  std::string header;
  std::getline(lines, header);
  EXPECT_THAT(header, HasSubstr("trial,configuration,replica,substudy,state,reason,seed"));
  EXPECT_THAT(header, HasSubstr("adam_learning_rate"));
  EXPECT_THAT(header, HasSubstr("nesterov_learning_rate"));
  int rows = 0;
  for (std::string line; std::getline(lines, line);) ++rows;
  EXPECT_EQ(rows, 4);

  const auto json = RunDltune("export quickstart --format json" + Storage());
  const auto trials = nlohmann::json::parse(json.out);
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[1]["best_value"], 0.15);
  EXPECT_EQ(trials[1]["optimizer"], "adam");
  EXPECT_TRUE(trials[3]["best_value"].is_null());

  const auto jsonl = RunDltune("export quickstart --format jsonl --what measurements" + Storage());
  ASSERT_EQ(jsonl.exit_code, 0) << jsonl.err;
  std::istringstream records(jsonl.out);
  int evals = 0;
  int train = 0;
  for (std::string line; std::getline(records, line);) {
    const auto row = nlohmann::json::parse(line);
    (row["split"] == "train_step" ? train : evals) += 1;
  }
  EXPECT_EQ(evals, 4);  // 2 evaluations x 2 trials
  EXPECT_EQ(train, 4);  // loss and learning rate of one step x 2 trials

  const auto file = *dir_ / "out.csv";
  const auto written = RunDltune("export quickstart -o " + file.string() + Storage());
  EXPECT_EQ(written.exit_code, 0);
  EXPECT_THAT(written.err, HasSubstr("wrote 4 trials"));
  EXPECT_EQ(test::Slurp(file), csv.out);
}

// The exit status says what to do: a database that cannot be reached is worth retrying (69), a mistake is not (2).
TEST_F(StoreCli, AnUnreachableDatabaseIsTellingApartFromAMistake) {
  const auto refused = RunDltune("studies --storage postgresql://nobody@127.0.0.1:1/none");
  EXPECT_EQ(refused.exit_code, 69) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("cannot connect"));
  const auto typo = RunDltune("studies --storage postgresq://nobody@127.0.0.1:1/none");
  EXPECT_EQ(typo.exit_code, 2) << typo.err;
}

TEST_F(StoreCli, MistakesAreOneClearLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"show quikstart" + Storage(), "no study named 'quikstart' (did you mean 'quickstart'?)"},
      {"show quickstart 99" + Storage(), "has no trial 99"},
      {"export nope" + Storage(), "no study named 'nope'"},
      {"studies --storage sqlite://" + (*dir_ / "missing.db").string(), "no store there"},
      {"studies --storage mysql://host/db", "unknown storage scheme 'mysql'"},
      {"export quickstart --what everything" + Storage(), "--what"},
  };
  for (const auto& [arguments, expected] : cases) {
    const auto result = RunDltune(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments;
    EXPECT_THAT(result.err, HasSubstr(expected)) << arguments;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "missing.db"));  // reading never creates a store
}

// Parent names in a cycle, made by ordinary commands: p is deleted while c, planned from it, keeps naming it, and a new
// study planned from c takes the name p. The new p is not c's parent: `dltune next` reads one lineage, c then p, and
// `dltune studies --tree` lists every study; `dltune delete` says what becomes of c.
TEST(StoreCliLineage, ANewStudyTakingADeletedParentsNameIsNotItsChildrensParent) {
  const auto dir = std::filesystem::temp_directory_path() / ("dltune_lineage_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string storage = " --storage sqlite://" + (dir / "runs.db").string();
  const auto dltune = [&](const std::string& arguments) {
    const test::Result result = RunDltune(arguments + storage, dir);
    EXPECT_EQ(result.exit_code, 0) << "dltune " << arguments << "\n" << result.out << result.err;
    return result;
  };
  std::ofstream(dir / "trial.sh")
      << "printf '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.1%s}}\\n' \"$1\" "
         ">> \"$DLTUNE_REPORT\"\n";
  std::ofstream(dir / "p.yaml") << "name: p\ncommand: sh " << (dir / "trial.sh").string()
                                << " {trial_number}\nmax_train_steps: 1\ntrials: 2\n"
                                   "space: {lr: {min: 0.01, max: 1, scale: log}}\n";
  dltune("run p.yaml --no-report");
  dltune("plan retrain --from p --replicas 2 --name c -o c.yaml");
  dltune("run c.yaml --no-report");
  const test::Result deleted = dltune("delete p --force --yes");
  EXPECT_THAT(deleted.out, HasSubstr("studies planned from it keep their records, their parent shown as not here (a "
                                     "study made later under the name p is not their parent): c\n"));
  dltune("plan retrain --from c --replicas 2 --name p -o p2.yaml");
  dltune("run p2.yaml --no-report");

  for (const char* target : {"", " c", " p"}) {
    const test::Result next = dltune(std::string("next") + target);
    EXPECT_THAT(next.out, HasSubstr("study ")) << target;
  }
  const test::Result tree = dltune("studies --tree");
  EXPECT_THAT(tree.out, HasSubstr("c (retrain)"));
  EXPECT_THAT(tree.out, HasSubstr("[parent p not here: the study named p now is a later one]\n└─ p (retrain)"));
  EXPECT_EQ(std::count(tree.out.begin(), tree.out.end(), '\n'), 2) << tree.out;
  dltune::RemoveTree(dir);
}

// `dltune show STUDY --pareto COST`: each sub-study's front against a cost the trials recorded, as text and JSON; a
// cost that is not one, or that no trial recorded, is one clear line naming the costs the study has.
TEST(StoreCliPareto, ShowsTheFrontOfARecordedCostAndNamesTheCostsOtherwise) {
  const auto dir = std::filesystem::temp_directory_path() / ("dltune_pareto_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string url = "sqlite://" + (dir / "runs.db").string();
  test::FillQuickstartStore(url);
  {
    // Trial 3 trains with its steps timed and records the time of its training steps.
    auto store = OpenStore(url);
    const auto claim = store->ClaimNext(store->FindStudy("quickstart")->id, "worker-c");
    ASSERT_TRUE(claim);
    MeasurementBatch batch;
    for (std::int64_t step = 1; step <= 5; ++step) batch.train.push_back({.step = step, .step_time = 0.02});
    batch.evals.push_back({2000, "valid", "error_rate", 0.18, 10000});
    batch.best_step = 2000;
    batch.best_value = 0.18;
    store->Record(claim->second, batch);
    store->Finish(claim->second,
                  {.state = TrialState::kCompleted, .final_value = 0.18, .time_split = {{"train", 42.5}}});
  }
  const std::string storage = " --storage " + url;

  const auto text = RunDltune("show quickstart --pareto training_seconds" + storage);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("valid/error_rate (lower is better) against training seconds (lower is cheaper)"));
  EXPECT_THAT(text.out, HasSubstr("1 trial drawn, 1 on the front; 1 without training seconds"));
  EXPECT_THAT(text.out, HasSubstr("  3      42.5              0.18"));
  EXPECT_THAT(text.out, HasSubstr("Also recorded: seconds_per_step"));

  const auto json = RunDltune("show quickstart --pareto seconds_per_step --format json" + storage);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto out = nlohmann::json::parse(json.out);
  EXPECT_EQ(out.at("cost"), "seconds_per_step");
  EXPECT_EQ(out.at("cost_direction"), "minimize");
  EXPECT_EQ(out.at("recorded_costs"), nlohmann::json({"training_seconds", "seconds_per_step"}));
  bool found = false;
  for (const auto& sub : out.at("substudies")) {
    for (const auto& point : sub.at("points")) {
      if (point.at("trial") != 3) continue;
      found = true;
      EXPECT_DOUBLE_EQ(point.at("cost").get<double>(), 0.02);
      EXPECT_EQ(point.at("on_front"), true);
      EXPECT_EQ(sub.at("front"), nlohmann::json({3}));
    }
  }
  EXPECT_TRUE(found) << json.out;
  // Every field docs/json-output.md names, and no other.
  const auto keys = [](const nlohmann::json& object) {
    std::vector<std::string> names;
    for (const auto& [key, value] : object.items()) names.push_back(key);
    return names;  // nlohmann's objects keep their keys sorted
  };
  EXPECT_EQ(keys(out), (std::vector<std::string>{"cost", "cost_direction", "cost_label", "direction", "objective",
                                                 "recorded_costs", "study", "substudies"}));
  ASSERT_FALSE(out.at("substudies").empty());
  const auto& first = out.at("substudies")[0];
  EXPECT_EQ(keys(first), (std::vector<std::string>{"front", "points", "substudy", "unfinished", "without_cost"}));
  for (const auto& sub : out.at("substudies")) {
    for (const auto& point : sub.at("points")) {
      EXPECT_EQ(keys(point), (std::vector<std::string>{"cost", "objective", "on_front", "state", "trial"}));
    }
  }

  const std::vector<std::pair<std::string, std::string>> mistakes = {
      {"--pareto memory",
       "--pareto: no cost named 'memory': the costs are training_seconds, seconds_per_step, examples_per_second, "
       "parameters, peak_gpu_memory; study quickstart: it recorded training_seconds, seconds_per_step"},
      {"--pareto peak_gpu_memory",
       "--pareto peak_gpu_memory: not recorded in study quickstart: no trial recorded a GPU's peak memory (a study on "
       "the CPU has none); it recorded training_seconds, seconds_per_step"},
      {"--pareto training_seconds --format csv", "--pareto prints text or --format json, not csv"},
      {"3 --pareto training_seconds", "--pareto is a study's: leave out TRIAL and --spec"},
  };
  for (const auto& [arguments, expected] : mistakes) {
    const auto result = RunDltune("show quickstart " + arguments + storage);
    EXPECT_EQ(result.exit_code, 2) << arguments;
    EXPECT_THAT(result.err, HasSubstr(expected)) << arguments;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  dltune::RemoveTree(dir);
}

}  // namespace
}  // namespace dltune
