// gp: Bayesian optimization with a Gaussian-process model of the objective and a Gaussian-process classifier of
// feasibility (docs/study-spec.md, "The gp sampler", describes it for users).
//
// A suggestion: encode the history (gp_encoding.h), fit the objective model on the completed trials, add the
// pending and infeasible trials as believed points, fit the classifier on completed vs infeasible trials, score a
// candidate set (quasi-random points plus perturbations of the best trials) by the acquisition, refine the best few
// with L-BFGS over their float params, and return the best point that does not repeat a trial.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <span>

#include <fmt/format.h>
#include <nlopt.hpp>

#include "core/rng.h"
#include "gp_acquisition.h"
#include "gp_classifier.h"
#include "gp_encoding.h"
#include "gp_regression.h"
#include "samplers.h"
#include "search/halton.h"

namespace dltune::internal {
namespace {

// Fewer completed trials than this leave nothing to fit: the trial is a Halton point.
constexpr std::size_t kMinCompleted = 2;
// Before any trial is feasible, this many infeasible ones make the feasibility model worth fitting.
constexpr std::size_t kMinInfeasibleAlone = 2;
// The incumbent is the best posterior mean among completed trials at least this likely to be feasible.
constexpr double kIncumbentFeasibility = 0.99;
// Candidate signal variances of the feasibility classifier's latent function.
const std::vector<double> kClassifierSignalVariances = {0.25, 1.0, 4.0, 16.0};
// Candidate length scales of the classifier, as multiples of the objective model's.
constexpr double kClassifierLengthFactors[] = {1.0, 0.5, 0.25};
// Above this many completed trials the hyperparameter fit gets fewer restarts and evaluations.
constexpr Eigen::Index kLargeHistory = 100;
// Perturbations: around this many of the best completed trials, this many each, with these step sizes (unit
// interval) cycling.
constexpr std::size_t kPerturbedTrials = 5;
constexpr std::size_t kPerturbationsEach = 32;
constexpr double kPerturbationSteps[] = {0.01, 0.04, 0.15};
// L-BFGS refinement of the best candidates.
constexpr std::size_t kRefined = 4;
constexpr int kRefineEvaluations = 40;
// A point closer than this to a trial in every feature (1% of a range, the same value of a list) repeats it.
constexpr double kMinSeparation = 0.01;
// The largest unit coordinate used (FromUnit expects [0, 1)).
constexpr double kUnitMax = 1.0 - 1e-12;

// Stream numbers under MixSeed(seed, index) for the randomness of one suggestion.
constexpr std::uint64_t kCandidateStream = 1;
constexpr std::uint64_t kPerturbationStream = 2;
constexpr std::uint64_t kFitStream = 3;

// The objective values with their bad (upper) tail compressed: values above the median m become
// m + s log(1 + (y - m) / s), s the median absolute deviation from m. Trials that trained badly (a loss of 1e3 next to
// losses of 0.1) would otherwise dominate the standardized targets and flatten the good region, where the model must
// be accurate; the order of the values, and all of them below the median, are kept.
Eigen::VectorXd CompressBadTail(const std::vector<double>& values) {
  Eigen::VectorXd y = Eigen::Map<const Eigen::VectorXd>(values.data(), static_cast<Eigen::Index>(values.size()));
  const auto median_of = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double median = median_of(values);
  std::vector<double> deviations(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) deviations[i] = std::abs(values[i] - median);
  const double scale = median_of(deviations);
  if (!(scale > 0)) return y;
  for (double& v : y) {
    if (v > median) v = median + scale * std::log1p((v - median) / scale);
  }
  return y;
}

struct EncodedHistory {
  std::vector<Eigen::VectorXd> completed;
  std::vector<double> values;
  std::vector<const Assignment*> completed_params;
  std::vector<Eigen::VectorXd> infeasible;
  std::vector<Eigen::VectorXd> pending;
};

Eigen::MatrixXd Columns(const std::vector<Eigen::VectorXd>& points, int features) {
  Eigen::MatrixXd matrix(features, static_cast<Eigen::Index>(points.size()));
  for (std::size_t i = 0; i < points.size(); ++i) matrix.col(static_cast<Eigen::Index>(i)) = points[i];
  return matrix;
}

double Normal(Rng& rng) {
  const double u = 1.0 - rng.Uniform();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * rng.Uniform());
}

// One suggestion's models. The acquisition points into the others, so the struct is neither copied nor moved.
struct Models {
  Models() = default;
  Models(const Models&) = delete;
  Models& operator=(const Models&) = delete;

