// The contract every sampler keeps, one parameterized suite: determinism, order independence, domains and scales,
// conditional params, and resuming. A new sampler joins by one line in the instantiation at the end.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <thread>

#include <gtest/gtest.h>

#include "dltune/search/sampler.h"
#include "search/parse_sampler.h"
#include "space/parse_space.h"

namespace dltune {
namespace {

// Every kind of param: a log float, a log int and a choice (each conditional on the scientific param, so that grid
// can enumerate them in two dimensions), and a fixed one.
const char* kSpace = R"(
space:
  optimizer: {values: [sgd, adam], role: scientific}
  lr: {min: 1.0e-4, max: 1, scale: log}
  width: {min: 16, max: 512, scale: log, type: int, when: {optimizer: sgd}}
  activation: {values: [relu, tanh], when: {optimizer: adam}}
  batch_size: 128
)";

const char* kListSampler = R"(
sampler:
  name: list
  configs:
    - {optimizer: sgd, lr: 0.1, width: 64}
    - {optimizer: adam, lr: 0.001, activation: relu}
    - {optimizer: sgd, lr: 0.003, width: 300}
    - {optimizer: adam, lr: 0.3, activation: tanh}
)";

struct SamplerCase {
  std::string name;
  std::string yaml;  // the spec's sampler: section
  // Why a property does not apply to this sampler; nullptr: it does.
  const char* no_seed = nullptr;        // another seed gives other trials
  const char* no_budget = nullptr;      // it makes the budgeted number of trials
  const char* no_log_spread = nullptr;  // its log-scaled values spread over the log range
};

// Test names and failure messages show the case's name.
void PrintTo(const SamplerCase& c, std::ostream* os) { *os << c.name; }

constexpr std::uint64_t kSeed = 7;
constexpr std::uint64_t kBudget = 24;
// The trials each property looks at (grid and list may have fewer).
constexpr std::uint64_t kTrials = 24;
// Enough trials for the spread of independent draws (random) to be judged.
constexpr std::uint64_t kSpreadBudget = 256;

SearchSpace ParseSpace() { return ParseSearchSpace(*YamlNode::Parse(kSpace, "study.yaml").Find("space")); }

SamplerOptions ParseOptions(const std::string& yaml) {
  return ParseSamplerOptions(*YamlNode::Parse(yaml, "study.yaml").Find("sampler"));
}

// The two sub-studies of the space, one per value of its scientific param.
std::vector<Assignment> SubStudies() { return {{{"optimizer", Value("sgd")}}, {{"optimizer", Value("adam")}}}; }

// The objective the contract's studies tell an adaptive sampler: a bowl in the params' unit coordinates.
double Objective(const SearchSpace& space, const Assignment& trial) {
  double value = 0;
  for (const auto& [id, v] : trial) {
    const Param* param = space.Find(id);
    if (param != nullptr && param->Varies()) value += std::pow(param->ToUnit(v) - 0.3, 2);
  }
  return value;
}

// A study in sequence: each trial is asked for with the history of those before it, then told.
struct Study {
  std::vector<Assignment> trials;
  std::vector<Observation> history;  // history[i]: trial i as told
};

Study RunStudy(const Sampler& sampler, const SearchSpace& space, std::uint64_t from = 0, Study study = {}) {
  const std::uint64_t count = std::min(sampler.TrialCount(), kTrials);
  for (std::uint64_t i = from; i < count; ++i) {
    Assignment trial = sampler.SuggestFromHistory(i, std::span(study.history).first(i));
    study.history.push_back({trial, ObservationKind::kCompleted, Objective(space, trial)});
    study.trials.push_back(std::move(trial));
  }
  return study;
}

class SamplerContract : public ::testing::TestWithParam<SamplerCase> {
 protected:
  std::unique_ptr<Sampler> Make(const Assignment& scientific, std::uint64_t seed = kSeed,
                                std::uint64_t budget = kBudget) const {
    return MakeSampler(options_, {&space_, scientific, false, seed, budget});
  }
  Study Run(const Assignment& scientific, std::uint64_t seed = kSeed) const {
    return RunStudy(*Make(scientific, seed), space_);
  }
  // The trials of both sub-studies.
  std::vector<Assignment> AllTrials() const {
    std::vector<Assignment> all;
    for (const Assignment& scientific : SubStudies()) {
      const Study study = Run(scientific);
      EXPECT_FALSE(study.trials.empty());
      all.insert(all.end(), study.trials.begin(), study.trials.end());
    }
    return all;
  }

