// The playbook's analyses of a study, as plain data: pure functions from a study's records to what its plots show.
// Renderers (the HTML report, the dashboard, the terminal) only consume these structs; nothing here draws, reads a
// file or touches the store. Every function is deterministic given its input (the bootstrap takes its seed), never
// throws on odd records (a trial without measurements simply has no curve), and is safe to call from any thread.
// docs/analyses.md is the user's reference of every analysis.
//
// Playbook sections: "Extracting insight from experimental results", "Identifying bad search space boundaries",
// "Examining the training curves", "Detecting whether a change is useful with isolation plots", "Automate generically
// useful plots", "How many trials are needed to get good results with quasi-random search?", "Gradient clipping",
// "Determining the number of steps for each training run".
//
// Terms used below:
// - A trial's *best objective* is its objective's best value over training (retrospective optimal checkpoint
//   selection): TrialRecord::best_value when the store has one, else the best (by the objective's direction) of its
//   evaluations of the objective's split and metric. BestObjectiveOf computes it; BestStepOf gives its step.
// - A sub-study's *best trials* are its completed trials with a best objective, best first (ties: lower trial
//   number first). TopTrials lists them.
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
  // For a study planned from another (spec.procedure.from_trials): those trials of the parent, as the parent
  // records them; empty otherwise, or when the parent is not in the store.
  std::vector<TrialRecord> parent_trials;
  // The decision log: notes and decisions, launches, evaluations of chosen checkpoints, and the studies planned
  // from this one (their names).
  std::vector<StudyNote> notes;
  std::vector<LaunchRecord> launches;
  std::vector<CheckpointEvaluation> evaluations;
  std::vector<std::string> children;
};

// The trial's best objective over training (see the terms above); nullopt when it has neither a best value nor a
// finite evaluation of the objective.
std::optional<double> BestObjectiveOf(const StudyData& data, const TrialRecord& trial);
// The step of that best objective: TrialRecord::best_step, else the step of the best evaluation (the earliest on
// ties); nullopt when there is none.
std::optional<std::int64_t> BestStepOf(const StudyData& data, const TrialRecord& trial);
// The numbers of the best `count` completed trials of each sub-study (sub-studies in index order, each best first).
std::vector<std::uint64_t> TopTrials(const StudyData& data, int count);
// The trials a chart of per-trial curves draws when one line per trial would be too many to read or to send: every
// trial when at most `limit` have measurements; else, up to `limit` in all, every running trial, then the sub-studies'
// best trials taken in rounds (each sub-study's best, then each one's second best, ...). By trial number.
std::vector<std::uint64_t> CurveTrials(const StudyData& data, std::size_t limit);
// `data` with only the trials `numbers` (their records and measurements), in the same order.
StudyData SubsetOfTrials(const StudyData& data, const std::vector<std::uint64_t>& numbers);

// ---- Basic hyperparameter axis plots ("Identifying bad search space boundaries") ----

// One trial on one param's axis.
struct AxisPoint {
  std::uint64_t trial = 0;
  std::string substudy;
  Value value;                                // the param's value in this trial
  double position = 0;                        // numeric value (ranges), or the index of the value among `categories`
  std::optional<double> objective;            // the trial's best objective over training; absent when it has none
  bool infeasible = false;                    // drawn at its value, marked
  TrialState state = TrialState::kCompleted;  // running, stopped and failed points show a best so far
};

// One param that varies in the study (scientific or nuisance), and every trial that has it.
struct AxisPlot {
  std::string param_id;
  std::string param_name;
  Role role = Role::kNuisance;
  bool log_scale = false;               // Scale::kLog ranges: draw the axis logarithmically (positions stay values)
  bool categorical = false;             // discrete and categorical params: positions are indices into categories
  std::vector<std::string> categories;  // the choices as text (FormatValue), in the spec's order
  std::optional<double> lower, upper;   // the search space's bounds (ranges only: Param::min and max)
  std::vector<AxisPoint> points;        // by trial number
};
// One plot per param that varies (scientific or nuisance; fixed ones have nothing to show), in spec order. Which
// trials are points: every trial that has the param (conditional params exist in some trials only) and either
// - is infeasible: drawn at its value, `infeasible` set and no objective (whatever it reached before diverging), or
// - has a best objective: completed trials, and running, stopped or failed ones with their best so far.
// Failed, pending, running and stopped trials without a best objective are left out, as are values outside the
// param's choices (impossible for records made from the spec).
std::vector<AxisPlot> HyperparameterAxisPlots(const StudyData& data);

