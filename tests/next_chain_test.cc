// `dltune next` followed verbatim, as a new user would: from a spec and an empty store, each printed command run as
// printed, until the lineage is launched. Every command must succeed, no step may repeat without a new outcome, and
// the launch must carry out the decision recorded on the way.
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "dltune/report/study_data.h"
#include "dltune/store/store.h"
#include "own_directory.h"

namespace dltune {
namespace {

using test::Result;
using test::Slurp;
using ::testing::HasSubstr;

class NextChain : public test::InOwnDirectory {
 protected:
  NextChain() : InOwnDirectory("next_chain") {}

  std::string StoreUrl() const { return "sqlite://" + (dir_ / "dltune.db").string(); }
  // A command line as the user types it: `dltune` on the PATH, the store in the environment.
  Result Shell(const std::string& command) {
    const std::string bin = std::filesystem::path(DLTUNE_CLI).parent_path().string();
    const std::string full = "cd '" + dir_.string() + "' && export PATH='" + bin + "':\"$PATH\" DLTUNE_STORAGE='" +
                             StoreUrl() + "' " + environment_ + " && { " + command + " ; } > shell.out 2> shell.err";
    const int status = std::system(full.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(dir_ / "shell.out"), Slurp(dir_ / "shell.err")};
  }

  std::string environment_;  // more NAME='value' pairs every command is run with

  // What one `dltune next` printed.
  struct Step {
    std::string text, id, study, command;
  };
  Step Next(const std::string& target) {
    const Result next = Shell("dltune next " + target);
    EXPECT_EQ(next.exit_code, 0) << next.err;
    Step step{.text = next.out};
    std::smatch match;
    static const std::regex kStudy(R"(^study (\S+): )");
    static const std::regex kRun(R"(\n  run: +(.*)\n)");
    if (std::regex_search(next.out, match, kStudy)) step.study = match[1];
    if (std::regex_search(next.out, match, kRun)) step.command = match[1];
    return step;
  }

  // Follows `dltune next SPEC` (then `dltune next`) for at most `limit` steps; returns the steps taken.
  std::vector<Step> Follow(const std::string& spec, int limit) {
    std::vector<Step> steps;
    std::set<std::string> done;  // no command comes back: measuring again plans a new sweep
    for (int i = 0; i < limit; ++i) {
      Step step = Next(i == 0 ? spec : "");
      steps.push_back(step);
      if (step.text.find(": Done: ") != std::string::npos) break;
      if (step.command.empty()) {
        ADD_FAILURE() << "step " << i << " printed no command:\n" << step.text;
        break;
      }
      EXPECT_TRUE(done.insert(step.command).second) << "step " << i << " repeats " << step.command;
      const Result ran = Shell(step.command);
      if (ran.exit_code != 0) {
        ADD_FAILURE() << "step " << i << ": " << step.command << "\nexited " << ran.exit_code << "\n" << ran.err;
        break;
      }
    }
    return steps;
  }

  // The synthetic workload, large enough that a training step takes milliseconds (a throughput sweep of
  // sub-millisecond steps measures the machine's jitter, and says so), as proj.yaml.
  void WriteSyntheticProject() {
    std::ofstream(dir_ / "proj.yaml") << R"(name: proj
workload: {name: synthetic, args: {features: 64, hidden_sizes: [512, 512]}}
max_train_steps: 300
trials: 6
space:
  learning_rate: {min: 0.01, max: 0.3, scale: log}
  optimizer: nesterov
  weight_decay: {min: 0.00001, max: 0.001, scale: log}
  batch_size: 64
)";
  }