  const SearchSpace space_ = ParseSpace();
  const SamplerOptions options_ = ParseOptions(GetParam().yaml);
};

TEST_P(SamplerContract, TheSameTargetGivesTheSameTrials) {
  for (const Assignment& scientific : SubStudies()) {
    const Study first = Run(scientific);
    ASSERT_FALSE(first.trials.empty());
    EXPECT_EQ(Run(scientific).trials, first.trials);
  }
}

TEST_P(SamplerContract, AnotherSeedGivesOtherTrials) {
  if (GetParam().no_seed != nullptr) GTEST_SKIP() << GetParam().no_seed;
  for (const Assignment& scientific : SubStudies()) {
    const Study seven = Run(scientific, 7);
    const Study eight = Run(scientific, 8);
    ASSERT_EQ(seven.trials.size(), eight.trials.size());
    // halton_algoperf shuffles one sequence by the seed, so a trial may keep its point by chance; most may not.
    std::size_t same = 0;
    for (std::size_t i = 0; i < seven.trials.size(); ++i) same += seven.trials[i] == eight.trials[i] ? 1 : 0;
    EXPECT_LE(same, seven.trials.size() / 4) << same << " of " << seven.trials.size() << " trials kept";
  }
}

// Trial n is a function of n and the history it is given: asked in reverse from a fresh sampler, or from several
// threads at once, each trial is the one the sequential study made.
TEST_P(SamplerContract, TrialsDoNotDependOnTheOrderTheyAreAskedIn) {
  for (const Assignment& scientific : SubStudies()) {
    const Study study = Run(scientific);
    const std::span<const Observation> history(study.history);
    const auto fresh = Make(scientific);
    for (std::size_t i = study.trials.size(); i-- > 0;) {
      EXPECT_EQ(fresh->SuggestFromHistory(i, history.first(i)), study.trials[i]) << "trial " << i;
    }
    const auto shared = Make(scientific);
    std::vector<Assignment> parallel(study.trials.size());
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t i = t; i < parallel.size(); i += 4)
          parallel[i] = shared->SuggestFromHistory(i, history.first(i));
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(parallel, study.trials);
  }
}

TEST_P(SamplerContract, MakesTheBudgetedNumberOfTrials) {
  if (GetParam().no_budget != nullptr) GTEST_SKIP() << GetParam().no_budget;
  for (const std::uint64_t budget : {1, 13, 40}) {
    const auto sampler = Make(SubStudies().front(), kSeed, budget);
    EXPECT_EQ(sampler->TrialCount(), budget);
    EXPECT_LE(sampler->PlannedTrialCount(), budget);
  }
}

TEST_P(SamplerContract, EveryValueLiesInItsParamsDomain) {
  for (const Assignment& trial : AllTrials()) {
    EXPECT_EQ(trial.at("batch_size"), Value(std::int64_t{128}));
    for (const auto& [id, value] : trial) {
      const Param* param = space_.Find(id);
      ASSERT_NE(param, nullptr) << id;
      EXPECT_TRUE(param->Contains(value)) << id << " = " << FormatValue(value);
      if (param->kind == ParamKind::kInt) {
        EXPECT_TRUE(std::holds_alternative<std::int64_t>(value)) << id;
      }
      if (param->kind == ParamKind::kFloat) {
        EXPECT_TRUE(std::holds_alternative<double>(value)) << id;
      }
      if (param->scale == Scale::kLog) {
        EXPECT_GT(NumericValue(value).value_or(0), 0) << id;
      }
    }
  }
}

