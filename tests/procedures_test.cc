// Procedures between studies as a user runs them: a study on Fashion-MNIST, its best configurations retrained from
// several seeds (dltune plan retrain), the statistics checked against an independent script, the best launched and
// its exported model read from Python; and round 2 of a study whose learning rates follow the playbook's rule.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/eval_schedule.h"
#include "core/schedule.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/instability.h"
#include "dltune/analyze/step_budget.h"
#include "dltune/analyze/throughput.h"
#include "dltune/analyze/trial_variance.h"
#include "dltune/report/study_data.h"
#include "dltune/run/study_session.h"
#include "dltune/store/store.h"
#include "own_directory.h"

namespace dltune {
namespace {

using test::Result;
using test::Slurp;
using ::testing::HasSubstr;

class Procedures : public test::InOwnDirectory {
 protected:
  Procedures() : InOwnDirectory("procedures") {}

  std::string StoreUrl() const { return "sqlite://" + (dir_ / "dltune.db").string(); }
  Result Dltune(const std::string& arguments) { return test::RunDltune(arguments + " --storage " + StoreUrl(), dir_); }
  // Runs a shell command in the test's directory; returns its exit status and stdout.
  Result Shell(const std::string& command) {
    const std::string full = "cd '" + dir_.string() + "' && " + command + " > shell.out 2> shell.err";
    const int status = std::system(full.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(dir_ / "shell.out"), Slurp(dir_ / "shell.err")};
  }
  std::filesystem::path Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  std::int64_t EvalRows(Store& store, const std::string& study) {
    return static_cast<std::int64_t>(store.StudyEvaluations(store.FindStudy(study)->id).size());
  }

  // From `dltune export STUDY --what measurements`: per trial, the first step at which split/metric <= threshold.
  std::map<std::uint64_t, std::int64_t> FirstFitSteps(const std::string& study, const std::string& split,
                                                      const std::string& metric, double threshold) {
    const Result exported = Dltune("export " + study + " --what measurements --format json");
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    std::map<std::uint64_t, std::int64_t> first;
    for (const auto& row : nlohmann::json::parse(exported.out)) {
      if (row.at("split") != split || row.at("metric") != metric || row.at("value").get<double>() > threshold) continue;
      const auto trial = row.at("trial").get<std::uint64_t>();
      const auto step = row.at("step").get<std::int64_t>();
      if (first.count(trial) == 0 || step < first[trial]) first[trial] = step;
    }
    return first;
  }
  // The analysis's first fitting step of every trial that has one.
  static std::map<std::uint64_t, std::int64_t> FirstFitSteps(const StepBudget& budget) {
    std::map<std::uint64_t, std::int64_t> first;
    for (const FitRow& row : budget.rows) {
      if (row.first_fit_step) first[row.trial] = *row.first_fit_step;
    }
    return first;
  }
};

// A quickstart-sized study (two optimizers, their learning rates tuned) → its best configurations retrained 5
// times each → the best mean launched.
TEST_F(Procedures, RetrainThenLaunchOnFashionMnist) {
  Write("parent.yaml", R"(name: parent
workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [64]}}
max_train_steps: 300
training: {eval_every_steps: 100, train_eval_examples: 2000}
trials: 3
space:
  optimizer: {values: [nesterov, adam], role: scientific}
  nesterov_learning_rate: {name: learning_rate, when: {optimizer: nesterov}, min: 0.01, max: 0.3, scale: log}
  adam_learning_rate: {name: learning_rate, when: {optimizer: adam}, min: 0.0003, max: 0.01, scale: log}
  batch_size: 64
)");
  {
    // A parent made but not run yet has nothing to retrain.
    auto store = OpenStore(StoreUrl());
    (void)StudySession::OpenOrCreate(*store, LoadStudySpec((dir_ / "parent.yaml").string()), "");
  }
  const Result early = Dltune("plan retrain --from parent --replicas 5");
  EXPECT_EQ(early.exit_code, 2);
  EXPECT_THAT(early.err, HasSubstr("has no completed trial with an objective yet"));
  ASSERT_EQ(Dltune("run parent.yaml --parallel 2 --no-report").exit_code, 0);

