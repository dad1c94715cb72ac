// Procedures: studies planned from a parent study (`dltune plan KIND --from PARENT`).
//
// A procedure is an ordinary study. Planning one reads the parent's records and writes a spec a person can read,
// commit and edit: the parent's workload, training and space, the configurations the procedure trains (a `list`
// sampler), and a `procedure:` block naming the kind, the parent, the options and the parent trials the configurations
// come from. The same request on the same records writes the same bytes, so planning again and running again resumes.
// `dltune run` runs it like any study; its analyses (dltune/analyze/trial_variance.h) read its records and the
// parent trials it names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dltune/store/store.h"

namespace dltune {

// `dltune plan retrain`: the best configurations of the parent, each trained `replicas` times (the playbook's "run
// the best trial N times to characterize the run-to-run trial variance"). Replica 0 trains with the parent trial's
// seed and so reproduces it.
struct RetrainRequest {
  std::string parent;          // the parent study's name
  std::uint64_t top = 1;       // the best `top` configurations of each sub-study
  std::uint64_t replicas = 5;  // at least 2: one run tells nothing of the variance
  std::string name;            // the new study's name; "" = "<parent>-retrain"
};

// `dltune plan round2`: the best configurations of round 1 trained longer, with the playbook's round-2 schedule
// (ExtendForRound2: the extra steps extend the time at a high learning rate; warmup kept as it was, in steps).
struct Round2Request {
  std::string parent;
  std::uint64_t top = 3;  // the best `top` configurations of each sub-study
  std::string steps;      // "4x" (a multiple of the parent's max_train_steps) or a number of steps, larger
  std::string name;       // "" = "<parent>-round2"
};

// `dltune plan fit-steps`: the playbook's "Algorithm for picking an initial candidate for max_train_steps using a
// learning rate sweep": the parent's best configuration with a constant learning rate and no regularization (weight
// decay, dropout and label smoothing at 0), its learning rate swept on a grid, each trial `steps` long; the analysis
// (dltune/analyze/step_budget.h) finds the first step at which each fits the training set.
struct FitStepsRequest {
  std::string parent;                  // a study's name, or a spec file (its first trial's configuration)
  std::string fit;                     // "train/error_rate<=0.01" (FitCondition); "" = DefaultFitCondition
  std::int64_t steps = 0;              // N: a budget within which the training set can be fit; 0 = the spec's
  std::vector<double> learning_rates;  // empty: 7 log-spaced over the range the spec searches
  std::int64_t eval_every = 0;         // 0: steps / 100 (at least 1)
  std::int64_t batch_size = 0;         // 0: the configuration's; from a throughput study, the batch size it recommends
  std::string name;                    // "" = "<parent>-fit-steps" ("<spec>-fit-steps" from a throughput study)
};

// `dltune plan apply-steps`: a fit-steps study's candidate max_train_steps applied: the spec the lineage started from
// (the spec file or the study the sweeps were planned from) with that max_train_steps and the sweep's batch size,
// ready to tune: the playbook's first study of a project.
struct ApplyStepsRequest {
  std::string parent;      // the fit-steps study
  std::int64_t steps = 0;  // 0: the study's candidate max_train_steps
  std::string name;        // "" = "<spec>-tuning"
};

// `dltune plan expand`: the parent's own spec with each range its best trials crowd the edge of (its boundary findings,
// dltune doctor) expanded beyond that edge: the playbook's "Identifying bad search space boundaries". Same seed, so
// the quasi-random points of the other params stay as they were.
struct ExpandRequest {
  std::string parent;  // the study whose space is expanded
  std::string name;    // "" = "<parent>-expanded"
};

// `dltune plan clipping`: the playbook's "Gradient clipping" as a remedy for instability: the baseline's best
// configuration at the unstable learning rate (an instability probe's, or given), constant, for an abbreviated run
// evaluated densely, once without clipping and once at each grad_clip_norm around the 90th percentile of the best
// trial's recorded gradient norms (half, once and twice it). Analysis: AnalyzeClipping (dltune/analyze/instability.h).
struct ClippingRequest {
  std::string parent;              // the baseline, or its instability probe, warmup or (for narrow-lr) clipping study
  std::vector<double> thresholds;  // empty: 0.5, 1 and 2 times the 90th percentile
  std::int64_t steps = 0;          // 0: the probe's steps, or min(500, the baseline's)
  double unstable_learning_rate = 0;  // 0: the probe's
  std::string name;                   // "" = "<baseline>-clipping"
};

// `dltune plan apply-clipping`: the baseline's spec with grad_clip_norm fixed at the clipping study's recommendation,
// to tune as the baseline did. `dltune plan narrow-lr`: the baseline's spec with the top of its learning-rate range
// below the unstable learning rate (half of it), for an instability neither warmup nor clipping cures.
struct DerivedRequest {
  std::string parent;  // the clipping study (narrow-lr: a clipping, warmup or probe study)
  std::string name;    // "" = "<baseline>-clipped" / "<baseline>-narrow-lr"
};

// `dltune plan throughput`: the playbook's batch-size sweep ("Determining the feasible batch sizes and estimating
// training throughput"): the parent's best configuration (a study's best trial, or a spec file's first trial) at every
// power of two in `batch_sizes`, `steps` steps each, one trial at a time with every core, smallest first; the runner
// stops at the first batch size that runs out of memory (the larger ones are recorded as not run). Analysis:
// dltune/analyze/throughput.h.
struct ThroughputRequest {
  std::string parent;         // a study's name, or the path of a spec file
  std::string batch_sizes;    // "LOW:HIGH": every power of two between them
  std::int64_t steps = 50;    // per batch size (at least 10: the first fifth is warm-up)
  std::uint64_t repeats = 2;  // measurements of each batch size, in rounds over the sizes (the spec's replicas)
  std::string name;           // "" = "<parent>-throughput"
};

// `dltune plan instability`: the playbook's "Identifying unstable workloads": the parent's best configuration at
// `multipliers` times its learning rate (a constant schedule, no warmup), each with the best trial's seed, for an
// abbreviated run evaluated densely early (training.eval_schedule) with every step's loss and gradient norm kept.
// Analysis: AnalyzeInstabilityProbe (dltune/analyze/instability.h).
struct InstabilityRequest {
  std::string parent;
  std::vector<double> multipliers = {2, 5, 10};  // each above 1
  std::int64_t steps = 0;                        // 0: 500, or the parent's max_train_steps when fewer
  std::string eval_schedule = "log:60";          // EvalSchedule text
  std::string name;                              // "" = "<parent>-instability"
};

// `dltune plan warmup`: the playbook's "How to apply learning rate warmup": the baseline's best configuration at
// `factor` times the unstable learning rate, warming up from 0 over each of `warmup_steps` then training
// 2 × warmup_steps at that rate (each trial's own budget, TrialMaxTrainSteps). The baseline is the probe's parent.
struct WarmupRequest {
  std::string parent;                      // an instability probe (dltune plan instability), or any study with
                                           // unstable_learning_rate given
  double unstable_learning_rate = 0;       // 0: the probe's unstable_base_learning_rate
  double factor = 10;                      // the base learning rate is factor × the unstable one; above 1
  std::vector<std::int64_t> warmup_steps;  // empty: powers of ten from 10 up to 10% of the baseline's
                                           // max_train_steps, and that 10%
  std::string name;                        // "" = "<parent>-warmup"
};

// `dltune plan apply-warmup`: the warmup prepended to the baseline ("we prepend this schedule onto the existing
// schedule"): the baseline's best configuration with warmup_steps W (replacing its own W0) and max_train_steps
// M - W0 + W, so after the warmup the schedule runs as before (step t of it is step t - W + W0 of the baseline's).
// Planned from the baseline, so its report compares with the baseline's trial.
struct ApplyWarmupRequest {
  std::string parent;             // the warmup study
  std::int64_t warmup_steps = 0;  // 0: the warmup study's shortest stable warmup
  std::uint64_t replicas = 1;     // trained this many times (more for a comparison beyond the noise)
  std::string name;               // "" = "<baseline>-warmup<W>"
};

// A spec written by a plan.
struct PlannedStudy {
  std::string name;
  std::string text;  // the spec, ending in a newline
  std::uint64_t configurations = 0;
  std::uint64_t trials = 0;  // configurations × replicas
};

// Throws Error (invalid input) for an unknown parent, a parent with no completed trial, a parent whose spec this
// dltune cannot read, replicas < 2, top < 1, or a round-2 budget that is not larger than the parent's.
PlannedStudy PlanRetrain(Store& store, const RetrainRequest& request);
PlannedStudy PlanRound2(Store& store, const Round2Request& request);
// `store` may be null when `request.parent` is a spec file.
PlannedStudy PlanFitSteps(Store* store, const FitStepsRequest& request);
PlannedStudy PlanApplySteps(Store& store, const ApplyStepsRequest& request);
PlannedStudy PlanExpand(Store& store, const ExpandRequest& request);
// `dltune plan fix`: the parent's spec with each nuisance param of an open `unimportant` finding (dltune doctor) fixed
// at the value the finding names (its best trial's), for the next round; Error when there is none.
PlannedStudy PlanFix(Store& store, const ExpandRequest& request);
PlannedStudy PlanClipping(Store& store, const ClippingRequest& request);
PlannedStudy PlanApplyClipping(Store& store, const DerivedRequest& request);
PlannedStudy PlanNarrowLearningRate(Store& store, const DerivedRequest& request);
PlannedStudy PlanInstability(Store& store, const InstabilityRequest& request);
PlannedStudy PlanWarmup(Store& store, const WarmupRequest& request);
PlannedStudy PlanApplyWarmup(Store& store, const ApplyWarmupRequest& request);
// The default warmup sweep for a baseline of `max_train_steps`: 10, 100, ... up to a tenth of it, and that tenth.
std::vector<std::int64_t> DefaultWarmupSteps(std::int64_t max_train_steps);
// `store` may be null when the parent is a spec file.
PlannedStudy PlanThroughput(Store* store, const ThroughputRequest& request);
// The powers of two between LOW and HIGH of "LOW:HIGH"; throws Error for anything else or fewer than two.
std::vector<std::int64_t> PowersOfTwoBetween(const std::string& text);

// The `--steps` of round 2 ("4x", "8000") against round 1's max_train_steps; throws Error naming the text.
std::int64_t Round2Steps(const std::string& steps, std::int64_t round1_steps);

// Writes the planned spec to `path` (atomically). The same plan twice is the same bytes, so a file already holding
// them is left alone (returns false); a file that differs — edited since it was planned, or another plan — is
// replaced only with `replace`, else Error (invalid input) names it. Returns true when it wrote. IoError when the file
// cannot be written.
bool WritePlannedSpec(const PlannedStudy& planned, const std::filesystem::path& path, bool replace);

}  // namespace dltune