  std::optional<GpRegression> objective;
  std::optional<GpClassifier> feasibility;
  std::optional<GpRegression> spread;
  double incumbent = 0;
  std::optional<GpAcquisition> acquisition;
};

class GpSampler final : public Sampler {
 public:
  GpSampler(const SamplerOptions& options, const SamplingTarget& target)
      : target_(target),
        halton_(MakeUnitCubeSampler(SamplerOptions{.name = "halton"}, target)),
        search_dims_(SearchDimensions(*target.space, target.joint)),
        encoding_(*target.space, ModelParams(*target.space, target.joint, search_dims_)) {
    const std::uint64_t dims = SampledDimensions(*target.space, target.joint).size();
    const std::uint64_t automatic =
        options.warm_start.empty() ? std::min<std::uint64_t>(target.trials, std::max<std::uint64_t>(5, 2 * dims)) : 0;
    planned_ = options.initial_trials < 0
                   ? automatic
                   : std::min<std::uint64_t>(target.trials, static_cast<std::uint64_t>(options.initial_trials));
  }

  std::uint64_t TrialCount() const override { return target_.trials; }
  std::uint64_t PlannedTrialCount() const override { return planned_; }

  Assignment Suggest(std::uint64_t index) const override {
    if (index >= planned_) {
      throw Error(
          fmt::format("gp trial {} comes after the {} initial trials and is made from the history of the "
                      "study (SuggestFromHistory)",
                      index, planned_));
    }
    return halton_->Suggest(index);
  }

  Assignment SuggestFromHistory(std::uint64_t index, std::span<const Observation> history) const override {
    if (index < planned_ || search_dims_.empty()) return halton_->Suggest(index);
    const EncodedHistory encoded = Encode(history);
    const bool enough = encoded.completed.size() >= kMinCompleted;
    const bool feasibility_only = encoded.completed.empty() && encoded.infeasible.size() >= kMinInfeasibleAlone;
    if (!enough && !feasibility_only) return halton_->Suggest(index);

    const std::uint64_t seed = MixSeed(target_.seed, index);
    Models models;
    if (enough) {
      FitObjective(encoded, seed, models);
    } else {
      FitFeasibilityAlone(encoded, models);
    }
    return Maximize(*models.acquisition, encoded, Given(index), seed);
  }

 private:
  // The sampled dimensions the model chooses: all but scientific ones (in joint mode those come from the Halton
  // point of the trial index, so every scientific value keeps its share of the trials).
  static std::vector<std::size_t> SearchDimensions(const SearchSpace& space, bool joint) {
    std::vector<std::size_t> dims;
    for (const std::size_t d : SampledDimensions(space, joint)) {
      if (space.params()[d].role != Role::kScientific) dims.push_back(d);
    }
    return dims;
  }

  // The model's inputs: the search dimensions, then (joint mode) every scientific param that varies.
  static std::vector<std::size_t> ModelParams(const SearchSpace& space, bool joint, std::vector<std::size_t> dims) {
    if (!joint) return dims;
    for (std::size_t i = 0; i < space.params().size(); ++i) {
      const Param& param = space.params()[i];
      if (param.role == Role::kScientific && param.Varies()) dims.push_back(i);
    }
    return dims;
  }

  // The scientific values of trial `index`, as the halton sampler gives them.
  Assignment Given(std::uint64_t index) const {
    Assignment given;
    for (auto& [id, value] : halton_->Suggest(index)) {
      const Param* param = target_.space->Find(id);
      if (param != nullptr && param->role == Role::kScientific) given.emplace(id, value);
    }
    return given;
  }