  // The chain ended in a launch that carried out the latest decision on its study.
  void ExpectLaunchOfTheDecision(const std::vector<Step>& steps) {
    ASSERT_FALSE(steps.empty());
    const Step& last = steps.back();
    ASSERT_THAT(last.text, HasSubstr("Done: the study's model is launched")) << last.text;
    auto store = OpenStore(StoreUrl());
    const StudyData data = LoadStudyData(*store, last.study, /*with_measurements=*/false);
    ASSERT_EQ(data.launches.size(), 1u);
    const StudyNote* decision = nullptr;
    for (const StudyNote& note : data.notes) {
      if (note.kind == NoteKind::kDecision) decision = &note;
    }
    ASSERT_NE(decision, nullptr) << "the launch followed no decision";
    EXPECT_EQ(data.launches.back().decision, decision->id);
    // "trial 3 (...)" or "configuration 1 (...)": the launched trial is that trial, or of that configuration.
    std::smatch match;
    ASSERT_TRUE(std::regex_search(decision->adopt, match, std::regex(R"((trial|configuration) ([0-9]+))")));
    const std::uint64_t number = std::stoull(match[2]);
    const std::uint64_t launched = data.launches.back().evaluation.trial;
    if (match[1] == "trial") {
      EXPECT_EQ(launched, number);
    } else {
      for (const TrialRecord& trial : data.trials) {
        if (trial.number == launched) {
          EXPECT_EQ(trial.configuration, number);
        }
      }
    }
  }
};

TEST_F(NextChain, FromAnEmptyStoreToALaunchOnTheSyntheticWorkload) {
  WriteSyntheticProject();
  const Step start = Next("");  // no store yet: where to start, not an error
  EXPECT_THAT(start.text, HasSubstr("No study yet"));
  const std::vector<Step> steps = Follow("proj.yaml", 25);
  ASSERT_GE(steps.size(), 6u);
  // The playbook's start: the batch size for speed, then the step budget at it, then the first study.
  EXPECT_THAT(steps[0].command, HasSubstr("dltune plan throughput --from proj.yaml"));
  std::size_t at = 1;
  while (at < steps.size() && steps[at].command.find("dltune plan throughput") != std::string::npos) ++at;  // again
  ASSERT_LT(at + 1, steps.size());
  EXPECT_LE(at, 2u) << "the throughput is measured twice at most";
  EXPECT_THAT(steps[at].command, HasSubstr("dltune plan fit-steps --from proj-throughput"));
  bool applied = false;
  for (const Step& step : steps) applied = applied || step.command.find("dltune plan apply-steps") != std::string::npos;
  EXPECT_TRUE(applied);
  ExpectLaunchOfTheDecision(steps);
}

// A machine too busy to measure: every sweep's smallest batch size has bimodal step times (the `jitter` fault), so
// no sweep is trusted. `next` measures again once, then goes on at the spec's batch size, and reaches a launch.
TEST_F(NextChain, OnAMachineTooBusyToMeasureGoesOnAtTheSpecsBatchSize) {
  WriteSyntheticProject();
  environment_ = "DLTUNE_INJECT_FAULT='jitter@0:1'";
  const std::vector<Step> steps = Follow("proj.yaml", 25);
  ASSERT_GE(steps.size(), 4u);
  int measurements = 0;
  for (const Step& step : steps) measurements += step.command.find("dltune plan throughput") != std::string::npos;
  EXPECT_EQ(measurements, 2) << "measured once, then once again, never a third time";
  EXPECT_THAT(steps[1].text, HasSubstr("Measure the throughput again"));
  EXPECT_THAT(steps[2].text, HasSubstr("Keep batch size 64"));
  EXPECT_THAT(steps[2].text, HasSubstr("or:"));  // the other ways on: measure longer, or with fewer threads
  EXPECT_THAT(steps[2].command, HasSubstr("dltune plan fit-steps --from proj-throughput-2 --batch-size 64"));
  ExpectLaunchOfTheDecision(steps);
}

// A small Fashion-MNIST project: the first 2,000 training images, so that the step budget's sweep can fit them.
TEST_F(NextChain, FromAnEmptyStoreToALaunchOnASmallFashionMnistProject) {
  std::ofstream(dir_ / "fashion.yaml") << R"(name: fashion
workload: {name: fashion_mnist_mlp, args: {train_examples: 2000, hidden_sizes: [128]}}
max_train_steps: 400
trials: 4
training: {valid_sample_examples: 1000, train_eval_examples: 2000}
space:
  learning_rate: {min: 0.01, max: 0.5, scale: log}
  optimizer: nesterov
  one_minus_momentum: 0.1
  batch_size: 64
)";
  const std::vector<Step> steps = Follow("fashion.yaml", 25);
  ASSERT_FALSE(steps.empty());
  EXPECT_THAT(steps[0].command, HasSubstr("dltune plan throughput --from fashion.yaml --batch-sizes 16:1024"));
  ExpectLaunchOfTheDecision(steps);
}

}  // namespace
}  // namespace dltune