  // Bad requests are one line and exit status 2.
  const Result unknown = Dltune("plan retrain --from nosuch --replicas 5");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("no study named 'nosuch'"));
  const Result one = Dltune("plan retrain --from parent --replicas 1");
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_THAT(one.err, HasSubstr("--replicas must be 2 or more"));

  const Result planned = Dltune("plan retrain --from parent --replicas 5 -o retrain.yaml --name retrain");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_THAT(planned.out, HasSubstr("2 configurations × 5 replicas = 10 trials"));
  const std::string spec = Slurp(dir_ / "retrain.yaml");
  // The same command on the same records writes the same bytes.
  const Result again = Dltune("plan retrain --from parent --replicas 5 -o retrain.yaml --name retrain");
  EXPECT_THAT(again.out, HasSubstr("is up to date"));
  EXPECT_EQ(Slurp(dir_ / "retrain.yaml"), spec);
  // A spec edited since is kept, unless --force.
  Write("edited.yaml", spec + "# my note\n");
  const Result kept = Dltune("plan retrain --from parent --replicas 5 -o edited.yaml --name retrain");
  EXPECT_EQ(kept.exit_code, 2);
  EXPECT_THAT(kept.err, HasSubstr("pass --force to replace it"));
  EXPECT_EQ(Slurp(dir_ / "edited.yaml"), spec + "# my note\n");

  ASSERT_EQ(Dltune("run retrain.yaml --parallel 2 --no-report").exit_code, 0);
  auto store = OpenStore(StoreUrl());
  const StudyData parent = LoadStudyData(*store, "parent");
  const StudyData retrain = LoadStudyData(*store, "retrain");
  ASSERT_EQ(retrain.trials.size(), 10u);
  ASSERT_EQ(retrain.parent_trials.size(), 2u);

  // Replica 0 of each configuration trained with its parent trial's seed: the same run, bit for bit.
  for (const TrialRecord& trial : retrain.trials) {
    if (trial.replica != 0) continue;
    const auto& from = retrain.spec.procedure.from_trials.at(trial.configuration);
    const TrialRecord& original = *std::find_if(parent.trials.begin(), parent.trials.end(),
                                                [&](const TrialRecord& t) { return t.number == from.trial; });
    EXPECT_EQ(trial.seed, original.seed);
    ASSERT_TRUE(trial.best_value && original.best_value);
    EXPECT_EQ(*trial.best_value, *original.best_value) << "configuration " << trial.configuration;
    EXPECT_EQ(trial.best_step, original.best_step);
    const auto& ours = retrain.evals.at(trial.number);
    const auto& theirs = parent.evals.at(original.number);
    ASSERT_EQ(ours.size(), theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(ours[i].value, theirs[i].value) << ours[i].metric;
  }
  // Replica r of every configuration shares a seed; replicas differ.
  for (const TrialRecord& a : retrain.trials) {
    for (const TrialRecord& b : retrain.trials) {
      if (a.replica > 0 && a.replica == b.replica) {
        EXPECT_EQ(a.seed, b.seed);
      }
      if (a.configuration == b.configuration && a.replica != b.replica) {
        EXPECT_NE(a.seed, b.seed);
      }
    }
  }

  // The statistics match tools/trial_variance_reference.py (numpy and scipy) on the exported records.
  ASSERT_EQ(Dltune("export retrain --format json -o trials.json").exit_code, 0);
  const Result reference =
      Shell(std::string("/usr/bin/python3 ") + DLTUNE_SOURCE_DIR + "/tools/trial_variance_reference.py trials.json");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const nlohmann::json expected = nlohmann::json::parse(reference.out);
  const TrialVariance variance = AnalyzeTrialVariance(retrain);
  ASSERT_EQ(variance.configurations.size(), 2u);
  for (const ConfigurationReplicas& c : variance.configurations) {
    const auto& e = expected.at("configurations").at(std::to_string(c.configuration));
    EXPECT_EQ(c.stats.n, e.at("n").get<int>());
    EXPECT_NEAR(c.stats.mean, e.at("mean").get<double>(), 1e-12);
    EXPECT_NEAR(*c.stats.sd, e.at("sd").get<double>(), 1e-12);
    EXPECT_NEAR(*c.stats.low, e.at("low").get<double>(), 1e-9 * std::fabs(e.at("low").get<double>()) + 1e-12);
    EXPECT_NEAR(*c.stats.high, e.at("high").get<double>(), 1e-9 * std::fabs(e.at("high").get<double>()) + 1e-12);
  }
  EXPECT_NEAR(*variance.pooled_sd, expected.at("pooled_sd").get<double>(), 1e-12);
  ASSERT_EQ(variance.comparisons.size(), 1u);
  const auto& comparison = expected.at("comparisons").at(0);
  EXPECT_EQ(variance.comparisons[0].better, comparison.at("better").get<std::uint64_t>());
  EXPECT_NEAR(variance.comparisons[0].advantage.mean, comparison.at("advantage").at("mean").get<double>(), 1e-12);
  EXPECT_NEAR(*variance.comparisons[0].advantage.low, comparison.at("advantage").at("low").get<double>(), 1e-9);

  // What to do next: the lineage is read from the parent to the study planned from it, where the step is.
  EXPECT_THAT(Dltune("next parent").out, HasSubstr("study retrain: "));

  // The report and doctor say what the replicas show.
  const Result doctor = Dltune("doctor retrain");
  EXPECT_THAT(doctor.out, HasSubstr("run-to-run noise"));
  EXPECT_THAT(Dltune("show retrain").out, HasSubstr("(95% CI, 5 replicas)"));

  // Launch: the best mean's median replica, evaluated once on the test split, exported.
  const Result launched = Dltune("launch retrain --reason 'retrained: the better optimizer'");
  ASSERT_EQ(launched.exit_code, 0) << launched.err;
  const auto launches = store->ListLaunches(store->FindStudy("retrain")->id);
  ASSERT_EQ(launches.size(), 1u);
  const LaunchRecord& launch = launches.front();
  const auto best =
      std::find_if(variance.configurations.begin(), variance.configurations.end(),
                   [&](const ConfigurationReplicas& c) { return c.configuration == *variance.best_configuration; });
  EXPECT_EQ(launch.evaluation.trial, *best->median_trial);
  EXPECT_EQ(launch.evaluation.split, "test");
  EXPECT_EQ(launch.evaluation.examples, 10000);

  // The same numbers from `dltune train` of that configuration and seed, stopped at the best step, evaluated on test,
  // with the trial's one thread (a short study's layout; sums over more threads round differently).
  const TrialRecord& chosen = *std::find_if(retrain.trials.begin(), retrain.trials.end(),
                                            [&](const TrialRecord& t) { return t.number == launch.evaluation.trial; });
  const std::string learning_rate = [&] {
    for (const auto& [id, value] : chosen.params) {
      if (id.find("learning_rate") != std::string::npos) return FormatValue(value);
    }
    return std::string();
  }();
  const std::string train = fmt::format(
      "train fashion_mnist_mlp --set 'hidden_sizes=[64]' --set batch_size=64 --set optimizer={} --set "
      "learning_rate={} --steps {} --seed {} --eval-every 100 --train-eval-examples 2000 --threads 1 --test --out "
      "again",
      std::get<std::string>(chosen.params.at("optimizer")), learning_rate, launch.evaluation.step, chosen.seed);
  const Result trained = test::RunDltune(train, dir_);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  std::map<std::string, double> test_metrics;
  std::ifstream metrics(dir_ / "again" / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.at("type") == "eval" && record.at("split") == "test") {
      test_metrics[record.at("metric").get<std::string>()] = record.at("value").get<double>();
    }
  }
  for (const char* metric : {"loss", "error_rate", "accuracy"}) {
    EXPECT_EQ(launch.evaluation.metrics.at(metric), test_metrics.at(metric)) << metric;
  }

  // Python reads the exported model and predicts the same classes: as many test images right.
  const Result python = Shell(std::string("/usr/bin/python3 -c \"") +
                              "import gzip, numpy as np, torch\n"
                              "def idx(p, off): return np.frombuffer(gzip.open(p).read(), np.uint8, offset=off)\n"
                              "d='/usr/share/datasets/fashion-mnist/'\n"
                              "x=torch.from_numpy(idx(d+'t10k-images-idx3-ubyte.gz',16).reshape(-1,1,28,28)"
                              ".astype(np.float32)/255)\n"
                              "y=torch.from_numpy(idx(d+'t10k-labels-idx1-ubyte.gz',8).astype(np.int64))\n"
                              "m=torch.jit.load('" +
                              launch.export_path +
                              "')\n"
                              "with torch.no_grad(): p=m(x).argmax(1)\n"
                              "print(int((p==y).sum()))\"");
  ASSERT_EQ(python.exit_code, 0) << python.err;
  EXPECT_EQ(std::stoll(python.out), std::llround(launch.evaluation.metrics.at("accuracy") * 10000));

  // Running or launching again adds nothing: the study is finished, the test set was seen.
  const std::int64_t rows = EvalRows(*store, "retrain");
  EXPECT_EQ(Dltune("run retrain.yaml --no-report").exit_code, 0);
  EXPECT_EQ(store->ListTrials(store->FindStudy("retrain")->id).size(), 10u);
  EXPECT_EQ(EvalRows(*store, "retrain"), rows);
  const Result second = Dltune("launch retrain --reason again");
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_THAT(second.err, HasSubstr("--again"));
  EXPECT_EQ(store->ListLaunches(store->FindStudy("retrain")->id).size(), 1u);
  EXPECT_THAT(Dltune("studies --tree").out, HasSubstr("└─ retrain (retrain)"));

  // A step budget for the same model: the constant learning-rate sweep's first fitting steps agree with the
  // exported measurements.
  const Result fit = Dltune(
      "plan fit-steps --from parent --fit 'train/error_rate<=0.2' --steps 300 --eval-every 10 "
      "--learning-rates 0.003:0.3:5 -o fit.yaml");
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  ASSERT_EQ(Dltune("run fit.yaml --parallel 2 --no-report").exit_code, 0);
  const StudyData swept = LoadStudyData(*store, "parent-fit-steps");
  const StepBudget budget = AnalyzeStepBudget(swept);
  ASSERT_EQ(budget.rows.size(), 5u);
  const auto expected_steps = FirstFitSteps("parent-fit-steps", "train", "error_rate", 0.2);
  ASSERT_FALSE(expected_steps.empty());
  EXPECT_EQ(FirstFitSteps(budget), expected_steps);
  std::int64_t fastest = std::numeric_limits<std::int64_t>::max();
  for (const auto& [trial, step] : expected_steps) fastest = std::min(fastest, step);
  EXPECT_EQ(budget.candidate_steps, std::optional<std::int64_t>(fastest));
  // The batch-size sweep of the same model: its numbers are the exported measurements' (median step time after the
  // warm-up fifth, examples per second from it).
  ASSERT_EQ(Dltune("plan throughput --from parent --batch-sizes 16:128 --steps 20 -o throughput.yaml").exit_code, 0);
  ASSERT_EQ(Dltune("run throughput.yaml --no-report").exit_code, 0);
  const Throughput throughput = AnalyzeThroughput(LoadStudyData(*store, "parent-throughput"));
  ASSERT_EQ(throughput.rows.size(), 4u);
  const Result measured = Dltune("export parent-throughput --what measurements --format json");
  std::map<std::uint64_t, std::vector<double>> times;
  for (const auto& row : nlohmann::json::parse(measured.out)) {
    if (row.at("split") == "train_step" && row.at("metric") == "step_time") {
      times[row.at("trial").get<std::uint64_t>()].push_back(row.at("value").get<double>());
    }
  }
  for (const ThroughputRow& row : throughput.rows) {
    // Each batch size measured twice (two rounds over the sizes): the median of each measurement's median.
    ASSERT_EQ(row.trials.size(), 2u);
    std::vector<double> medians;
    for (const std::uint64_t trial : row.trials) {
      std::vector<double> after(times.at(trial).begin() + 4, times.at(trial).end());  // 20 steps: 4 warm-up
      std::sort(after.begin(), after.end());
      medians.push_back((after[after.size() / 2 - 1] + after[after.size() / 2]) / 2);
    }
    const double median = (medians[0] + medians[1]) / 2;
    EXPECT_EQ(row.measured_steps, 32);
    EXPECT_NEAR(*row.step_time, median, 1e-12 * median) << row.batch_size;
    EXPECT_NEAR(*row.examples_per_second, static_cast<double>(row.batch_size) / median,
                1e-9 * *row.examples_per_second);
  }

  for (const auto& [id, value] : swept.trials.front().params) {
    if (id == "weight_decay") {
      EXPECT_EQ(std::get<double>(value), 0.0);  // no regularization
    }
  }
}