  Assignment Complete(const Assignment& given, const std::vector<double>& unit) const {
    return CompleteAssignment(*target_.space, given, search_dims_, [&](std::size_t d) { return unit[d]; });
  }

  // Whether an observation belongs to this sub-study: in separate mode, its scientific values (where recorded)
  // are this sub-study's.
  bool InSubStudy(const Assignment& params) const {
    if (target_.joint) return true;
    return std::all_of(target_.scientific.begin(), target_.scientific.end(), [&](const auto& entry) {
      const auto it = params.find(entry.first);
      return it == params.end() || SameValue(it->second, entry.second);
    });
  }

  EncodedHistory Encode(std::span<const Observation> history) const {
    EncodedHistory encoded;
    for (const Observation& observation : history) {
      if (!InSubStudy(observation.params)) continue;
      auto x = encoding_.Encode(observation.params);
      if (!x) continue;
      switch (observation.kind) {
        case ObservationKind::kCompleted:
          if (!std::isfinite(observation.value)) continue;
          encoded.completed.push_back(std::move(*x));
          encoded.values.push_back(observation.value);
          encoded.completed_params.push_back(&observation.params);
          break;
        case ObservationKind::kInfeasible: encoded.infeasible.push_back(std::move(*x)); break;
        case ObservationKind::kPending: encoded.pending.push_back(std::move(*x)); break;
      }
    }
    return encoded;
  }

  void FitObjective(const EncodedHistory& encoded, std::uint64_t seed, Models& models) const {
    const int features = encoding_.features();
    const Eigen::MatrixXd points = Columns(encoded.completed, features);
    Eigen::VectorXd y = CompressBadTail(encoded.values);
    const double mean = y.mean();
    const double sd = std::sqrt((y.array() - mean).square().mean());
    y = (y.array() - mean) / (sd > 1e-12 * (1.0 + std::abs(mean)) ? sd : 1.0);

    // The data-driven start nearly always wins; the restarts guard against a poor local optimum, and are cut
    // short when the O(n^3) evaluations get expensive.
    GpFitOptions fit;
    const bool large = points.cols() > kLargeHistory;
    fit.restarts = large ? 2 : 3;
    fit.max_evaluations = large ? 40 : 60;
    fit.restart_evaluations = large ? 20 : 40;
    fit.seed = MixSeed(seed, kFitStream);
    const GpHyperparameters hyper =
        FitGpHyperparameters(points, y, encoding_.feature_groups(), encoding_.groups(), fit);
    const ArdMatern kernel(encoding_.feature_groups(), hyper.signal_variance, hyper.length_scales);
    GpRegression base(points, y, kernel, hyper.noise_variance);

    if (!encoded.infeasible.empty()) {
      std::vector<Eigen::VectorXd> labelled = encoded.completed;
      labelled.insert(labelled.end(), encoded.infeasible.begin(), encoded.infeasible.end());
      Eigen::VectorXd labels(static_cast<Eigen::Index>(labelled.size()));
      labels.head(points.cols()).setOnes();
      labels.tail(static_cast<Eigen::Index>(encoded.infeasible.size())).setConstant(-1.0);
      models.feasibility.emplace(Columns(labelled, features), labels, encoding_.feature_groups(),
                                 ClassifierLengthScales(hyper.length_scales), kClassifierSignalVariances);
    }

    // The incumbent: the best posterior mean among completed trials that are surely feasible.
    Eigen::VectorXd means;
    Eigen::VectorXd variances;
    base.PredictMany(points, means, variances);
    double incumbent = std::numeric_limits<double>::infinity();
    double fallback = std::numeric_limits<double>::infinity();
    const double log_threshold = std::log(kIncumbentFeasibility);
    const Eigen::VectorXd log_pof =
        models.feasibility ? models.feasibility->LogProbabilityMany(points) : Eigen::VectorXd::Zero(points.cols());
    for (Eigen::Index i = 0; i < points.cols(); ++i) {
      fallback = std::min(fallback, means(i));
      if (log_pof(i) >= log_threshold) incumbent = std::min(incumbent, means(i));
    }
    models.incumbent = std::isfinite(incumbent) ? incumbent : fallback;

    // Kriging believer: pending trials enter at their posterior mean, so the variance collapses there and
    // concurrent suggestions go elsewhere. Infeasible trials enter too, at their posterior mean but no better than
    // the worst completed trial (on the compressed scale): a diverged trial is no improvement, so a region whose
    // mean extrapolates below the incumbent stops attracting trials once trials there diverge. The classifier alone
    // is too cautious for that: its Laplace approximation keeps a probability of feasibility of a few percent even
    // where every trial diverged, which a large expected improvement outweighs.
    std::vector<Eigen::VectorXd> believed = encoded.pending;
    believed.insert(believed.end(), encoded.infeasible.begin(), encoded.infeasible.end());
    if (believed.empty()) {
      models.objective.emplace(std::move(base));
    } else {
      const Eigen::MatrixXd fantasy_points = Columns(believed, features);
      Eigen::MatrixXd augmented(features, points.cols() + fantasy_points.cols());
      augmented << points, fantasy_points;
      Eigen::VectorXd fantasies;
      base.PredictMany(fantasy_points, fantasies, variances);
      const double worst = y.maxCoeff();
      const auto pending = static_cast<Eigen::Index>(encoded.pending.size());
      for (Eigen::Index i = pending; i < fantasies.size(); ++i) fantasies(i) = std::max(fantasies(i), worst);
      Eigen::VectorXd augmented_y(augmented.cols());
      augmented_y << y, fantasies;
      models.objective.emplace(std::move(augmented), augmented_y, kernel, hyper.noise_variance);
    }
    models.acquisition.emplace(&*models.objective, models.incumbent,
                               models.feasibility ? &*models.feasibility : nullptr, nullptr);
  }

