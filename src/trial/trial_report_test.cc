#include "trial/trial_report.h"

#include <cmath>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace dltune {
namespace {

std::string ErrorOf(const std::string& line) {
  try {
    (void)ParseReportLine(line, 7);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

TEST(TrialReport, ParsesEveryType) {
  const auto start = ParseReportLine(R"({"type": "start", "step": 120, "manages_checkpoints": true})", 1);
  ASSERT_TRUE(start.start);
  EXPECT_EQ(start.start->step, 120);
  EXPECT_TRUE(start.start->manages_checkpoints);

  const auto train = ParseReportLine(
      R"({"type":"train","step":5,"loss":0.25,"learning_rate":0.1,"grad_norm":2,"clipped":true,"step_time":0.01})", 2);
  ASSERT_TRUE(train.train);
  EXPECT_EQ(train.train->step, 5);
  EXPECT_EQ(train.train->loss, 0.25);
  EXPECT_EQ(train.train->grad_norm, 2.0);
  EXPECT_EQ(train.train->clipped, true);
  EXPECT_FALSE(train.train->data_wait);

  const auto eval = ParseReportLine(
      R"({"type":"eval","step":10,"split":"valid","metrics":{"error_rate":0.2,"loss":1},"examples":100})", 3);
  ASSERT_TRUE(eval.eval);
  EXPECT_EQ(eval.eval->metrics.at("error_rate"), 0.2);
  EXPECT_EQ(eval.eval->metrics.at("loss"), 1.0);
  EXPECT_EQ(eval.eval->examples, 100);

  const auto checkpoint = ParseReportLine(R"({"type":"checkpoint","step":10,"path":"ckpt/10","objective":0.2})", 4);
  ASSERT_TRUE(checkpoint.checkpoint);
  EXPECT_EQ(checkpoint.checkpoint->path, "ckpt/10");
  EXPECT_EQ(checkpoint.checkpoint->objective, 0.2);
  EXPECT_FALSE(checkpoint.checkpoint->deleted);

  const auto end = ParseReportLine(R"({"type":"end","state":"infeasible","reason":"NaN"})", 5);
  ASSERT_TRUE(end.end);
  EXPECT_EQ(end.end->state, EndState::kInfeasible);
  EXPECT_EQ(end.end->reason, "NaN");
  const auto stopped = ParseReportLine(R"({"type":"end","state":"stopped","step":40})", 5);
  ASSERT_TRUE(stopped.end);
  EXPECT_EQ(stopped.end->state, EndState::kStopped);
  EXPECT_EQ(stopped.end->step, 40);
  EXPECT_EQ(ParseReportLine(EndLine(*stopped.end), 5).end->step, 40);
  EXPECT_THROW(ParseReportLine(R"({"type":"end","state":"paused"})", 5), ProtocolError);

  const auto timing = ParseReportLine(R"({"type":"timing","seconds":{"train":4.5,"evaluation":0.25}})", 6);
  ASSERT_TRUE(timing.timing);
  EXPECT_EQ(timing.timing->seconds.at("train"), 4.5);
  EXPECT_EQ(timing.timing->seconds.at("evaluation"), 0.25);
  EXPECT_THROW(ParseReportLine(R"({"type":"timing","seconds":{"train":-1}})", 7), ProtocolError);
  EXPECT_THROW(ParseReportLine(R"({"type":"timing","seconds":[1]})", 7), ProtocolError);

  const auto future = ParseReportLine(R"({"type":"histogram","values":[1,2]})", 6);
  EXPECT_FALSE(future.start || future.train || future.eval || future.checkpoint || future.end);
}

TEST(TrialReport, AcceptsPythonsNonFiniteLossOnly) {
  EXPECT_TRUE(std::isnan(*ParseReportLine(R"({"type":"train","step":1,"loss":NaN})", 1).train->loss));
  EXPECT_EQ(*ParseReportLine(R"({"type":"train","step":1,"loss":-Infinity})", 1).train->loss, -INFINITY);
  EXPECT_EQ(*ParseReportLine(R"({"type":"train","step":1,"loss":Infinity})", 1).train->loss, INFINITY);
  // Inside strings the words are text.
  EXPECT_EQ(ParseReportLine(R"({"type":"end","state":"infeasible","reason":"loss NaN at Infinity"})", 1).end->reason,
            "loss NaN at Infinity");
  EXPECT_NE(ErrorOf(R"({"type":"train","step":1,"learning_rate":NaN})"), "");
  EXPECT_NE(ErrorOf(R"({"type":"eval","step":1,"split":"valid","metrics":{"loss":NaN}})"), "");
}

TEST(TrialReport, ErrorsNameTheLineAndTheProblem) {
  EXPECT_EQ(ErrorOf("step 1 loss 0.5").rfind("report line 7 is not JSON", 0), 0u) << ErrorOf("step 1 loss 0.5");
  EXPECT_NE(ErrorOf("[1, 2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"step": 1})").find("needs \"type\""), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"train"})").find("needs \"step\""), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"train","step":-1})").find("whole number >= 0"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"train","step":1.5})").find("whole number"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"train","step":1,"loss":"low"})").find("\"loss\" must be a number"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"eval","step":1,"split":"valid"})").find("needs \"metrics\""), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"checkpoint","step":1})").find("needs \"path\""), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"end","state":"done"})").find("completed, infeasible or stopped"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"train","step":1,"clipped":1})").find("true or false"), std::string::npos);
}