// The playbook's step budget on the synthetic workload, evaluated every step: the first step each learning rate fits
// the training set is exact, the fastest is the candidate, and a sweep whose fastest is its highest says so.
TEST_F(Procedures, FitStepsFindsTheFirstStepThatFitsTheTrainingSet) {
  Write("base.yaml", R"(name: base
workload: {name: synthetic, args: {hidden_sizes: [16]}}
max_train_steps: 60
trials: 2
space:
  learning_rate: {min: 0.01, max: 0.3, scale: log}
  optimizer: nesterov
  weight_decay: 0.001
  batch_size: 32
)");
  ASSERT_EQ(Dltune("run base.yaml --no-report").exit_code, 0);
  const Result bad = Dltune("plan fit-steps --from base --fit 'train/error_rate<0.05' --steps 200");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--fit must be split/metric<=value"));
  const Result planned = Dltune(
      "plan fit-steps --from base --fit 'train/error_rate<=0.06' --steps 200 --eval-every 1 --learning-rates "
      "0.01,0.03,0.1,0.3");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const std::string spec = Slurp(dir_ / "base-fit-steps.yaml");
  EXPECT_THAT(spec, HasSubstr("learning_rate: {values: [0.01, 0.03, 0.1, 0.3]}"));
  EXPECT_THAT(spec, HasSubstr("weight_decay: 0.0"));
  EXPECT_THAT(spec, HasSubstr("eval_every_steps: 1"));
  ASSERT_EQ(Dltune("run base-fit-steps.yaml --no-report").exit_code, 0);
  auto store = OpenStore(StoreUrl());
  const StudyData data = LoadStudyData(*store, "base-fit-steps");
  const StepBudget budget = AnalyzeStepBudget(data);
  ASSERT_EQ(budget.rows.size(), 4u);
  EXPECT_EQ(FirstFitSteps(budget), FirstFitSteps("base-fit-steps", "train", "error_rate", 0.06));
  // Evaluated every step: the first fitting step is the step itself, not an evaluation interval's end.
  for (const FitRow& row : budget.rows) {
    if (!row.first_fit_step) continue;
    for (const EvalMeasurement& e : data.evals.at(row.trial)) {
      if (e.split == "train" && e.metric == "error_rate" && e.step == *row.first_fit_step - 1) {
        EXPECT_GT(e.value, 0.06);
      }
    }
  }
  ASSERT_TRUE(budget.candidate_steps);
  const Result doctor = Dltune("doctor base-fit-steps");
  EXPECT_THAT(doctor.out, HasSubstr(fmt::format("Candidate max_train_steps: {}", *budget.candidate_steps)));
  EXPECT_EQ(budget.at_edge, doctor.out.find("at the edge") != std::string::npos ||
                                doctor.out.find("of the sweep") != std::string::npos);
  const Result report = Dltune("report base-fit-steps -o fit.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(Slurp(dir_ / "fit.html"), HasSubstr("Steps to fit the training set"));
}

// The batch-size sweep of a spec file whose trial program has a known knee (tests/fixtures/throughput_trial.py): 10 ms
// per step up to batch size 128, then no gain, and out of memory from 1024. The sweep finds the knee exactly and stops
// at the first batch size out of memory.
TEST_F(Procedures, ThroughputFindsTheKneeAndStopsAtTheFirstOutOfMemory) {
  Write("scripted.yaml", std::string("name: scripted\ncommand: /usr/bin/python3 ") + DLTUNE_SOURCE_DIR +
                             "/tests/fixtures/throughput_trial.py\nmax_train_steps: 100\nspace:\n"
                             "  learning_rate: {min: 0.01, max: 0.1, scale: log}\n  batch_size: 32\n");
  const Result bad = Dltune("plan throughput --from scripted.yaml --batch-sizes 4096:16");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--batch-sizes 4096:16: needs 1 <= LOW <= HIGH"));
  const Result planned = Dltune("plan throughput --from scripted.yaml --batch-sizes 16:4096 --steps 20");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  // At the space's lowest learning rate, not its first quasi-random one: a speed measurement must not diverge.
  EXPECT_THAT(Slurp(dir_ / "scripted-throughput.yaml"), HasSubstr("learning_rate: 0.01"));
  EXPECT_THAT(planned.out, HasSubstr("9 batch sizes × 20 steps"));
  const std::string spec = Slurp(dir_ / "scripted-throughput.yaml");
  EXPECT_THAT(spec, HasSubstr("batch_size: {values: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]}"));
  EXPECT_THAT(spec, HasSubstr("log_every_steps: 1"));
  const Result run = Dltune("run scripted-throughput.yaml --no-report");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;

  auto store = OpenStore(StoreUrl());
  const StudyData data = LoadStudyData(*store, "scripted-throughput");
  const Throughput throughput = AnalyzeThroughput(data);
  ASSERT_EQ(throughput.rows.size(), 9u);
  EXPECT_EQ(throughput.perfect_until, std::optional<std::int64_t>(128));
  EXPECT_EQ(throughput.worth_using, std::optional<std::int64_t>(128));
  EXPECT_EQ(throughput.first_out_of_memory, std::optional<std::int64_t>(1024));
  EXPECT_NEAR(*throughput.rows[0].step_time, 0.010, 1e-12);  // the slow first steps left out as warm-up
  EXPECT_EQ(throughput.rows[0].repeats, 2);                  // measured in two rounds over the batch sizes
  EXPECT_EQ(throughput.rows[0].trials, (std::vector<std::uint64_t>{0, 9}));
  EXPECT_NEAR(*throughput.rows[0].repeat_spread, 0.0, 1e-12);
  EXPECT_NEAR(*throughput.rows[4].efficiency, 0.5, 1e-9);  // 256: twice the time per step, no gain
  for (const ThroughputRow& row : throughput.rows) {
    if (row.batch_size < 1024) continue;
    EXPECT_EQ(row.state, TrialState::kInfeasible);
    if (row.batch_size > 1024) {
      EXPECT_THAT(row.reason, HasSubstr("not run: batch size 1024 already ran out of memory"));
      EXPECT_TRUE(store->TrainSeries(store->FindTrial(data.study.id, row.trial)->id).empty());  // never started
    }
  }
  EXPECT_THAT(Dltune("doctor scripted-throughput").out,
              HasSubstr("Batch sizes up to 128 pay; perfect scaling up to 128"));
  const Result report = Dltune("report scripted-throughput -o throughput.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string page = Slurp(dir_ / "throughput.html");
  EXPECT_THAT(page, HasSubstr("Throughput: which batch sizes pay?"));
  // Speed, not validation quality: no best trials, no axis or isolation plots of batch size against the error.
  EXPECT_THAT(page, ::testing::Not(HasSubstr("href=\"#best-trials\"")));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("href=\"#axis-plots\"")));
  EXPECT_THAT(page, HasSubstr("at most 128, the largest whose doubling still paid"));
  EXPECT_THAT(page, HasSubstr("recommended batch size 128"));
  EXPECT_THAT(page, HasSubstr("Time for a million training examples: 16: 625 s, 32: 312 s"));

  // On a busy machine the step times turn bimodal: no batch size is recommended from them.
  ASSERT_EQ(Dltune("plan throughput --from scripted.yaml --batch-sizes 16:256 --steps 20 --name noisy").exit_code, 0);
  const Result noisy =
      test::RunDltune("run noisy.yaml --no-report --storage " + StoreUrl(), dir_, "THROUGHPUT_TRIAL_BIMODAL=1");
  ASSERT_EQ(noisy.exit_code, 0) << noisy.out << noisy.err;
  const Throughput busy = AnalyzeThroughput(LoadStudyData(*store, "noisy"));
  EXPECT_THAT(busy.untrustworthy, HasSubstr("at batch size 64"));
  EXPECT_FALSE(busy.worth_using);
  const std::string doctor = Dltune("doctor noisy").out;
  EXPECT_THAT(doctor, HasSubstr("cannot be trusted: no batch size is recommended"));
  EXPECT_THAT(doctor, ::testing::Not(HasSubstr("Batch sizes up to")));

  // A machine that got busy between the two rounds: each round alone is steady, the repeats disagree.
  ASSERT_EQ(Dltune("plan throughput --from scripted.yaml --batch-sizes 16:256 --steps 20 --name drift").exit_code, 0);
  ASSERT_EQ(
      test::RunDltune("run drift.yaml --no-report --storage " + StoreUrl(), dir_, "THROUGHPUT_TRIAL_DRIFT=5").exit_code,
      0);
  const Throughput drift = AnalyzeThroughput(LoadStudyData(*store, "drift"));
  EXPECT_THAT(drift.untrustworthy, HasSubstr("at batch size 16 the 2 measurements' median step times differ by"));
  EXPECT_FALSE(drift.worth_using);
}