// The geometric midpoint of a log-scaled range splits its values roughly evenly (a linear mapping would put 99% of
// lr's above 0.01). Adaptive samplers are looked at over their planned trials: later ones follow the objective.
TEST_P(SamplerContract, LogScaledValuesSpreadOverTheLogRange) {
  if (GetParam().no_log_spread != nullptr) GTEST_SKIP() << GetParam().no_log_spread;
  std::map<std::string, std::pair<int, int>> below_above;
  for (const Assignment& scientific : SubStudies()) {
    const auto sampler = Make(scientific, kSeed, kSpreadBudget);
    for (std::uint64_t i = 0; i < std::min(sampler->PlannedTrialCount(), kSpreadBudget); ++i) {
      for (const auto& [id, value] : sampler->Suggest(i)) {
        const Param* param = space_.Find(id);
        if (param->scale != Scale::kLog || param->IsChoice()) continue;
        const double midpoint = std::sqrt(param->min * param->max);
        const double x = *NumericValue(value);
        if (std::abs(x - midpoint) < 1e-9 * midpoint) continue;  // a grid's middle point
        ++(x < midpoint ? below_above[id].first : below_above[id].second);
      }
    }
  }
  ASSERT_EQ(below_above.size(), 2u);  // lr and width
  for (const auto& [id, counts] : below_above) {
    const int total = counts.first + counts.second;
    ASSERT_GE(total, 8) << id;
    EXPECT_GE(counts.first, 0.3 * total) << id << ": " << counts.first << " below, " << counts.second << " above";
    EXPECT_GE(counts.second, 0.3 * total) << id << ": " << counts.first << " below, " << counts.second << " above";
  }
}

// A param whose when: condition does not hold is absent, one whose condition holds is present; over both sub-studies
// each conditional param is seen both ways.
TEST_P(SamplerContract, ConditionalParamsExistExactlyWhenTheirConditionsHold) {
  const auto holds = [](const Param& param, const Assignment& trial) {
    return std::all_of(param.when.begin(), param.when.end(), [&](const Condition& condition) {
      const auto it = trial.find(condition.param_id);
      return it != trial.end() && std::any_of(condition.values.begin(), condition.values.end(),
                                              [&](const Value& v) { return SameValue(v, it->second); });
    });
  };
  std::set<std::string> present, absent;
  for (const Assignment& trial : AllTrials()) {
    for (const Param& param : space_.params()) {
      EXPECT_EQ(trial.count(param.id), holds(param, trial) ? 1u : 0u) << param.id;
      if (param.IsConditional()) (trial.count(param.id) != 0 ? present : absent).insert(param.id);
    }
  }
  const std::set<std::string> conditional = {"activation", "width"};
  EXPECT_EQ(present, conditional);
  EXPECT_EQ(absent, conditional);
}

// A study stopped halfway and run again parses its spec again: the sampler made anew from the same options (and,
// for adaptive ones, told the same observations) continues with the trials of one that never stopped.
TEST_P(SamplerContract, AStudyMadeAgainContinuesWithTheSameTrials) {
  for (const Assignment& scientific : SubStudies()) {
    const Study straight = Run(scientific);
    const std::uint64_t half = straight.trials.size() / 2;
    Study first_half;
    first_half.trials.assign(straight.trials.begin(), straight.trials.begin() + static_cast<std::ptrdiff_t>(half));
    first_half.history.assign(straight.history.begin(), straight.history.begin() + static_cast<std::ptrdiff_t>(half));
    const SearchSpace space = ParseSpace();
    const auto again = MakeSampler(ParseOptions(GetParam().yaml), {&space, scientific, false, kSeed, kBudget});
    EXPECT_EQ(RunStudy(*again, space, half, first_half).trials, straight.trials);
  }
}

const char* kGridHasNoSeed = "grid enumerates the same points whatever the seed";
const char* kGridCountsItsPoints = "grid makes one trial per point of the grid, whatever the budget";
const char* kListHasNoSeed = "list runs the configs written out, whatever the seed";
const char* kListCountsItsConfigs = "list makes one trial per config written out, whatever the budget";
const char* kListIsWhatWasWritten = "list's values are the configs written out, spread as their author chose";

INSTANTIATE_TEST_SUITE_P(
    Samplers, SamplerContract,
    ::testing::Values(SamplerCase{"halton", "sampler: halton"},
                      SamplerCase{"halton_shift", "sampler: {name: halton, shift: true}"},
                      SamplerCase{"halton_algoperf", "sampler: halton_algoperf"},
                      SamplerCase{"random", "sampler: random"},
                      SamplerCase{"gp", "sampler: {name: gp, initial_trials: 8}"},
                      SamplerCase{"grid", "sampler: {name: grid, points: 5}", kGridHasNoSeed, kGridCountsItsPoints},
                      SamplerCase{"list", kListSampler, kListHasNoSeed, kListCountsItsConfigs, kListIsWhatWasWritten}),
    [](const ::testing::TestParamInfo<SamplerCase>& test) { return test.param.name; });

}  // namespace
}  // namespace dltune
