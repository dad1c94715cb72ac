// Samplers: how a study chooses the params of each trial.
//
// Every sampler here is non-adaptive and a pure function of (space, sub-study, seed, trial index): trial i is the
// same whether trials are made in parallel or in sequence, in any order, today or in six months. (halton_algoperf,
// reproducing algoperf, also depends on the trial budget, as algoperf shuffles the whole sequence.)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dltune/space/search_space.h"

namespace dltune {

// One configuration written out in a spec for the `list` sampler.
struct ListedConfig {
  Assignment values;     // by param id
  SourceLocation where;  // the config's position in the spec
  std::string path;      // "sampler.configs[3]"
};

// The `sampler:` section of a spec. Documented value struct; ParseSamplerOptions validates it.
struct SamplerOptions {
  std::string name = "halton";        // halton | halton_algoperf | random | grid | list | gp
  int grid_points = 5;                // grid: values per range param (choices use all their values)
  bool halton_shift = false;          // halton: add a random shift mod 1 (Cranley-Patterson) to the scrambling
  std::vector<ListedConfig> configs;  // list: the trials, in order
  // gp: Halton trials made before the model takes over; -1: automatic (0 with a warm start, else
  // min(trials, max(5, 2 x dimensions))).
  std::int64_t initial_trials = -1;
  std::string warm_start;  // gp: an earlier study (same store) whose finished trials the model starts from
  SourceLocation where;    // the section's position in the spec

  static const std::vector<std::string>& Names();
};

// One sub-study's sampling problem.
struct SamplingTarget {
  const SearchSpace* space = nullptr;  // must outlive the sampler
  Assignment scientific;               // this sub-study's scientific values (separate mode); empty in joint mode
  bool joint = false;                  // scientific params are sampled along with the nuisance params
  std::uint64_t seed = 0;
  std::uint64_t trials = 0;  // the budget; grid and list make as many trials as they have points
};

// How an earlier trial of a sub-study stands, as an adaptive sampler sees it.
enum class ObservationKind {
  kCompleted,   // finished with an objective value
  kInfeasible,  // diverged or otherwise could not be trained: tells where not to go
  kPending,     // made but not finished (pending, running, stopped): a point others are already trying
};

// One earlier trial (of this study's sub-study, or of a warm-start study).
struct Observation {
  Assignment params;  // every param that existed in the trial, as recorded
  ObservationKind kind = ObservationKind::kPending;
  double value = 0;  // kCompleted: the objective, oriented so that lower is better (maximized ones negated)
};

// Makes the params of a sub-study's trials. Implementations are immutable after construction and thread-safe.
class Sampler {
 public:
  virtual ~Sampler() = default;

  // How many trials the sub-study has.
  virtual std::uint64_t TrialCount() const = 0;
  // How many of them are planned up front: Suggest(index) works for index < PlannedTrialCount(). Adaptive
  // samplers (gp) make the later ones from the history, when they are asked for.
  virtual std::uint64_t PlannedTrialCount() const { return TrialCount(); }
  // The params of trial `index` (< PlannedTrialCount()): every param that exists in that trial, fixed and
  // scientific ones included. Pure function of the target and the index.
  virtual Assignment Suggest(std::uint64_t index) const = 0;
  // The params of trial `index` (< TrialCount()) given the sub-study's other trials. Pure function of the target,
  // the index and the history (its order included). Non-adaptive samplers ignore the history.
  virtual Assignment SuggestFromHistory(std::uint64_t index, std::span<const Observation> history) const {
    (void)history;
    return Suggest(index);
  }
};

// Throws SpecError when the options do not fit the space (a grid over too many dimensions, a listed config with
// an unknown or out-of-range param, ...).
std::unique_ptr<Sampler> MakeSampler(const SamplerOptions& options, const SamplingTarget& target);

// How many combinations of the scientific params' values there are (scientific ranges left out; 1 when there are
// none), saturating at UINT64_MAX.
std::uint64_t ScientificCombinationCount(const SearchSpace& space);
// Combination `index` (< ScientificCombinationCount) in the order below, without making the others.
Assignment ScientificCombination(const SearchSpace& space, std::uint64_t index);
// The most combinations ScientificCombinations makes (and a joint study deals).
inline constexpr std::uint64_t kMaxScientificCombinations = 100000;
// Every combination of the scientific params' values, in spec order (first param varies slowest). Scientific
// ranges are not enumerable and are left out. One empty assignment when there are no scientific params. Throws
// Error when there are more than kMaxScientificCombinations.
std::vector<Assignment> ScientificCombinations(const SearchSpace& space);

// The unit-cube dimensions a sampler draws: params that vary and are not given by the sub-study. Unconditional
// params come first, then conditional ones, each in spec order, so adding a conditional branch never moves the
// points of the params that were already there. Indices into space.params().
std::vector<std::size_t> SampledDimensions(const SearchSpace& space, bool joint);

}  // namespace dltune