// Round 2 on the synthetic workload: every recorded learning rate is the playbook's round-2 extension of round 1's
// schedule (a linear decay keeps its length; warmup keeps its steps).
TEST_F(Procedures, Round2LearningRatesFollowTheExtensionRule) {
  Write("round1.yaml", R"(name: round1
workload: {name: synthetic, args: {hidden_sizes: [16]}}
max_train_steps: 100
training: {eval_every_steps: 25}
trials: 3
space:
  learning_rate: {min: 0.01, max: 0.2, scale: log}
  schedule: linear
  warmup_steps: 10
  decay_steps: {values: [30, 60]}
  optimizer: nesterov
  batch_size: 32
)");
  ASSERT_EQ(Dltune("run round1.yaml --no-report").exit_code, 0);
  const Result planned = Dltune("plan round2 --from round1 --top 2 --steps 3x");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_THAT(Slurp(dir_ / "round1-round2.yaml"), HasSubstr("max_train_steps: 300"));
  EXPECT_THAT(Slurp(dir_ / "round1-round2.yaml"), HasSubstr("eval_every_steps: 75"));
  ASSERT_EQ(Dltune("run round1-round2.yaml --no-report").exit_code, 0);

  auto store = OpenStore(StoreUrl());
  const StudyData round1 = LoadStudyData(*store, "round1");
  const StudyData round2 = LoadStudyData(*store, "round1-round2");
  ASSERT_EQ(round2.trials.size(), 2u);
  for (const TrialRecord& trial : round2.trials) {
    const auto& from = round2.spec.procedure.from_trials.at(trial.configuration);
    const TrialRecord& original = *std::find_if(round1.trials.begin(), round1.trials.end(),
                                                [&](const TrialRecord& t) { return t.number == from.trial; });
    ScheduleOptions before{.kind = "linear",
                           .base_learning_rate = std::get<double>(original.params.at("learning_rate")),
                           .warmup_steps = 10,
                           .decay_steps = std::get<std::int64_t>(original.params.at("decay_steps")),
                           .max_train_steps = 100};
    const ScheduleOptions after = ExtendForRound2(before, 300);
    EXPECT_EQ(after.decay_steps, before.decay_steps);  // linear: the decay keeps its length
    const auto& steps = round2.train.at(trial.number);
    ASSERT_EQ(steps.size(), 300u);
    for (const TrainMeasurement& m : steps) {
      ASSERT_TRUE(m.learning_rate);
      // Measurement `step` is after update step - 1.
      EXPECT_EQ(*m.learning_rate, LearningRate(after, m.step - 1)) << "trial " << trial.number << " step " << m.step;
    }
  }
  EXPECT_THAT(Dltune("doctor round1-round2").out, HasSubstr("round1"));
  const Result report = Dltune("report round1-round2 -o round2.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(Slurp(dir_ / "round2.html"), HasSubstr("Spearman rank correlation"));

  const Result compared = Dltune("compare round1 round1-round2 -o compare.html");
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_THAT(compared.out, HasSubstr("best of 2 trials"));
  EXPECT_THAT(Slurp(dir_ / "compare.html"), HasSubstr("Training curves, overlaid"));
}

// The playbook's instability procedure on Fashion-MNIST: a cosine baseline → its best configuration probed at 2x, 5x
// and 10x its learning rate (every recorded learning rate, budget and evaluation step exact) → a warmup study at 10x
// the unstable rate (each trial warmup x 3 steps, its ramp exact) → the warmup prepended to the baseline (the
// baseline's own schedule, shifted by the warmup, exact at every step).
TEST_F(Procedures, InstabilityProbeThenWarmupThenApplyOnFashionMnist) {
  Write("base.yaml", R"(name: base
workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [64]}}
max_train_steps: 300
training: {eval_every_steps: 100, train_eval_examples: 2000}
trials: 3
space:
  optimizer: nesterov
  learning_rate: {min: 0.03, max: 0.3, scale: log}
  one_minus_momentum: 0.1
  schedule: cosine
  batch_size: 64
)");
  ASSERT_EQ(Dltune("run base.yaml --parallel 2 --no-report").exit_code, 0);
  const Result not_probe = Dltune("plan warmup --from base");
  EXPECT_EQ(not_probe.exit_code, 2);
  EXPECT_THAT(not_probe.err, HasSubstr("is not an instability probe"));
  const Result bad = Dltune("plan instability --from base --multipliers 2,x");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--multipliers: 'x' is not a positive number"));
  const Result not_warmup = Dltune("plan apply-warmup --from base");
  EXPECT_EQ(not_warmup.exit_code, 2);
  EXPECT_THAT(not_warmup.err, HasSubstr("is not a warmup study"));

  const Result planned = Dltune("plan instability --from base --steps 100");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  ASSERT_EQ(Dltune("run base-instability.yaml --parallel 2 --no-report").exit_code, 0);
  auto store = OpenStore(StoreUrl());
  const StudyData base = LoadStudyData(*store, "base");
  const StudyData probe_data = LoadStudyData(*store, "base-instability");
  const InstabilityProbe probe = AnalyzeInstabilityProbe(probe_data);
  ASSERT_EQ(probe.rows.size(), 3u);
  EXPECT_TRUE(probe.finished);
  const TrialRecord& best = *std::find_if(base.trials.begin(), base.trials.end(), [&](const TrialRecord& t) {
    return t.number == probe_data.spec.procedure.from_trials.at(0).trial;
  });
  const double best_rate = std::get<double>(best.params.at("learning_rate"));
  EXPECT_EQ(probe.base_learning_rate, best_rate);
  const EvalSchedule dense = EvalSchedule::Parse("log:60");
  const double multipliers[] = {2, 5, 10};
  for (std::size_t i = 0; i < 3; ++i) {
    const ProbeRow& row = probe.rows[i];
    const TrialRecord& trial = probe_data.trials.at(row.trial);
    EXPECT_EQ(row.learning_rate, multipliers[i] * best_rate);
    EXPECT_EQ(trial.seed, best.seed);  // every run from the best trial's seed: only the learning rate differs
    ASSERT_TRUE(row.verdict);
    // A constant learning rate at every recorded step, every step recorded.
    const auto& steps = probe_data.train.at(row.trial);
    for (std::size_t k = 0; k < steps.size(); ++k) {
      EXPECT_EQ(steps[k].step, static_cast<std::int64_t>(k) + 1);
      EXPECT_EQ(*steps[k].learning_rate, row.learning_rate) << "step " << steps[k].step;
    }
    if (trial.state != TrialState::kCompleted) continue;
    EXPECT_EQ(steps.size(), 100u);  // the abbreviated budget
    // Evaluations at exactly the log-spaced steps (of the sample of valid; the full split at the last).
    std::vector<std::int64_t> evaluated, expected;
    for (const EvalMeasurement& m : probe_data.evals.at(row.trial)) {
      if (m.split == "train" && m.metric == "loss") evaluated.push_back(m.step);
    }
    for (std::int64_t step = 1; step <= 100; ++step) {
      if (dense.Evaluates(step, 10, 100)) expected.push_back(step);
    }
    EXPECT_EQ(evaluated, expected);
    EXPECT_GT(expected.size(), 30u);
  }
  ASSERT_TRUE(probe.unstable_learning_rate) << "10x the best learning rate trained stably";
  EXPECT_THAT(Dltune("doctor base-instability").out, HasSubstr("Training becomes unstable at"));
  EXPECT_THAT(Dltune("next base-instability").out, HasSubstr("dltune plan warmup --from base-instability"));

  // Past a tenth of max_train_steps (30 of 300) is not warmup by the playbook: refused.
  const Result too_long = Dltune("plan warmup --from base-instability --warmup-steps 10,31");
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_THAT(too_long.err, HasSubstr("longer than a tenth of the baseline's max_train_steps (30 of 300)"));
  // The warmup study: every trial at 10x the unstable rate, warmup_steps {10, 30} (a tenth of 300), 3 x W steps.
  const Result warmup_planned = Dltune("plan warmup --from base-instability");
  ASSERT_EQ(warmup_planned.exit_code, 0) << warmup_planned.err;
  ASSERT_EQ(Dltune("run base-instability-warmup.yaml --parallel 2 --no-report").exit_code, 0);
  const StudyData warmup_data = LoadStudyData(*store, "base-instability-warmup");
  const WarmupStudy warmup = AnalyzeWarmup(warmup_data);
  ASSERT_EQ(warmup.rows.size(), 2u);
  EXPECT_EQ(warmup.learning_rate, 10 * *probe.unstable_learning_rate);
  EXPECT_EQ(warmup.baseline_steps, 300);
  for (const WarmupRow& row : warmup.rows) {
    const TrialRecord& trial = warmup_data.trials.at(row.trial);
    EXPECT_EQ(row.steps, 3 * row.warmup_steps);
    std::filesystem::path trial_json;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_ / "runs" / "base-instability-warmup")) {
      if (entry.path().filename() == "trial.json" &&
          entry.path().parent_path().filename() == "trial_" + std::to_string(trial.number)) {
        trial_json = entry.path();
      }
    }
    ASSERT_FALSE(trial_json.empty());
    const nlohmann::json description = nlohmann::json::parse(Slurp(trial_json));
    EXPECT_EQ(description.at("max_train_steps").get<std::int64_t>(), 3 * row.warmup_steps);
    const ScheduleOptions ramp{.kind = "constant",
                               .base_learning_rate = warmup.learning_rate,
                               .warmup_steps = row.warmup_steps,
                               .max_train_steps = row.steps};
    const auto& steps = warmup_data.train.at(row.trial);
    ASSERT_FALSE(steps.empty());
    for (const TrainMeasurement& m : steps) {
      EXPECT_EQ(*m.learning_rate, LearningRate(ramp, m.step - 1))
          << "warmup " << row.warmup_steps << " step " << m.step;
    }
    if (trial.state == TrialState::kCompleted) {
      EXPECT_EQ(steps.back().step, row.steps);
    }
  }
  const Result shown = Dltune("doctor base-instability-warmup");
  EXPECT_THAT(shown.out, HasSubstr(warmup.shortest_stable ? "steps of warmup train stably" : "No warmup up to"));
  if (!warmup.shortest_stable) {
    const Result none = Dltune("plan apply-warmup --from base-instability-warmup");
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_THAT(none.err, HasSubstr("trained stably"));
  }

  // The warmup prepended to the baseline: 300 + 10 steps, and after the ramp the baseline's cosine exactly.
  const Result applied = Dltune("plan apply-warmup --from base-instability-warmup --warmup-steps 10");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  const std::string spec = Slurp(dir_ / "base-warmup10.yaml");
  EXPECT_THAT(spec, HasSubstr("max_train_steps: 310"));
  ASSERT_EQ(Dltune("run base-warmup10.yaml --no-report").exit_code, 0);
  const StudyData applied_data = LoadStudyData(*store, "base-warmup10");
  ASSERT_EQ(applied_data.trials.size(), 1u);
  const auto& after = applied_data.train.at(0);
  const auto& before = base.train.at(best.number);
  ASSERT_EQ(after.size(), 310u);
  ASSERT_EQ(before.size(), 300u);
  for (const TrainMeasurement& m : after) {
    if (m.step <= 10) {
      EXPECT_EQ(*m.learning_rate, best_rate * static_cast<double>(m.step - 1) / 10) << "step " << m.step;
    } else {
      EXPECT_EQ(*m.learning_rate, *before.at(static_cast<std::size_t>(m.step - 11)).learning_rate) << "step " << m.step;
    }
  }
  EXPECT_THAT(Dltune("studies --tree").out, HasSubstr("base-instability-warmup (warmup)"));
  const Result report = Dltune("report base-instability -o probe.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(Slurp(dir_ / "probe.html"), HasSubstr("step (log scale)"));
}