  // The classifier's candidate length scales: the objective model's, and shorter ones, as feasibility often
  // changes faster than the objective (a sharp divergence boundary).
  static std::vector<Eigen::VectorXd> ClassifierLengthScales(const Eigen::VectorXd& base) {
    std::vector<Eigen::VectorXd> candidates;
    for (const double factor : kClassifierLengthFactors) candidates.emplace_back(factor * base);
    return candidates;
  }

  // No trial is feasible yet: maximize the probability of feasibility, spread away from the pending trials.
  void FitFeasibilityAlone(const EncodedHistory& encoded, Models& models) const {
    const int features = encoding_.features();
    const Eigen::MatrixXd points = Columns(encoded.infeasible, features);
    const GpFitObjective defaults(points, Eigen::VectorXd::Zero(points.cols()), encoding_.feature_groups(),
                                  encoding_.groups());
    const Eigen::VectorXd length_scales = defaults.Hyperparameters(defaults.DataDrivenStart()).length_scales;
    models.feasibility.emplace(points, -Eigen::VectorXd::Ones(points.cols()), encoding_.feature_groups(),
                               ClassifierLengthScales(length_scales), kClassifierSignalVariances);
    if (!encoded.pending.empty()) {
      const Eigen::MatrixXd pending = Columns(encoded.pending, features);
      models.spread.emplace(pending, Eigen::VectorXd::Zero(pending.cols()),
                            ArdMatern(encoding_.feature_groups(), 1.0, length_scales), 1e-6);
    }
    models.acquisition.emplace(nullptr, 0.0, &*models.feasibility, models.spread ? &*models.spread : nullptr);
  }

  // The unit coordinates (over the search dimensions) of a recorded trial; params it lacks sit in the middle.
  std::vector<double> UnitOf(const Assignment& params) const {
    std::vector<double> unit(search_dims_.size(), 0.5);
    for (std::size_t d = 0; d < search_dims_.size(); ++d) {
      const Param& param = target_.space->params()[search_dims_[d]];
      const auto it = params.find(param.id);
      if (it == params.end()) continue;
      const double u = param.ToUnit(it->second);
      if (std::isfinite(u)) unit[d] = std::clamp(u, 0.0, kUnitMax);
    }
    return unit;
  }

