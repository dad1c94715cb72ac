// training.profile_steps: a short training run of the synthetic workload with a profile window writes a Chrome
// trace-event file holding LibTorch's operators and the trainer's spans for exactly the window's steps; a stop inside
// the window still writes it; a bad window is refused naming the setting.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/workloads/train.h"

namespace dltune {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

HyperParams Params() {
  return HyperParams(json::object(), {{"optimizer", Value("adam")}, {"learning_rate", Value(0.01)}});
}

// Stops training after step `stop_at` (0: never), as Ctrl-C does.
struct StopAt : TrainerCallbacks {
  std::int64_t stop_at = 0;
  bool ShouldStop(std::int64_t step) override { return stop_at > 0 && step >= stop_at; }
};

class ProfileTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dltune_profile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RemoveTree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }

  TrainerOptions Options(const std::string& window, std::int64_t steps = 30) const {
    TrainerOptions options;
    options.max_train_steps = steps;
    options.training.eval_every_steps = 10;
    options.training.log_every_steps = 5;
    options.training.profile_steps = window;
    options.checkpoint_dir = (dir_ / "checkpoints").string();
    return options;
  }

  TrainResult Run(const TrainerOptions& options, std::int64_t stop_at = 0) const {
    StopAt callbacks;
    callbacks.stop_at = stop_at;
    return Train("synthetic", {{"examples", 1000}}, Params(), options, callbacks);
  }

  fs::path TracePath() const { return dir_ / "profile.trace.json"; }

  json ReadTrace() const {
    std::ifstream in(TracePath());
    EXPECT_TRUE(in.good()) << TracePath();
    return json::parse(in);  // throws (and fails the test) unless the whole file is valid JSON
  }

  fs::path dir_;
};

struct Interval {
  double begin = 0, end = 0;
  bool Contains(const json& event) const {
    constexpr double kSlack = 1e-3;  // the file's microseconds carry nanoseconds
    const double ts = event["ts"].get<double>();
    return ts >= begin - kSlack && ts + event["dur"].get<double>() <= end + kSlack;
  }
};

// The file's format, whatever the window: every event named and placed, complete events timed.
void ExpectTraceEventFormat(const json& trace) {
  ASSERT_TRUE(trace.is_object());
  ASSERT_TRUE(trace.contains("traceEvents") && trace["traceEvents"].is_array());
  for (const json& event : trace["traceEvents"]) {
    ASSERT_TRUE(event["name"].is_string()) << event.dump();
    ASSERT_TRUE(event["ph"].is_string()) << event.dump();
    ASSERT_TRUE(event["pid"].is_number_integer()) << event.dump();
    ASSERT_TRUE(event["tid"].is_number_integer()) << event.dump();
    const std::string ph = event["ph"];
    ASSERT_TRUE(ph == "X" || ph == "M") << event.dump();
    if (ph == "X") {
      ASSERT_TRUE(event["ts"].is_number() && event["ts"].get<double>() >= 0) << event.dump();
      ASSERT_TRUE(event["dur"].is_number() && event["dur"].get<double>() >= 0) << event.dump();
      ASSERT_TRUE(event["cat"] == "torch" || event["cat"] == "dltune") << event.dump();
    }
  }
}

// The trainer's step spans by step number.
std::map<std::int64_t, json> StepSpans(const json& trace) {
  std::map<std::int64_t, json> steps;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "X" && event["cat"] == "dltune" && event["args"].contains("step")) {
      const auto step = event["args"]["step"].get<std::int64_t>();
      EXPECT_EQ(event["name"], "step " + std::to_string(step));
      EXPECT_TRUE(steps.emplace(step, event).second) << "two spans of step " << step;
    }
  }
  return steps;
}

std::set<std::int64_t> Range(std::int64_t first, std::int64_t last) {
  std::set<std::int64_t> steps;
  for (std::int64_t s = first; s <= last; ++s) steps.insert(s);
  return steps;
}

template <typename Map>
std::set<std::int64_t> Keys(const Map& map) {
  std::set<std::int64_t> keys;
  for (const auto& [key, value] : map) keys.insert(key);
  return keys;
}