// A baseline with a scientific hyperparameter: the warmup study and apply-warmup take its best configuration, with
// its scientific value, as one study (they used to refuse it: "sampler makes no trial for sub-study num_layers=2").
TEST_F(Procedures, ApplyWarmupKeepsTheScientificValueOfTheConfiguration) {
  Write("depth.yaml", R"(name: depth
workload: synthetic
max_train_steps: 200
training: {eval_every_steps: 50}
trials: 2
space:
  num_layers: {values: [1, 2], role: scientific}
  optimizer: nesterov
  learning_rate: {min: 0.01, max: 0.3, scale: log}
  one_minus_momentum: 0.1
  batch_size: 32
)");
  ASSERT_EQ(Dltune("run depth.yaml --no-report").exit_code, 0);
  ASSERT_EQ(Dltune("plan warmup --from depth --unstable-lr 0.5").exit_code, 0);
  ASSERT_EQ(Dltune("run depth-warmup.yaml --no-report").exit_code, 0);
  const Result applied = Dltune("plan apply-warmup --from depth-warmup --warmup-steps 10");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  // A warmup given by hand is said to be so, never "found stable" by the study.
  const std::string written =  // the spec's header comment as one line
      std::regex_replace(Slurp(dir_ / "depth-warmup10.yaml"), std::regex("\n# ?"), " ");
  EXPECT_THAT(written, HasSubstr("A warmup of 10 steps, given by --warmup-steps (study depth-warmup found"));
  EXPECT_THAT(written, ::testing::Not(HasSubstr("the shortest warmup study depth-warmup found stable")));
  const Result ran = Dltune("run depth-warmup10.yaml --no-report");
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  const auto store = OpenStore(StoreUrl());
  const StudyData depth = LoadStudyData(*store, "depth");
  const StudyData applied_data = LoadStudyData(*store, "depth-warmup10");
  ASSERT_EQ(applied_data.trials.size(), 1u);
  const std::uint64_t baseline_trial = applied_data.spec.procedure.from_trials.at(0).trial;
  const auto by_name = [](const StudyData& data, const TrialRecord& trial) {
    return ParamsByName(*data.spec.space, trial.params);
  };
  EXPECT_EQ(FormatValue(by_name(applied_data, applied_data.trials[0]).at("num_layers")),
            FormatValue(by_name(depth, depth.trials.at(baseline_trial)).at("num_layers")));
  EXPECT_EQ(FormatValue(by_name(applied_data, applied_data.trials[0]).at("warmup_steps")), "10");
}