// ---- Interactions of two hyperparameters (exploration exists to find them) ----

struct InteractionPoint {
  std::uint64_t trial = 0;
  std::string substudy;
  double x = 0, y = 0;              // the two params' values
  std::optional<double> objective;  // the trial's best objective; absent for an infeasible one
  bool infeasible = false;
};
struct InteractionPlot {
  AxisPlot x_axis, y_axis;  // the two params' axis plots (their names, scales and bounds; points not repeated)
  std::vector<InteractionPoint> points;  // trials that have both params and a best objective, or are infeasible
};
// For every pair of range params (float or int) that vary, in spec order ((a, b) with a before b), at most `max_pairs`
// of them: each trial holding both as a point at (a, b), coloured by its best objective. A diagonal band of good trials
// says the two interact: the best value of one depends on the other.
std::vector<InteractionPlot> InteractionPlots(const StudyData& data, std::size_t max_pairs = 6);

// ---- Isolation plots ("Detecting whether a change is useful with isolation plots") ----

// The best trial for one scientific value (or bucket of a continuous scientific param): the nuisance params are
// "optimized away" by taking the best trial among those that share the scientific value.
struct IsolationPoint {
  std::string label;    // "adam", or "[0.001, 0.01)" for a bucket (3 significant digits; the last one closed)
  double position = 0;  // the value (numeric params: the bucket's geometric or arithmetic middle), or its index
  std::optional<double> lower, upper;  // a bucket's edges (continuous params only)
  std::optional<double> best;          // absent when no trial with this value completed
  std::optional<std::uint64_t> best_trial;
  int trials = 0;     // trials with this value (any state)
  int completed = 0;  // of which completed
  // With replicas (spec.replicas > 1) the point is the configuration with the best mean, `best` that mean and these
  // its replicas and the mean's 95% interval; a single run otherwise (replicas 1, no interval: variance unknown).
  int replicas = 1;
  std::optional<double> low, high;
};
struct IsolationPlot {
  std::string param_id;
  std::string param_name;
  bool categorical = false;  // discrete and categorical params: positions are indices into the spec's values
  bool log_scale = false;
  std::vector<IsolationPoint> points;  // in the spec's order of values, or by bucket
};
// One plot per scientific param, in spec order (none when the study has no scientific param). Each point is the best
// completed trial (by best objective) among all trials holding that value, whatever the other params; running and
// stopped trials are counted in `trials` but never chosen, so every point is a whole training run. With replicas,
// configurations are compared by their means (AnalyzeTrialVariance) and `best_trial` is the best one's median replica.
// Lists (separate mode: one point per sub-study value) get one point per value in spec order, values no trial has
// included; a continuous one (joint mode) is cut into `buckets` (at least 1) equal buckets of its (log) range.
std::vector<IsolationPlot> IsolationPlots(const StudyData& data, int buckets = 5);

// ---- Training curves ("Examining the training curves") ----

struct CurvePoint {
  std::int64_t step = 0;
  double value = 0;
};
// Where a curve's points come from. The trainer also evaluates the train split, so an evaluation series can be
// named "train/loss" too: the source tells the per-step training loss from that evaluation.
enum class CurveSource {
  kTrainingSteps,  // TrainMeasurement: "train/loss" and "grad_norm", one point per recorded step
  kEvaluation,     // EvalMeasurement: "split/metric", one point per evaluation
};
struct TrainingCurve {
  std::uint64_t trial = 0;
  std::string substudy;
  TrialState state = TrialState::kCompleted;  // the trial's state (infeasible curves show the divergence)
  std::string series;  // "train/loss" (training steps), or an evaluation "split/metric" such as "valid/error_rate"
  CurveSource source = CurveSource::kEvaluation;
  std::vector<CurvePoint> points;         // by step; a long training series is thinned to at most `max_points`, evenly
  bool highlighted = false;               // among the best `highlight` trials of its sub-study
  std::optional<std::int64_t> best_step;  // the trial's best step (retrospective optimal checkpoint)
};
// For every trial with measurements (any state), by trial number: train/loss (training steps with a finite loss),
// then every evaluation series present (train and valid splits; also valid_sample and test when present) in
// name order. Non-finite values are left out of the points. A series longer than `max_points` (at least 3 is used)
// is thinned to `max_points` points evenly spaced by index that always include the first, the last and the point
// at the trial's best step (the nearest earlier step when that step was not recorded); evaluation series are rarely
// that long. `highlighted` marks TopTrials(data, highlight).
std::vector<TrainingCurve> TrainingCurves(const StudyData& data, int highlight = 3, std::size_t max_points = 500);

