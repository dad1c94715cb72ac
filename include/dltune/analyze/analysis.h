// The playbook's analyses of a study, as plain data: pure functions from a study's records to what its plots show.
// Renderers (the HTML report, the dashboard, the terminal) only consume these structs; nothing here draws, reads a
// file or touches the store. Every function is deterministic given its input (the bootstrap takes its seed).
//
// Playbook sections: "Extracting insight from experimental results", "Identifying bad search space boundaries",
// "Examining the training curves", "Detecting whether a change is useful with isolation plots", "Automate generically
// useful plots", "How many trials are needed to get good results with quasi-random search?", "How to apply gradient
// clipping", "Determining the number of steps for each training run".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// Everything the analyses read about one study. Trials are ordered by number; `evals` and `train` are keyed by trial
// number and ordered by step (train may be empty for trials that reported none).
struct StudyData {
  StudyRecord study;
  StudySpec spec;
  std::vector<TrialRecord> trials;
  std::map<std::uint64_t, std::vector<EvalMeasurement>> evals;
  std::map<std::uint64_t, std::vector<TrainMeasurement>> train;
};

// The objective as (split, metric), e.g. ("valid", "error_rate"), and its direction.
struct ObjectiveRef {
  std::string split;
  std::string metric;
  Direction direction = Direction::kMinimize;
  std::string Name() const { return split + "/" + metric; }
};
ObjectiveRef ObjectiveOf(const StudySpec& spec);

// ---- Basic hyperparameter axis plots ("Identifying bad search space boundaries") ----

// One trial on one param's axis.
struct AxisPoint {
  std::uint64_t trial = 0;
  std::string substudy;
  Value value;                      // the param's value in this trial
  double position = 0;              // numeric value (ranges), or the index of the value among `categories`
  std::optional<double> objective;  // the trial's best objective over training; absent when it has none
  bool infeasible = false;          // drawn at its value, marked
};

// One param that varies in the study (scientific or nuisance), and every trial that has it.
struct AxisPlot {
  std::string param_id;
  std::string param_name;
  Role role = Role::kNuisance;
  bool log_scale = false;
  bool categorical = false;             // discrete and categorical params: positions are indices into categories
  std::vector<std::string> categories;  // the choices as text, in the spec's order
  std::optional<double> lower, upper;   // the search space's bounds (ranges only)
  std::vector<AxisPoint> points;        // by trial number
};
std::vector<AxisPlot> HyperparameterAxisPlots(const StudyData& data);

// ---- Isolation plots ("Detecting whether a change is useful with isolation plots") ----

// The best trial for one scientific value (or bucket of a continuous scientific param): the nuisance params are
// "optimized away" by taking the best trial among those that share the scientific value.
struct IsolationPoint {
  std::string label;       // "adam", or "[0.001, 0.01)" for a bucket
  double position = 0;     // the value (numeric params: the bucket's geometric or arithmetic middle), or its index
  std::optional<double> best;  // absent when no trial with this value completed
  std::optional<std::uint64_t> best_trial;
  int trials = 0;      // trials with this value (any state)
  int completed = 0;   // of which completed
};
struct IsolationPlot {
  std::string param_id;
  std::string param_name;
  bool categorical = false;
  bool log_scale = false;
  std::vector<IsolationPoint> points;  // in the spec's order of values, or by bucket
};
// One plot per scientific param; a continuous one (joint mode) is cut into `buckets` equal buckets of its (log) range.
std::vector<IsolationPlot> IsolationPlots(const StudyData& data, int buckets = 5);

// ---- Training curves ("Examining the training curves") ----

struct CurvePoint {
  std::int64_t step = 0;
  double value = 0;
};
struct TrainingCurve {
  std::uint64_t trial = 0;
  std::string substudy;
  std::string series;  // "train/loss" (training steps), or an evaluation "split/metric" such as "valid/error_rate"
  std::vector<CurvePoint> points;  // by step; a long training series is thinned to at most `max_points`, evenly
  bool highlighted = false;        // among the best `highlight` trials of its sub-study
  std::optional<std::int64_t> best_step;  // the trial's best step (retrospective optimal checkpoint)
};
// For every trial: train/loss and every evaluation series (train and valid splits; also test when present).
std::vector<TrainingCurve> TrainingCurves(const StudyData& data, int highlight = 3, std::size_t max_points = 500);

// ---- Best step vs max_train_steps ("Determining the number of steps for each training run") ----

struct BestStepPoint {
  std::uint64_t trial = 0;
  std::string substudy;
  std::int64_t best_step = 0;
  double fraction = 0;  // best_step / max_train_steps
  std::optional<double> objective;
};
// Completed trials with a best step.
std::vector<BestStepPoint> BestSteps(const StudyData& data);

// ---- Gradient norms ("How to apply gradient clipping") ----

struct HistogramBin {
  double lower = 0, upper = 0;  // [lower, upper)
  std::int64_t count = 0;
};
struct GradientNorms {
  std::vector<TrainingCurve> curves;  // series "grad_norm" per trial (thinned like TrainingCurves)
  std::vector<HistogramBin> histogram;  // of every recorded norm, on a log scale of `bins` bins
  std::optional<double> p90;            // the 90th percentile: the playbook's suggested clipping threshold
  std::optional<double> clipped_fraction;  // of steps with a `clipped` flag, the share clipped
  std::int64_t steps = 0;                  // norms recorded
};
GradientNorms GradientNormAnalysis(const StudyData& data, int bins = 30, std::size_t max_points = 500);

// ---- "Have we sampled enough?" (Figure 3 of "How many trials are needed ...") ----

// The distribution of the best objective of `budget` trials drawn with replacement from the completed trials.
struct BootstrapBox {
  int budget = 0;
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0;
};
struct BootstrapPlot {
  std::string substudy;  // one plot per sub-study
  std::vector<BootstrapBox> boxes;  // budgets 1..n (n = the sub-study's completed trials)
};
std::vector<BootstrapPlot> BootstrapBestObjective(const StudyData& data, int resamples = 1000,
                                                  std::uint64_t seed = 0);

}  // namespace dltune