// The remedies next offers can be applied: a space expanded where its best trials crowd an edge, a clipping study at
// the 90th percentile of the recorded gradient norms with what it found applied (or, when nothing cured it, the
// learning rates narrowed below the unstable one), and a finding marked handled.
TEST_F(Procedures, RemediesNextOffersAreCommandsThatRun) {
  // Learning rates far too low for the synthetic problem, and the list puts three of them at the top of the range.
  Write("low.yaml", R"(name: low
workload: {name: synthetic, args: {hidden_sizes: [16]}}
max_train_steps: 60
training: {eval_every_steps: 20, log_every_steps: 1}
sampler:
  name: list
  configs:
    - {learning_rate: 0.00099}
    - {learning_rate: 0.00097}
    - {learning_rate: 0.00095}
    - {learning_rate: 0.00002}
    - {learning_rate: 0.00001}
space:
  learning_rate: {min: 0.00001, max: 0.001, scale: log}
  optimizer: nesterov
  batch_size: 32
)");
  ASSERT_EQ(Dltune("run low.yaml --no-report").exit_code, 0);
  ASSERT_THAT(Dltune("doctor low").out, HasSubstr("Finding: boundary"));
  const Result expanded = Dltune("plan expand --from low");
  ASSERT_EQ(expanded.exit_code, 0) << expanded.err;
  const std::string spec = Slurp(dir_ / "low-expanded.yaml");
  EXPECT_THAT(spec, HasSubstr("max: 0.01"));  // a decade further on a log scale
  EXPECT_THAT(spec, HasSubstr("kind: expand"));
  ASSERT_EQ(Dltune("run low-expanded.yaml --no-report").exit_code, 0);
  auto store = OpenStore(StoreUrl());
  const StudyData widened = LoadStudyData(*store, "low-expanded", /*with_measurements=*/false);
  EXPECT_EQ(widened.spec.space->Find("learning_rate")->max, 0.01);

  // A finding marked handled: a typo is refused, the real one leaves next and doctor's open list.
  EXPECT_THAT(Dltune("note low --resolves boundry 'x'").err, HasSubstr("--resolves boundry: study low has no such"));
  ASSERT_EQ(Dltune("note low --resolves boundary 'widened in low-expanded'").exit_code, 0);
  const std::string doctor = Dltune("doctor low").out;
  EXPECT_THAT(doctor, HasSubstr("HANDLED"));
  EXPECT_THAT(doctor, HasSubstr("widened in low-expanded"));
  EXPECT_THAT(Dltune("plan expand --from low -o again.yaml").err, HasSubstr("study low has no search-space edge"));

  // Clipping: the baseline at a learning rate said to be unstable, clipped around its gradient norms' 90th percentile.
  Write("base.yaml", R"(name: base
workload: {name: synthetic, args: {hidden_sizes: [16]}}
max_train_steps: 60
training: {eval_every_steps: 20, log_every_steps: 1}
trials: 3
space:
  learning_rate: {min: 0.01, max: 1.0, scale: log}
  optimizer: nesterov
  batch_size: 32
)");
  ASSERT_EQ(Dltune("run base.yaml --no-report").exit_code, 0);
  EXPECT_THAT(Dltune("plan clipping --from base").err, HasSubstr("no unstable learning rate is known"));
  const Result planned = Dltune("plan clipping --from base --unstable-lr 0.4 --steps 40");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const StudyData base = LoadStudyData(*store, "base");
  std::uint64_t best = 0;
  for (const TrialRecord& trial : base.trials) {
    if (*trial.best_value < *base.trials.at(best).best_value) best = trial.number;
  }
  std::vector<double> norms;
  for (const TrainMeasurement& m : base.train.at(best)) norms.push_back(*m.grad_norm);
  std::sort(norms.begin(), norms.end());
  const double p90 = std::stod(fmt::format("{:.3g}", norms[norms.size() * 9 / 10]));
  ASSERT_EQ(Dltune("run base-clipping.yaml --no-report").exit_code, 0);
  const StudyData clipping = LoadStudyData(*store, "base-clipping");
  const ClippingStudy study = AnalyzeClipping(clipping);
  ASSERT_EQ(study.rows.size(), 4u);
  EXPECT_EQ(study.rows[0].threshold, 0.0);
  EXPECT_NEAR(study.rows[2].threshold, p90, 1e-12);
  EXPECT_NEAR(study.rows[1].threshold, std::stod(fmt::format("{:.3g}", p90 / 2)), 1e-12);
  EXPECT_EQ(study.learning_rate, 0.4);
  for (const ClippingRow& row : study.rows) {
    EXPECT_TRUE(row.verdict.has_value()) << row.threshold;
    EXPECT_EQ(row.clipped_share.has_value(), row.threshold > 0) << row.threshold;
  }
  // What next says of it runs: the threshold applied, or the learning rates narrowed below the unstable one.
  const Result next = Dltune("next base-clipping");
  const std::string applied = study.recommended ? "dltune plan apply-clipping --from base-clipping"
                                                : "dltune plan narrow-lr --from base-clipping";
  ASSERT_THAT(next.out, HasSubstr(applied));
  ASSERT_EQ(Dltune(std::string(study.recommended ? "plan apply-clipping" : "plan narrow-lr") +
                   " --from base-clipping -o remedy.yaml")
                .exit_code,
            0);
  const StudySpec remedy = LoadStudySpec((dir_ / "remedy.yaml").string());
  if (study.recommended) {
    EXPECT_EQ(FormatValue(remedy.space->Find("grad_clip_norm")->values.at(0)), FormatValue(*study.recommended));
  } else {
    EXPECT_EQ(remedy.space->Find("learning_rate")->max, 0.2);
  }
  // Both apply to the baseline whatever the study found.
  ASSERT_EQ(Dltune("plan narrow-lr --from base-clipping -o narrow.yaml").exit_code, 0);
  EXPECT_EQ(LoadStudySpec((dir_ / "narrow.yaml").string()).space->Find("learning_rate")->max, 0.2);
  ASSERT_EQ(Dltune("run remedy.yaml --no-report").exit_code, 0);
}

