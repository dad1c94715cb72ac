// Every training setting travels whole: from a spec's `training:` block into trial.json, from there into the
// trainer's options, into the reproduction command, and from that command's flags back to the same settings. The
// test walks TrainingSettingFields(), so a setting added to the table is covered without a line here.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/core/training_settings.h"
#include "dltune/run/study_session.h"
#include "run/trial_setup.h"
#include "src/cli/commands.h"

namespace dltune {
namespace {

using Kind = TrainingSettingField::Kind;

// A value of `field` that is not its default and is in range for a study of 1000 steps.
std::string OtherValue(const TrainingSettingField& field) {
  switch (field.kind) {
    case Kind::kSwitch: return "true";
    case Kind::kDuration: return "90s";
    case Kind::kText:  // each in its own grammar
      if (field.key == "device") return "cpu";
      if (field.key == "fuse") return "4";
      if (field.key == "cuda_graph") return "true";
      return field.key == "profile_steps" ? "10:20" : "dense:50";
    case Kind::kNumber: return "37.5";
    case Kind::kCount: {
      const auto fallback = NumericValue(field.Get(TrainingSettings{})).value_or(0);
      const double value = fallback == field.min + 3 ? field.min + 4 : field.min + 3;
      return std::to_string(static_cast<long long>(value));
    }
  }
  return "";
}

// The flags of a command line, parsed back as `dltune train` parses them.
TrainingSettings ParseFlags(const std::string& command) {
  CLI::App app;
  cli::TrainingSettingOptions options;
  cli::AddTrainingSettingOptions(&app, options);
  app.allow_extras();  // the command's other words: the workload, --set, --steps, --out, ...
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string word; in >> word;) words.push_back(word);
  std::reverse(words.begin(), words.end());  // CLI11 takes them last first
  app.parse(words);
  return options.Settings();
}

TEST(TrainingSettings, EverySettingTravelsFromSpecToTrialJsonToTheTrainerToTheReproduceCommandAndBack) {
  std::string training;
  for (const auto& field : TrainingSettingFields()) {
    training += "  " + std::string(field.key) + ": " + OtherValue(field) + "\n";
  }
  const auto dir = std::filesystem::temp_directory_path() / ("dltune_settings_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto store = OpenStore("sqlite://" + (dir / "s.db").string());
  const StudySpec spec = ParseStudySpec(
      "name: all_settings\nworkload: synthetic\nmax_train_steps: 1000\nrun_dir: " + (dir / "runs").string() +
          "\ntraining:\n" + training + "space:\n  learning_rate: {min: 0.01, max: 0.1}\n",
      "spec.yaml");
  // Every setting was read from the spec, none left at its default.
  for (const auto& field : TrainingSettingFields()) {
    EXPECT_FALSE(SameValue(field.Get(spec.training), field.Get(TrainingSettings{}))) << field.key;
  }

  StudySession session = StudySession::OpenOrCreate(*store, spec, "");
  const auto trial = session.Ask("w:1");
  const nlohmann::json description = TrialDescription(spec, session.study(), trial->record(), {},
                                                      TrialThreads(spec, session.study(), trial->number()), false);
  // trial.json -> the trainer's options: the same settings.
  EXPECT_EQ(TrainingSettingsFromJson(description.at("training")), spec.training.Resolved(spec.max_train_steps));

  // The reproduction command's flags -> `dltune train`'s options: the same settings, but the runner's own ones.
  TrainingSettings expected = spec.training;
  for (const auto& field : TrainingSettingFields()) {
    if (field.flag.empty())
      std::visit([&](auto member) { expected.*member = TrainingSettings{}.*member; }, field.member);
  }
  const std::string command = ReproduceCommand(spec, session.study(), trial->record());
  EXPECT_EQ(ParseFlags(command), expected) << command;

  // Defaults give no flag at all.
  EXPECT_EQ(TrainingSettingFlags(TrainingSettings{}), "");
  dltune::RemoveTree(dir);
}

// Every setting is documented with the spec (docs/study-spec.md, the training table).
TEST(TrainingSettings, EverySettingIsDocumented) {
  std::ifstream in(DLTUNE_SOURCE_DIR "/docs/study-spec.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& field : TrainingSettingFields()) {
    EXPECT_NE(doc.find("| `" + std::string(field.key) + "` |"), std::string::npos) << field.key;
  }
}

// training.fuse left out is "chosen" (the runner decides: PlanFusion), told apart from an explicit off wherever the
// settings are written (trial.json, the machine caches' keys); a trial.json written before, with off, reads as off.
TEST(TrainingSettings, FuseLeftOutIsChosenAndToldApartFromOff) {
  const std::string base =
      "name: f\nworkload: synthetic\nmax_train_steps: 1000\n"
      "space:\n  learning_rate: {min: 0.01, max: 0.1}\n";
  const StudySpec left_out = ParseStudySpec(base, "f.yaml");
  const StudySpec off = ParseStudySpec(base + "training: {fuse: off}\n", "f.yaml");
  EXPECT_EQ(TrainingSettings{}.fuse, "chosen");
  EXPECT_EQ(left_out.training.fuse, "chosen");
  EXPECT_EQ(off.training.fuse, "off");
  EXPECT_NE(left_out.training, off.training);
  EXPECT_EQ(TrainingSettingsToJson(left_out.training).at("fuse"), "chosen");
  EXPECT_EQ(TrainingSettingsToJson(off.training).at("fuse"), "off");
  EXPECT_EQ(TrainingSettingsFromJson(TrainingSettingsToJson(left_out.training)), left_out.training);
  EXPECT_EQ(TrainingSettingsFromJson({{"fuse", "off"}}).fuse, "off");
  EXPECT_EQ(TrainingSettingsFromJson(nlohmann::json::object()).fuse, "chosen");
  EXPECT_EQ(ParseStudySpec(base + "training: {fuse: chosen}\n", "f.yaml").training, left_out.training);
  EXPECT_EQ(TrainingSettingFlags(left_out.training), "");  // the runner's setting: no dltune train flag
  try {
    ParseStudySpec(base + "training: {fuse: maybe}\n", "f.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("must be off, auto, chosen (the default) or the most trials"));
  }
}

// training.threads is a count or auto (0, the default): the parallel layout then chooses (parallel_layout.h).
TEST(TrainingSettings, ThreadsAreACountOrAuto) {
  EXPECT_EQ(TrainingSettings{}.threads, 0);
  EXPECT_EQ(TrainingSettingsFromJson({{"threads", "auto"}}).threads, 0);
  EXPECT_EQ(TrainingSettingsFromJson({{"threads", 0}}).threads, 0);  // trial.json's way of writing auto
  EXPECT_EQ(TrainingSettingsFromJson({{"threads", 3}}).threads, 3);
  try {
    TrainingSettingsFromJson({{"threads", -1}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("training.threads must be between 1 and 1024, or auto"));
  }
  EXPECT_THROW(TrainingSettingsFromJson({{"threads", "many"}}), Error);
  EXPECT_EQ(TrainingSettingFlags(TrainingSettings{}), "");  // auto is the default: no --threads
}

TEST(TrainingSettings, BadValuesAreRefusedNamingTheSetting) {
  EXPECT_THROW(TrainingSettingsFromJson({{"threads", 1.5}}), Error);
  try {
    TrainingSettingsFromJson({{"divergence_factor", 0.5}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("training.divergence_factor must be a number above 1"));
  }
  TrainingSettings settings;
  settings.eval_every_steps = 2000;
  EXPECT_THROW(settings.Validate(1000), Error);
  EXPECT_NO_THROW(settings.Validate(5000));
  EXPECT_EQ(TrainingSettings{}.Resolved(1000).eval_every_steps, 100);
  EXPECT_EQ(TrainingSettings{}.Resolved(5).eval_every_steps, 1);
  EXPECT_EQ(ParseDurationText("2h"), 7200);
  EXPECT_THROW(ParseDurationText("2 weeks"), Error);
}

// training.profile_steps: a window of steps A:B, 0 <= A < B <= max_train_steps, refused otherwise by the spec parser,
// by Validate and by the `dltune train` option, each naming the setting.
TEST(TrainingSettings, ABadProfileWindowIsRefusedNamingTheSetting) {
  EXPECT_FALSE(ProfileWindow::Parse("").has_value());
  const auto window = ProfileWindow::Parse("0:1000", 1000);
  ASSERT_TRUE(window.has_value());
  EXPECT_EQ(window->begin, 0);
  EXPECT_EQ(window->end, 1000);
  EXPECT_EQ(window->steps(), 1000);
  EXPECT_EQ(ProfileTracePath("runs/a/trial_3/checkpoints"), std::filesystem::path("runs/a/trial_3/profile.trace.json"));
  EXPECT_EQ(ProfileTracePath("/r/out/checkpoints/"), std::filesystem::path("/r/out/profile.trace.json"));

  const auto spec_error = [](const std::string& value) {
    try {
      ParseStudySpec("name: p\nworkload: synthetic\nmax_train_steps: 1000\ntraining:\n  profile_steps: " + value +
                         "\nspace:\n  learning_rate: {min: 0.01, max: 0.1}\n",
                     "spec.yaml");
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(spec_error("100:110"), "(accepted)");
  EXPECT_EQ(spec_error("\"0:1000\""), "(accepted)");
  EXPECT_THAT(spec_error("110:100"),
              ::testing::HasSubstr("spec.yaml:5:18: training.profile_steps must be A:B with A < B"));
  EXPECT_THAT(
      spec_error("900:1001"),
      ::testing::HasSubstr("spec.yaml:5:18: training.profile_steps must end at step 1000 (max_train_steps) or before"));
  EXPECT_THAT(spec_error("-5:10"), ::testing::HasSubstr("training.profile_steps must be A:B, from step A to step B"));
  EXPECT_THAT(spec_error("12"), ::testing::HasSubstr("training.profile_steps must be A:B, from step A to step B"));
  EXPECT_THAT(spec_error("[1, 2]"), ::testing::HasSubstr("training.profile_steps must be a single value"));

  TrainingSettings settings;
  settings.profile_steps = "5:50";
  EXPECT_NO_THROW(settings.Validate(50));
  try {
    settings.Validate(40);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "training.profile_steps must end at step 40 (max_train_steps) or before, not 5:50");
  }

  CLI::App app;
  cli::TrainingSettingOptions options;
  cli::AddTrainingSettingOptions(&app, options);
  app.parse(std::vector<std::string>{"3:7", "--profile-steps"});  // CLI11 takes the words last first
  EXPECT_EQ(options.Settings().profile_steps, "3:7");
  try {
    CLI::App bad;
    cli::TrainingSettingOptions bad_options;
    cli::AddTrainingSettingOptions(&bad, bad_options);
    bad.parse(std::vector<std::string>{"7:3", "--profile-steps"});
    FAIL();
  } catch (const CLI::ValidationError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--profile-steps: must be A:B with A < B"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("not '7:3'"));
  }
}

// training.cuda_graph is auto (the default), true or false; a spec's or an older trial.json's boolean reads as its
// word, and the reproduction command writes the word.
TEST(TrainingSettings, CudaGraphIsAutoTrueOrFalse) {
  EXPECT_EQ(TrainingSettings{}.cuda_graph, "auto");
  EXPECT_EQ(TrainingSettingsFromJson({{"cuda_graph", true}}).cuda_graph, "true");
  EXPECT_EQ(TrainingSettingsFromJson({{"cuda_graph", false}}).cuda_graph, "false");
  EXPECT_EQ(TrainingSettingsFromJson({{"cuda_graph", "auto"}}).cuda_graph, "auto");
  try {
    TrainingSettingsFromJson({{"cuda_graph", "sometimes"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("training.cuda_graph must be auto, true or false, not \"sometimes\""));
  }
  TrainingSettings eager;
  eager.cuda_graph = "false";
  EXPECT_EQ(TrainingSettingFlags(eager), "--cuda-graph false");
}

}  // namespace
}  // namespace dltune