TEST(TrialReport, ReaderSplitsLinesAndEnforcesOrder) {
  ReportReader reader;
  reader.Feed(R"({"type":"start","step":0})"
              "\n"
              R"({"type":"train","st)");
  ASSERT_TRUE(reader.Next()->start);
  EXPECT_FALSE(reader.Next());  // the second line is incomplete
  reader.Feed(
      "ep\":1}\n\n"
      R"({"type":"end","state":"completed"})");
  EXPECT_EQ(reader.Next()->train->step, 1);
  EXPECT_FALSE(reader.Next());          // no newline yet
  EXPECT_TRUE(reader.Next(true)->end);  // at end of file it counts
  reader.Feed(R"({"type":"train","step":2})"
              "\n");
  EXPECT_THROW(reader.Next(), ProtocolError);  // nothing after end

  ReportReader late_start;
  late_start.Feed(R"({"type":"train","step":1})"
                  "\n"
                  R"({"type":"start","step":0})"
                  "\n");
  late_start.Next();
  EXPECT_THROW(late_start.Next(), ProtocolError);
}

// A program that serves its trials warm says so before its start line, which may still follow.
TEST(TrialReport, TheWarmLineComesBeforeTheStart) {
  ReportReader reader;
  reader.Feed(R"({"type":"warm","program":"/home/me/train.py"})"
              "\n"
              R"({"type":"start","step":0})"
              "\n");
  const auto warm = reader.Next();
  ASSERT_TRUE(warm);
  EXPECT_TRUE(warm->warm);
  EXPECT_EQ(warm->warm_program, "/home/me/train.py");
  EXPECT_FALSE(warm->start || warm->train || warm->end);
  ReportReader unnamed;
  unnamed.Feed("{\"type\":\"warm\"}\n");
  EXPECT_EQ(unnamed.Next()->warm_program, "");  // the program's file is optional
  ReportReader wrong;
  wrong.Feed("{\"type\":\"warm\",\"program\":3}\n");
  EXPECT_THROW(wrong.Next(), ProtocolError);
  const auto start = reader.Next();
  ASSERT_TRUE(start);
  EXPECT_TRUE(start->start);
  EXPECT_FALSE(start->warm);
}

TEST(TrialReport, TheRuntimeLineRecordsVersionsAndIsNoMeasurement) {
  ReportReader reader;
  reader.Feed(R"({"type":"runtime","runtime":{"python":"3.11.2","torch":"2.1.0","cudnn":8902}})"
              "\n"
              R"({"type":"start","step":0})"
              "\n");
  const auto runtime = reader.Next();
  ASSERT_TRUE(runtime && runtime->runtime);
  EXPECT_EQ(*runtime->runtime,
            (std::map<std::string, std::string>{{"python", "3.11.2"}, {"torch", "2.1.0"}, {"cudnn", "8902"}}));
  const auto start = reader.Next();  // a start may follow it
  ASSERT_TRUE(start && start->start);
  for (const char* bad : {R"({"type":"runtime"})", R"({"type":"runtime","runtime":["3.11"]})",
                          R"({"type":"runtime","runtime":{"python":{"major":3}}})"}) {
    EXPECT_THROW(ParseReportLine(bad, 1), ProtocolError) << bad;
  }
  EXPECT_THROW(ParseReportLine(R"({"type":"runtime","runtime":{"python":")" + std::string(300, '3') + R"("}})", 1),
               ProtocolError);
  // This process's own line parses back, with dltune's version in it.
  const ReportLine own = ParseReportLine(RuntimeLine(), 1);
  ASSERT_TRUE(own.runtime);
  EXPECT_TRUE(own.runtime->contains("dltune"));
}