// ---- Best step vs max_train_steps ("Determining the number of steps for each training run") ----

struct BestStepPoint {
  std::uint64_t trial = 0;
  std::string substudy;
  std::int64_t best_step = 0;
  double fraction = 0;  // best_step / max_train_steps
  std::optional<double> objective;
};
// Completed trials with a best step (BestStepOf), by trial number.
std::vector<BestStepPoint> BestSteps(const StudyData& data);

// ---- Gradient norms ("Gradient clipping") ----

struct HistogramBin {
  double lower = 0, upper = 0;  // [lower, upper); the last bin also holds its upper edge
  std::int64_t count = 0;
};
struct GradientNorms {
  std::vector<TrainingCurve> curves;    // series "grad_norm" per trial with norms (thinned like TrainingCurves, which
                                        // also keeps each curve's largest norm: outliers are what this plot is for)
  std::vector<HistogramBin> histogram;  // of every recorded positive norm, on a log scale of `bins` bins
  std::optional<double> p90;            // the 90th percentile: the playbook's suggested clipping threshold
  std::optional<double> clipped_fraction;  // of steps with a `clipped` flag, the share clipped
  std::int64_t steps = 0;                  // norms recorded (finite, >= 0) in the pooled trials
};
// Curves for every trial with norms (highlighted as TrainingCurves(data, 3)). The histogram, p90, clipped_fraction
// and steps pool the steps of every trial that is not infeasible: a diverged trial's norms are the instability, not
// the "typical" norm the clipping threshold should sit just above. Bins span [smallest, largest] positive norm,
// log-spaced (one bin from v/1.1 to 1.1 v when every norm is v; none when no norm is positive); the p90 uses linear
// interpolation between order statistics (numpy's default) over every pooled norm, zeros included.
GradientNorms GradientNormAnalysis(const StudyData& data, int bins = 30, std::size_t max_points = 500);

// ---- "Have we sampled enough?" (Figure 3 of "How many trials are needed ...") ----

// The distribution of the best objective of `budget` trials drawn with replacement from the completed trials.
struct BootstrapBox {
  int budget = 0;
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0;
};
struct BootstrapPlot {
  std::string substudy;             // one plot per sub-study
  std::vector<BootstrapBox> boxes;  // at BootstrapBudgets(n) (n = the sub-study's completed trials)
};
// The budgets a plot of n trials shows: every budget 1..min(n, 50), then budgets growing by 5% each up to n, and n
// (none when n is 0).
// A box per budget of a 10,000-trial study would be 10,000 boxes no one can read (and 10,000 sorts).
std::vector<std::uint64_t> BootstrapBudgets(std::uint64_t n);
// For each sub-study (index order) with n >= 1 completed trials with a best objective: for every budget 1..n (boxes
// kept at BootstrapBudgets(n)), `resamples` (at least 1) draws of `budget` of those trials (in trial-number order)
// with replacement, each draw summarized by its best value (by the objective's direction); the box gives that
// distribution's min, quartiles (linear interpolation, numpy's default) and max. Each resample is one growing sequence
// of draws: budget k + 1 adds one trial to budget k's draw, so every budget's draws are still `budget` independent
// trials, the boxes move monotonically toward the best, and the cost is resamples * n draws. The draws come from
// Rng(MixSeed(seed, sub-study index)): for each budget in turn, one Rng::Below(n) per resample, in resample order
// (tools/bootstrap_reference.py reimplements it).
std::vector<BootstrapPlot> BootstrapBestObjective(const StudyData& data, int resamples = 1000, std::uint64_t seed = 0);
// The box of one budget: `resamples` draws of `budget` values of `values` with replacement (Rng(seed), Below(n) per
// draw, resample by resample), each summarized by its best by `direction`. An empty `values` gives a zero box.
BootstrapBox BestOfBudget(const std::vector<double>& values, std::uint64_t budget, Direction direction,
                          int resamples = 1000, std::uint64_t seed = 0);

}  // namespace dltune