// The start of a project needs no study: fit-steps takes the spec (at a batch size), apply-steps the budget it found.
TEST_F(Procedures, StepBudgetFromASpecFileApplied) {
  Write("start.yaml", R"(name: start
workload: {name: synthetic, args: {hidden_sizes: [16]}}
max_train_steps: 200
trials: 2
space:
  learning_rate: {min: 0.03, max: 1.0, scale: log}
  weight_decay: {min: 0.0001, max: 0.01, scale: log}
  optimizer: nesterov
  batch_size: 32
)");
  const Result planned = test::RunDltune(
      "plan fit-steps --from start.yaml --batch-size 64 --fit 'train/error_rate<=0.1' "
      "--learning-rates 0.1,0.3,1 --eval-every 5",
      dir_);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const std::string sweep = Slurp(dir_ / "start-fit-steps.yaml");
  EXPECT_THAT(sweep, HasSubstr("batch_size: 64"));
  EXPECT_THAT(sweep, HasSubstr("max_train_steps: 200"));  // the spec's budget
  EXPECT_THAT(sweep, HasSubstr("parent: start.yaml"));
  ASSERT_EQ(Dltune("run start-fit-steps.yaml --no-report").exit_code, 0);
  auto store = OpenStore(StoreUrl());
  const StepBudget budget = AnalyzeStepBudget(LoadStudyData(*store, "start-fit-steps"));
  ASSERT_TRUE(budget.candidate_steps);
  const Result applied = Dltune("plan apply-steps --from start-fit-steps");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  const StudySpec tuning = LoadStudySpec((dir_ / "start-tuning.yaml").string());
  EXPECT_EQ(tuning.max_train_steps, *budget.candidate_steps);
  EXPECT_EQ(FormatValue(tuning.space->Find("batch_size")->values.at(0)), "64");
  EXPECT_TRUE(tuning.space->Find("weight_decay")->Varies());  // the spec's own space, to tune
  EXPECT_EQ(tuning.procedure.kind, "apply-steps");
  ASSERT_EQ(Dltune("run start-tuning.yaml --no-report").exit_code, 0);
}

