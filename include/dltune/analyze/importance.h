// Hyperparameter importance with its noise: how much each nuisance hyperparameter of a sub-study matters for reaching
// its best objectives, with a bootstrap interval and the importance a hyperparameter of no effect gets from the same
// trials, so the next round can fix those indistinguishable from no effect.
//
// Playbook sections: "Choosing the objective for the next round of experiments" (nuisance hyperparameters that
// matter little can be fixed), "Extracting insight from experimental results".
// The importance is PED-ANOVA (S. Watanabe, A. Bansal, F. Hutter, "PED-ANOVA: Efficiently Quantifying Hyperparameter
// Importance in Arbitrary Subspaces", IJCAI 2023, arXiv:2304.10255), computed as Optuna's PedAnovaImportanceEvaluator
// computes it with its defaults (docs/analyses.md, "Hyperparameter importance", says which and how close).
// Pure functions of StudyData, like the rest of the module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune {

struct ImportanceSettings {
  double target_quantile = 0.1;  // γ': the importance of reaching the top 10% of the objective
  double region_quantile = 1.0;  // γ: the region it is measured in (1: all the sub-study's trials)
  int grid_steps = 50;           // a range is discretized to this many points (fewer for small integer ranges)
  double prior_weight = 1.0;     // the uniform prior kernel's weight in each Parzen estimator
  int min_trials_in_regime = 2;  // a param present in fewer of the region's trials gets importance 0
  int resamples = 1000;          // bootstrap resamples of the trials
  int permutations = 200;        // random pairings of objectives and params for each noise floor
  double interval_low = 0.05;    // the interval's quantiles of the bootstrap distribution (a 90% interval, whose
  double interval_high = 0.95;   // lower end is a one-sided 95% bound)
  std::uint64_t seed = 0;
};

struct ParamImportance {
  std::string param_id;
  std::string param_name;
  double importance = 0;     // PED-ANOVA's, not normalized
  double low = 0, high = 0;  // the bootstrap (percentile) interval of the importance
  // The mean importance over random pairings of the sub-study's objectives with its params: what a param of no effect
  // gets from these trials (PED-ANOVA's divergence is positive even then).
  double noise_floor = 0;
  // The same over resamples of the trials with replacement, then paired at random: the floor in the bootstrap's world,
  // where repeated trials raise every importance a little.
  double resampled_floor = 0;
  // The importance above the noise floor (importance - noise_floor), and its interval: the bootstrap's interval less
  // the resampled floor (both from resamples).
  double above_noise = 0;
  double above_noise_low = 0, above_noise_high = 0;
  // The interval of the importance above the noise floor holds 0 (above_noise_low <= 0): the trials cannot tell the
  // param's effect from none.
  bool indistinguishable = true;
  int trials = 0;                   // the sub-study's trials with the param
  std::optional<Value> best_value;  // the param's value in the sub-study's best trial (absent where it has none)
};

struct SubStudyImportance {
  std::size_t index = 0;
  std::string substudy;  // its label
  int trials = 0;        // completed trials with a best objective
  int top_trials = 0;    // of which in the top target_quantile (ties included)
  std::optional<std::uint64_t> best_trial;
  std::vector<ParamImportance> params;  // the nuisance params that vary, in spec order
};

struct HyperparameterImportance {
  ImportanceSettings settings;
  std::vector<SubStudyImportance> substudies;  // by index, those with 2 or more completed trials
};

// For each sub-study with 2 or more completed trials with a best objective, each varying nuisance param's importance
// over those trials (the objective's best per trial; maximized objectives negated), its bootstrap interval (resamples
// of the trials with replacement, Rng(MixSeed(seed, 3 * index))), its noise floor (permutations of the objectives,
// Rng(MixSeed(seed, 3 * index + 1))) and its resampled floor (a resample, then a permutation, each time,
// Rng(MixSeed(seed, 3 * index + 2))). A study without nuisance params has sub-studies with no params.
HyperparameterImportance AnalyzeImportance(const StudyData& data, const ImportanceSettings& settings = {});

// PED-ANOVA's importance of one param given each trial's value (nullopt: the param is absent in that trial) and loss
// (lower is better). Values outside a list's choices count as absent; range values are clipped to the range.
double PedAnovaImportance(const Param& param, const std::vector<std::optional<Value>>& values,
                          const std::vector<double>& losses, const ImportanceSettings& settings = {});

// The fewest top trials for the importance to name params to fix: Optuna's advice for PED-ANOVA is 5 or more trials
// above the target quantile.
inline constexpr int kMinTopTrialsToFix = 5;

}  // namespace dltune