  std::vector<std::vector<double>> Candidates(const EncodedHistory& encoded, std::uint64_t seed) const {
    const std::size_t dims = search_dims_.size();
    std::vector<std::vector<double>> candidates;
    const std::size_t quasi_random = std::min<std::size_t>(2048, 256 + 128 * dims);
    // MakeGpSampler keeps dims within ScrambledHalton's limit.
    const ScrambledHalton halton(dims, MixSeed(seed, kCandidateStream));
    for (std::size_t i = 0; i < quasi_random; ++i) {
      std::vector<double>& point = candidates.emplace_back(dims);
      halton.Point(i, point);
    }

    // Perturbations of the best completed trials: steps of several sizes in a few params at a time.
    std::vector<std::size_t> order(encoded.values.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return encoded.values[a] < encoded.values[b]; });
    order.resize(std::min(order.size(), kPerturbedTrials));
    Rng rng(MixSeed(seed, kPerturbationStream));
    const double probability = std::min(1.0, 2.0 / static_cast<double>(dims));
    for (const std::size_t best : order) {
      const std::vector<double> base = UnitOf(*encoded.completed_params[best]);
      for (std::size_t k = 0; k < kPerturbationsEach; ++k) {
        std::vector<double> point = base;
        const double step = kPerturbationSteps[k % std::size(kPerturbationSteps)];
        const std::size_t forced = static_cast<std::size_t>(rng.Below(dims));
        for (std::size_t d = 0; d < dims; ++d) {
          if (d != forced && rng.Uniform() >= probability) continue;
          const Param& param = target_.space->params()[search_dims_[d]];
          point[d] = param.IsChoice() ? rng.Uniform() : point[d] + step * Normal(rng);
          point[d] = std::clamp(point[d], 0.0, kUnitMax);
        }
        candidates.push_back(std::move(point));
      }
    }
    return candidates;
  }

  // A point the acquisition was evaluated at.
  struct Scored {
    double score = 0;
    std::vector<double> unit;  // over the search dimensions
    Eigen::VectorXd x;         // encoded
  };