// The instability probe is planned at the configuration of the sub-study whose instability the finding names, not at
// the best overall: here Adam's trials are better and stable, and SGD's best sits just under the learning rate above
// which its trials diverge.
TEST_F(Procedures, TheInstabilityProbeTakesTheUnstableSubstudysBest) {
  Write("u.yaml", R"(name: u
workload: synthetic
max_train_steps: 100
trials: 12
space:
  optimizer: {values: [sgd, adam], role: scientific}
  learning_rate: {min: 0.001, max: 1, scale: log}
  batch_size: 32
)");
  const auto store = OpenStore(StoreUrl());
  const StudySpec spec = LoadStudySpec((dir_ / "u.yaml").string());
  const StudySession session = StudySession::OpenOrCreate(*store, spec, "");
  // Records as a run would leave them: SGD diverges at a learning rate of 0.1 and above, and is best just under it;
  // every Adam trial beats every SGD one.
  while (auto claimed = store->ClaimNext(session.study().id, "w")) {
    const auto& [trial, lease] = *claimed;
    const auto params = ParamsByName(*spec.space, trial.params);
    const bool sgd = FormatValue(params.at("optimizer")) == "sgd";
    const double rate = *NumericValue(params.at("learning_rate"));
    if (sgd && rate >= 0.1) {
      store->Finish(lease, {.state = TrialState::kInfeasible, .reason = "diverged"});
      continue;
    }
    const double error = sgd ? 0.5 - rate : 0.1 + rate / 100;
    store->Record(lease, {.evals = {{.step = 100, .split = "valid", .metric = "error_rate", .value = error}},
                          .best_step = 100,
                          .best_value = error});
    store->Finish(lease, {.state = TrialState::kCompleted, .final_value = error});
  }
  const StudyData data = LoadStudyData(*store, "u");
  const auto found = Diagnose(data);
  const auto instability =
      std::find_if(found.begin(), found.end(), [](const Diagnostic& d) { return d.id == "instability"; });
  ASSERT_NE(instability, found.end()) << "the records must show SGD's instability";
  const Result planned = Dltune("plan instability --from u -o probe.yaml");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const StudySpec probe = LoadStudySpec((dir_ / "probe.yaml").string());
  const std::uint64_t from = probe.procedure.from_trials.at(0).trial;
  EXPECT_EQ(FormatValue(ParamsByName(*spec.space, data.trials.at(from).params).at("optimizer")), "sgd");
  EXPECT_EQ(from, instability->trials.back()) << "the best trial of the unstable sub-study";
}

}  // namespace
}  // namespace dltune
