// Analyses across studies, as plain data: the run-to-run variance of configurations trained several times
// (`replicas:`), and how a study planned from a parent ranks the parent's trials again (round 2, retrain).
//
// Playbook sections: "Determining whether to adopt a training pipeline change or hyperparameter configuration"
// ("before adopting a candidate change, consider running the best trial N times to characterize the run-to-run
// trial variance"), and "Deciding how long to train when training is compute-bound" (round 1 → round 2).
// Pure functions of StudyData, like the rest of the module; docs/analyses.md describes them for users.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"
#include "dltune/core/statistics.h"

namespace dltune {

// One configuration (a set of params) and its replicas: the same params trained from different seeds.
struct ConfigurationReplicas {
  std::uint64_t configuration = 0;
  std::string substudy;    // its sub-study's label
  std::string scientific;  // its scientific values, "optimizer=adam"; "" when the study has no scientific param
  Assignment params;
  std::vector<std::uint64_t> trials;     // every trial of the configuration, by replica
  std::vector<std::uint64_t> completed;  // its completed trials with a best objective, by replica
  std::vector<double> values;            // their best objectives, in the same order
  MeanInterval stats;                    // of `values`, with the 95% interval of the mean
  // The completed replica whose value is the median: the middle one of an odd count, of an even count the one of the
  // two middle values nearer the mean (the lower trial number on a tie). What a launch takes: not a lucky seed.
  std::optional<std::uint64_t> median_trial;
  std::optional<std::uint64_t> parent_trial;  // the parent study's trial the configuration was taken from
  std::optional<double> parent_value;         // that trial's best objective
};

// Two configurations' replicas compared pair by pair (replica r of each was trained from the same seed).
struct ReplicaComparison {
  std::uint64_t better = 0;  // the configuration with the better mean
  std::uint64_t other = 0;
  std::string better_label, other_label;  // their scientific values (or "configuration N")
  // Per replica both completed: how much better `better` is (other - better when minimizing, better - other when
  // maximizing), and the interval of its mean.
  MeanInterval advantage;
  // The same difference between their parent trials, each a single run; nullopt without parent trials.
  std::optional<double> parent_gap;
  // The advantage's interval holds 0, or fewer than 2 pairs: the comparison cannot tell them apart.
  bool within_noise = true;
};

struct TrialVariance {
  std::uint64_t replicas = 1;                         // the spec's replicas:
  std::vector<ConfigurationReplicas> configurations;  // by configuration number, those with a trial
  std::optional<std::uint64_t> best_configuration;    // the best mean over configurations with a completed replica
  // Run-to-run standard deviation pooled over configurations with 2 or more completed replicas:
  // sqrt(Σ (n_i − 1) s_i² / Σ (n_i − 1)).
  std::optional<double> pooled_sd;
  // With several scientific values: each pair of values by their best-mean configurations; otherwise every
  // configuration against the best one.
  std::vector<ReplicaComparison> comparisons;
};

// Groups the study's trials by configuration (TrialRecord::configuration; never by float equality of params) and
// summarizes each at `confidence` (in (0, 1)). With parent trials (data.parent_trials, from the spec's procedure),
// each configuration carries its parent trial's value and comparisons the parent's gap.
TrialVariance AnalyzeTrialVariance(const StudyData& data, double confidence = 0.95);

// The command that gives a retrain study (dltune plan retrain) twice its replicas: its spec planned again with them,
// run with --extend, which trains only the new ones.
std::string MoreReplicasCommand(const StudyData& retrain);

// A study planned from a parent, ranked against it: round 2 against round 1, a retrain against the single runs.
struct RoundRow {
  std::uint64_t configuration = 0;
  std::uint64_t parent_trial = 0;
  std::string label;  // scientific values, or "configuration N"
  double parent_value = 0;
  double value = 0;     // this study's: the mean of the configuration's completed replicas
  int parent_rank = 0;  // 1 = best
  int rank = 0;
};
struct RoundComparison {
  std::vector<RoundRow> rows;                          // configurations with both values, by configuration
  std::optional<double> rank_correlation;              // Spearman's, between the two rounds' values
  std::optional<std::uint64_t> parent_winner, winner;  // configurations ranked first in each
  bool winner_changed = false;
};
// Needs data.parent_trials; empty rows otherwise.
RoundComparison CompareWithParent(const StudyData& data);

// ---- Two studies side by side (`dltune compare`: the playbook's "with and without" comparisons) ----

struct ComparedStudy {
  std::string name;
  int completed = 0;           // completed trials with a best objective
  std::optional<double> best;  // the best single run
  std::optional<std::uint64_t> best_trial;
  // With replicas, the configuration with the best mean; nullopt otherwise (single runs).
  std::optional<MeanInterval> best_mean;
  std::string best_mean_label;
  // The best of `budget` trials drawn from its completed ones (BestOfBudget): what the study finds at the budget of
  // the smaller study, so a study with more trials does not win by its budget alone.
  BootstrapBox at_equal_budget;
};
struct StudyComparison {
  Objective objective;
  std::uint64_t budget = 0;  // min of the two studies' completed trials
  ComparedStudy a, b;
  // The verdict, only where the data support one. Two searches of the same kind and max_train_steps, single runs:
  // which is better at equal budget, by the medians of their boxes, and whether the boxes' middle halves overlap
  // (then the study variance alone could explain the difference). Studies with replicas: which best configuration
  // has the better mean, and whether the means' 95% intervals overlap (within the noise), not a best of k runs.
  std::string better;
  bool overlap = true;
  bool by_means = false;  // the verdict compares the best configurations' means (replicas)
  // Why no verdict is drawn (different max_train_steps, studies of different kinds, nothing completed); "" when one
  // is.
  std::string no_verdict;
};
// Throws Error when the two studies measure different objectives (or the same in different directions).
StudyComparison CompareStudies(const StudyData& a, const StudyData& b, int resamples = 1000, std::uint64_t seed = 0);

// A configuration's value as the "best of" lines say it: "0.1146 (single run, variance unknown)" for one run, else
// "mean 0.1146 ± 0.0043 (95% CI, 5 replicas)".
std::string ReplicaValueText(const MeanInterval& stats);

}  // namespace dltune