TEST(TrialReport, WrittenLinesParseBack) {
  const TrainMeasurement m{.step = 3, .loss = std::nan(""), .learning_rate = 0.5, .clipped = false, .step_time = 0.1};
  const auto train = ParseReportLine(TrainLine(m), 1).train;
  ASSERT_TRUE(train);
  EXPECT_EQ(train->step, 3);
  EXPECT_TRUE(std::isnan(*train->loss));
  EXPECT_EQ(train->learning_rate, 0.5);
  EXPECT_EQ(train->clipped, false);
  EXPECT_FALSE(train->grad_norm);

  const auto eval = ParseReportLine(EvalLine({.step = 4, .split = "test", .metrics = {{"accuracy", 0.9}}}), 2).eval;
  EXPECT_EQ(eval->split, "test");
  EXPECT_EQ(eval->metrics.at("accuracy"), 0.9);
  const auto checkpoint =
      ParseReportLine(CheckpointLine({.step = 4, .path = "/x", .objective = 0.1, .deleted = true}), 3).checkpoint;
  EXPECT_TRUE(checkpoint->deleted);
  EXPECT_EQ(checkpoint->objective, 0.1);
  EXPECT_EQ(ParseReportLine(StartLine(9, true), 4).start->step, 9);
  EXPECT_EQ(ParseReportLine(EndLine({.state = EndState::kInfeasible, .reason = "r"}), 5).end->reason, "r");
  EXPECT_EQ(ParseReportLine(TimingLine({{"checkpoint", 0.5}}), 6).timing->seconds.at("checkpoint"), 0.5);
}

// Whatever the JSON library refuses is the line's fault, never the worker's: a number past double's range included.
TEST(TrialReport, NumbersPastDoublesRangeAreTheLinesFault) {
  EXPECT_NE(ErrorOf(R"({"type":"train","step":1,"loss":1e999})").find("report line 7"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"eval","step":1,"split":"valid","metrics":{"e":-1e400}})").find("report line 7"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"train","step":1e999})").find("report line 7"), std::string::npos);
}

// One checksum form: "sha256:" and 64 hex digits (bare digits are taken and given the prefix); anything else refused.
TEST(TrialReport, ChecksumsAreSha256) {
  const std::string hex(64, 'a');
  const auto line = [](const std::string& checksum) {
    return R"({"type":"checkpoint","step":1,"path":"ck/1","checksum":")" + checksum + R"("})";
  };
  EXPECT_EQ(ParseReportLine(line("sha256:" + hex), 1).checkpoint->checksum, "sha256:" + hex);
  EXPECT_EQ(ParseReportLine(line(hex), 1).checkpoint->checksum, "sha256:" + hex);
  EXPECT_NE(ErrorOf(line("md5:abc")).find("\"checksum\" must be \"sha256:\""), std::string::npos);
}

// A reported checkpoint lies strictly inside the trial directory and is none of dltune's files there, or outside.
TEST(TrialReport, CheckpointPathsStayOutOfTheTrialDirectorysOwnFiles) {
  const std::filesystem::path dir = "/runs/abc/trial_3";
  EXPECT_EQ(CheckpointPathOf(dir, "checkpoints/step_5"), dir / "checkpoints/step_5");
  EXPECT_EQ(CheckpointPathOf(dir, "checkpoints/step_5/"), dir / "checkpoints/step_5");
  EXPECT_EQ(CheckpointPathOf(dir, "ck.pt"), dir / "ck.pt");
  EXPECT_EQ(CheckpointPathOf(dir, dir.string() + "/checkpoints/./x"), dir / "checkpoints/x");
  EXPECT_EQ(CheckpointPathOf(dir, "/scratch/ck/5"), "/scratch/ck/5");  // outside: recorded, never deleted
  const auto refused = [&](const std::string& path) {
    try {
      CheckpointPathOf(dir, path);
    } catch (const ProtocolError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused("checkpoints/..").find("is the trial directory itself"), std::string::npos);
  EXPECT_NE(refused(".").find("is the trial directory itself"), std::string::npos);
  EXPECT_NE(refused(dir.string()).find("is the trial directory itself"), std::string::npos);
  EXPECT_NE(refused("..").find("leaves the trial directory"), std::string::npos);
  EXPECT_NE(refused("../trial_4/ck").find("leaves the trial directory"), std::string::npos);
  EXPECT_NE(refused("/runs").find("holds the trial directory"), std::string::npos);
  EXPECT_NE(refused("/").find("holds the trial directory"), std::string::npos);
  for (const char* own : {"params.json", "trial.json", "stdout.log", "stderr.log", "evaluate.log", "rank_1.log",
                          "events.out.tfevents.0000000001.host"}) {
    EXPECT_NE(refused(own).find("is a file dltune keeps"), std::string::npos) << own;
  }
  EXPECT_EQ(refused("checkpoints/params.json"), "");  // only the trial directory's own
}

}  // namespace
}  // namespace dltune