// Window 8:12 of 30 steps, evaluating every 10: steps 9 to 12, with the evaluation and checkpoint of step 10.
TEST_F(ProfileTraceTest, HoldsLibTorchsOperatorsAndTheTrainersSpansOfExactlyTheWindowsSteps) {
  const TrainResult result = Run(Options("8:12"));
  ASSERT_EQ(result.outcome, TrainOutcome::kCompleted) << result.reason;
  EXPECT_EQ(result.profile_trace, TracePath().string());
  const json trace = ReadTrace();
  ExpectTraceEventFormat(trace);
  const json& about = trace["otherData"]["dltune"];
  EXPECT_EQ(about["profile_steps"], "8:12");
  EXPECT_EQ(about["first_step"], 9);
  EXPECT_EQ(about["last_step"], 12);
  EXPECT_EQ(about["ended"], "window");
  EXPECT_EQ(about["workload"], "synthetic");

  const auto steps = StepSpans(trace);
  ASSERT_EQ(Keys(steps), Range(9, 12));
  // The steps follow one another without overlapping.
  for (auto it = steps.begin(); std::next(it) != steps.end(); ++it) {
    const json& next = std::next(it)->second;
    EXPECT_LE(it->second["ts"].get<double>() + it->second["dur"].get<double>(), next["ts"].get<double>() + 1e-3);
  }
  const Interval window{steps.begin()->second["ts"].get<double>(),
                        steps.rbegin()->second["ts"].get<double>() + steps.rbegin()->second["dur"].get<double>()};

  // Every other event lies inside one step's span: nothing of the steps before or after the window is recorded.
  std::map<std::string, int> dltune_spans;
  std::map<std::string, int> operators;
  std::map<std::string, int> forward_operators;  // LibTorch's operators inside the trainer's forward spans
  std::vector<Interval> forwards;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "X" && event["cat"] == "dltune" && event["name"] == "forward") {
      forwards.push_back({event["ts"].get<double>(), event["ts"].get<double>() + event["dur"].get<double>()});
    }
  }
  std::int64_t training_tid = steps.begin()->second["tid"];
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    EXPECT_TRUE(window.Contains(event)) << event.dump();
    const std::string name = event["name"];
    if (event["cat"] == "dltune") {
      if (event["args"].contains("step")) continue;
      ++dltune_spans[name];
    } else {
      ++operators[name];
      EXPECT_EQ(event["tid"], training_tid) << event.dump();  // one training thread: the spans and ops nest
      for (const Interval& forward : forwards) {
        if (forward.Contains(event)) ++forward_operators[name];
      }
    }
    const bool in_a_step = std::any_of(steps.begin(), steps.end(), [&](const auto& step) {
      const json& span = step.second;
      return Interval{span["ts"].get<double>(), span["ts"].get<double>() + span["dur"].get<double>()}.Contains(event);
    });
    EXPECT_TRUE(in_a_step) << event.dump();
  }
  // The trainer's phases: each part of a step once in each of the four; the evaluation and checkpoint of step 10,
  // and the metrics pulled there (the log interval, 5, has no other multiple in 9 to 12).
  for (const char* part : {"data_wait", "zero_grad", "forward", "backward", "optimizer"}) {
    EXPECT_EQ(dltune_spans[part], 4) << part;
  }
  // Without clipping the update takes the gradient norm in its own pass: no span of its own.
  EXPECT_EQ(dltune_spans.count("grad_norm"), 0U);
  EXPECT_EQ(dltune_spans["evaluation"], 1);
  EXPECT_EQ(dltune_spans["checkpoint"], 1);
  EXPECT_EQ(dltune_spans["metrics"], 1);
  // LibTorch's operators: the linear layers' matrix products forward (inside the forward spans) and backward.
  EXPECT_GT(forward_operators["aten::addmm"] + forward_operators["aten::mm"], 0);
  EXPECT_GT(operators["aten::mm"], 0);
  const bool backward_nodes = std::any_of(operators.begin(), operators.end(), [](const auto& op) {
    return op.first.find("Backward") != std::string::npos;
  });
  EXPECT_TRUE(backward_nodes);
}