  Assignment Maximize(const GpAcquisition& acquisition, const EncodedHistory& encoded, const Assignment& given,
                      std::uint64_t seed) const {
    const std::vector<std::vector<double>> candidates = Candidates(encoded, seed);
    Eigen::MatrixXd features(encoding_.features(), static_cast<Eigen::Index>(candidates.size()));
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      // Candidates are valid assignments, so they always encode.
      features.col(static_cast<Eigen::Index>(j)) = *encoding_.Encode(Complete(given, candidates[j]));
    }
    const Eigen::VectorXd scores = acquisition.ValueMany(features);
    std::vector<Scored> scored;
    scored.reserve(candidates.size() + kRefined);
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      const auto column = static_cast<Eigen::Index>(j);
      scored.push_back({scores(column), candidates[j], features.col(column)});
    }
    std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });

    std::vector<Scored> refined;
    std::vector<const Eigen::VectorXd*> starts;
    for (const Scored& start : scored) {
      if (refined.size() >= kRefined) break;
      // Distinct starts only: candidates that encode alike (same choices, clamped ranges) refine alike.
      if (std::any_of(starts.begin(), starts.end(), [&](const Eigen::VectorXd* x) { return *x == start.x; })) continue;
      starts.push_back(&start.x);
      refined.push_back(Refine(acquisition, given, start));
    }
    scored.insert(scored.end(), refined.begin(), refined.end());
    std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });

    // The best point that does not repeat a trial; when every one does (a small discrete space), the best.
    const Eigen::MatrixXd tried = Tried(encoded);
    const auto repeats = [&](const Eigen::VectorXd& x) {
      for (Eigen::Index i = 0; i < tried.cols(); ++i) {
        if ((tried.col(i) - x).cwiseAbs().maxCoeff() < kMinSeparation) return true;
      }
      return false;
    };
    const auto chosen = std::find_if(scored.begin(), scored.end(), [&](const Scored& s) { return !repeats(s.x); });
    return Complete(given, (chosen != scored.end() ? *chosen : scored.front()).unit);
  }

  // Every trial of the history that has a place, as columns.
  Eigen::MatrixXd Tried(const EncodedHistory& encoded) const {
    std::vector<Eigen::VectorXd> all = encoded.completed;
    all.insert(all.end(), encoded.infeasible.begin(), encoded.infeasible.end());
    all.insert(all.end(), encoded.pending.begin(), encoded.pending.end());
    return Columns(all, encoding_.features());
  }

  // L-BFGS over the float params that exist at `start`, the others held.
  Scored Refine(const GpAcquisition& acquisition, const Assignment& given, const Scored& start) const {
    const Assignment params = Complete(given, start.unit);
    std::vector<std::size_t> dims;
    std::vector<int> columns;
    for (std::size_t d = 0; d < search_dims_.size(); ++d) {
      const Param& param = target_.space->params()[search_dims_[d]];
      if (param.kind != ParamKind::kFloat || params.count(param.id) == 0) continue;
      dims.push_back(d);
      columns.push_back(encoding_.FirstFeature(static_cast<int>(d)));
    }
    if (dims.empty()) return start;

    struct State {
      const GpAcquisition* acquisition;
      const std::vector<int>* columns;
      Eigen::VectorXd x;
      Scored best;
    } state{&acquisition, &columns, start.x, start};
    const auto callback = [](unsigned n, const double* v, double* grad, void* data) -> double {
      auto* s = static_cast<State*>(data);
      for (unsigned i = 0; i < n; ++i) s->x((*s->columns)[i]) = v[i];
      Eigen::VectorXd gradient;
      const double score = s->acquisition->Value(s->x, grad != nullptr ? &gradient : nullptr);
      if (!std::isfinite(score)) {
        if (grad != nullptr) std::fill(grad, grad + n, 0.0);
        return std::numeric_limits<double>::max();
      }
      if (grad != nullptr) {
        for (unsigned i = 0; i < n; ++i) grad[i] = -gradient((*s->columns)[i]);
      }
      if (score > s->best.score) {
        s->best.score = score;
        s->best.x = s->x;
      }
      return -score;
    };
    nlopt::opt optimizer(nlopt::LD_LBFGS, static_cast<unsigned>(dims.size()));
    optimizer.set_lower_bounds(0.0);
    optimizer.set_upper_bounds(kUnitMax);
    optimizer.set_min_objective(callback, &state);
    optimizer.set_maxeval(kRefineEvaluations);
    optimizer.set_ftol_rel(1e-9);
    optimizer.set_xtol_rel(1e-7);
    std::vector<double> v(columns.size());
    for (std::size_t i = 0; i < columns.size(); ++i) v[i] = std::clamp(start.x(columns[i]), 0.0, kUnitMax);
    double minimum = 0;
    try {
      optimizer.optimize(v, minimum);
    } catch (const std::exception&) {
      // Roundoff or a failed line search: the best point seen so far stands.
    }
    for (std::size_t i = 0; i < dims.size(); ++i) {
      state.best.unit[dims[i]] = std::clamp(state.best.x(columns[i]), 0.0, kUnitMax);
    }
    return state.best;
  }

  SamplingTarget target_;
  std::unique_ptr<Sampler> halton_;
  std::vector<std::size_t> search_dims_;
  GpEncoding encoding_;
  std::uint64_t planned_ = 0;
};

}  // namespace

std::unique_ptr<Sampler> MakeGpSampler(const SamplerOptions& options, const SamplingTarget& target) {
  // The initial trials are Halton points, so halton's dimension limit applies.
  const auto dims = SampledDimensions(*target.space, target.joint);
  if (dims.size() > ScrambledHalton::kMaxDims) {
    const Param& first_extra = target.space->params()[dims[ScrambledHalton::kMaxDims]];
    throw SpecError(first_extra.where, "space." + first_extra.id,
                    fmt::format("is sampled param number {}; gp supports at most {}", ScrambledHalton::kMaxDims + 1,
                                ScrambledHalton::kMaxDims));
  }
  return std::make_unique<GpSampler>(options, target);
}

}  // namespace dltune::internal
