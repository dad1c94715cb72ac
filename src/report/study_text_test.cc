#include "report/study_text.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/report/study_data.h"
#include "report/text_table.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The compact table keeps each line within 120 columns: long names and notes are cut, ending in "…".
TEST(StudyText, CompactTrackingTableFitsItsColumns) {
  const fs::path dir = fs::temp_directory_path() / ("dltune_study_text_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    auto store = OpenStore("sqlite://" + (dir / "s.db").string());
    const std::string name(40, 's');
    const StudyRecord study =
        store->CreateStudy({.name = name,
                            .spec_text = "name: " + name + "\nmax_train_steps: 1\nspace: {lr: {min: 0.1, max: 1}}\n",
                            .git_dirty = true});
    store->AddNote(study.id, {.text = std::string(200, 'n')});
    const std::string table = CompactTrackingTable(*store, store->ListStudies());
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) EXPECT_LE(Columns(line), 120u) << line;
    EXPECT_THAT(table, HasSubstr(std::string(29, 's') + "…  "));
    EXPECT_THAT(table, Not(HasSubstr(std::string(30, 's'))));
    EXPECT_THAT(table, HasSubstr("  dirty  " + std::string(20, 'n')));
    EXPECT_THAT(table, HasSubstr("n…\n"));
    EXPECT_EQ(StudiesText(*store, false), table);
  }
  RemoveTree(dir);
}

TEST(StudyText, MetricsTextPutsTheUsualMetricsFirst) {
  EXPECT_EQ(MetricsText({{"loss", 0.5}, {"accuracy", 0.9}, {"error_rate", 0.1}, {"correct_class_0", 7}, {"f1", 0.8}}),
            "error_rate 0.1, accuracy 0.9, loss 0.5, f1 0.8");
  EXPECT_EQ(MetricsText({}), "-");
}

TEST(StudyText, AdoptedChoiceNamesATrialOrAConfigurationTheStudyHas) {
  StudyData data;
  data.study.name = "s";
  data.trials = {{.number = 0, .substudy_label = "optimizer=adam", .configuration = 0},
                 {.number = 1, .substudy_label = "optimizer=sgd", .configuration = 1},
                 {.number = 2, .substudy_label = "optimizer=sgd", .configuration = 1, .replica = 1}};
  EXPECT_EQ(AdoptedChoice(data, "2"), "trial 2 (optimizer=sgd)");
  EXPECT_EQ(AdoptedChoice(data, "trial:0"), "trial 0 (optimizer=adam)");
  EXPECT_EQ(AdoptedChoice(data, "configuration:1"), "configuration 1 (optimizer=sgd)");
  EXPECT_EQ(AdoptedChoice(data, "c1"), "configuration 1 (optimizer=sgd)");
  EXPECT_THROW(AdoptedChoice(data, "trial 3"), Error);
  EXPECT_THROW(AdoptedChoice(data, "config:2"), Error);
  EXPECT_THROW(AdoptedChoice(data, "the best"), Error);
}

// Parents named in a cycle make one lineage whose walks end, each study in it once: a study that took a deleted
// parent's name after its child was made (c names p, the new p names c) is not that child's parent, nor is a study
// named as a parent before it existed, nor a study itself.
TEST(StudyLineage, ParentsNamedInACycleMakeALineageThatEnds) {
  const fs::path dir = fs::temp_directory_path() / ("dltune_study_lineage_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    auto store = OpenStore("sqlite://" + (dir / "s.db").string());
    const auto create = [&](const std::string& name, const std::string& parent) {
      return store->CreateStudy(
          {.name = name,
           .spec_text = "name: " + name + "\nmax_train_steps: 1\nspace: {lr: {min: 0.1, max: 1}}\n",
           .parent = parent});
    };
    const StudyRecord deleted = create("p", "");
    create("c", "p");
    store->DeleteStudy(deleted.id);
    create("p", "c");
    create("a", "b");
    create("b", "a");
    create("self", "self");

    EXPECT_EQ(LineageRootOf(*store, "p"), "c");
    EXPECT_EQ(LineageRootOf(*store, "c"), "c");
    EXPECT_EQ(LineageRootOf(*store, "b"), "a");
    EXPECT_EQ(LineageRootOf(*store, "self"), "self");
    const LineageNode lineage = LoadLineage(*store, LineageRootOf(*store, "p"));
    EXPECT_EQ(lineage.data.study.name, "c");
    ASSERT_EQ(lineage.children.size(), 1u);
    EXPECT_EQ(lineage.children[0].data.study.name, "p");
    EXPECT_TRUE(lineage.children[0].children.empty());
    EXPECT_EQ(LoadStudyData(*store, "c").children, std::vector<std::string>{"p"});
    EXPECT_TRUE(LoadStudyData(*store, "p").children.empty());
    EXPECT_TRUE(LoadLineage(*store, "self").children.empty());

    std::istringstream tree(StudyTreeText(*store));
    std::vector<std::string> lines;
    for (std::string line; std::getline(tree, line);) lines.push_back(line);
    ASSERT_EQ(lines.size(), 5u) << tree.str();
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"c ", "[parent p not here: the study named p now is a later one]"},
        {"└─ p ", "best -"},
        {"a ", "[parent b not here: the study named b now is a later one]"},
        {"└─ b ", "best -"},
        {"self ", "[parent self not here: it names itself]"}};
    for (std::size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i].rfind(expected[i].first, 0), 0u) << lines[i];
      EXPECT_TRUE(lines[i].ends_with(expected[i].second)) << lines[i];
    }
  }
  RemoveTree(dir);
}

}  // namespace
}  // namespace dltune