// A window from step 0 to the last step covers the whole run.
TEST_F(ProfileTraceTest, AWindowMayCoverTheWholeRun) {
  const TrainResult result = Run(Options("0:12", 12));
  ASSERT_EQ(result.outcome, TrainOutcome::kCompleted);
  const json trace = ReadTrace();
  ExpectTraceEventFormat(trace);
  EXPECT_EQ(Keys(StepSpans(trace)), Range(1, 12));
}

// Stopped inside the window (Ctrl-C), the run writes the trace of the steps it did, valid JSON; resumed, it keeps
// that trace rather than replacing it with one of the window's rest.
TEST_F(ProfileTraceTest, AStopInsideTheWindowWritesTheStepsDone) {
  const TrainResult stopped = Run(Options("5:20"), 13);
  ASSERT_EQ(stopped.outcome, TrainOutcome::kStopped);
  EXPECT_EQ(stopped.profile_trace, TracePath().string());
  const json trace = ReadTrace();
  ExpectTraceEventFormat(trace);
  EXPECT_EQ(Keys(StepSpans(trace)), Range(6, 13));
  EXPECT_EQ(trace["otherData"]["dltune"]["ended"], "stopped");

  const TrainResult resumed = Run(Options("5:20"));
  ASSERT_EQ(resumed.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(resumed.resumed_from_step, 13);
  EXPECT_EQ(resumed.profile_trace, "");
  EXPECT_EQ(Keys(StepSpans(ReadTrace())), Range(6, 13));
}

// Resumed before the window, a run records all of it; resumed after it, nothing.
TEST_F(ProfileTraceTest, AResumedRunRecordsTheWindowWhenItIsAhead) {
  ASSERT_EQ(Run(Options("15:18"), 10).outcome, TrainOutcome::kStopped);
  EXPECT_FALSE(fs::exists(TracePath()));
  const TrainResult resumed = Run(Options("15:18"), 20);
  EXPECT_EQ(resumed.resumed_from_step, 10);
  EXPECT_EQ(Keys(StepSpans(ReadTrace())), Range(16, 18));
  fs::remove(TracePath());
  const TrainResult after = Run(Options("15:18"));
  EXPECT_EQ(after.resumed_from_step, 20);
  EXPECT_EQ(after.profile_trace, "");
  EXPECT_FALSE(fs::exists(TracePath()));
}

TEST_F(ProfileTraceTest, WithoutAWindowNoTraceIsWritten) {
  const TrainResult result = Run(Options(""));
  ASSERT_EQ(result.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(result.profile_trace, "");
  EXPECT_FALSE(fs::exists(TracePath()));
}

TEST_F(ProfileTraceTest, ABadWindowIsRefusedNamingTheSetting) {
  const auto message = [&](const TrainerOptions& options) {
    try {
      Run(options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(message(Options("12:8")), HasSubstr("training.profile_steps must be A:B with A < B"));
  EXPECT_THAT(message(Options("5:5")), HasSubstr("training.profile_steps must be A:B with A < B"));
  EXPECT_THAT(message(Options("10:31")),
              HasSubstr("training.profile_steps must end at step 30 (max_train_steps) or before, not 10:31"));
  for (const char* bad : {"-1:5", "5", "5:", ":5", "a:b", "1:2:3", " 1:2", "1.5:3"}) {
    EXPECT_THAT(message(Options(bad)), HasSubstr("training.profile_steps must be A:B, from step A to step B")) << bad;
  }
  TrainerOptions nowhere = Options("1:2");
  nowhere.checkpoint_dir.clear();
  EXPECT_THAT(message(nowhere), HasSubstr("training.profile_steps needs a directory for its trace"));
  EXPECT_FALSE(fs::exists(TracePath()));
  // Given a file of its own, a run without checkpoints writes its trace there.
  nowhere.profile_path = (dir_ / "elsewhere.json").string();
  EXPECT_EQ(Run(nowhere).profile_trace, nowhere.profile_path);
  EXPECT_TRUE(fs::exists(nowhere.profile_path));
}

}  // namespace
}  // namespace dltune
