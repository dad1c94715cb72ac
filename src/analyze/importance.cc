// Hyperparameter importance by PED-ANOVA (Watanabe, Bansal, Hutter, IJCAI 2023, arXiv:2304.10255), with a bootstrap
// interval and a permutation noise floor. The estimator follows Optuna's PedAnovaImportanceEvaluator: each param's
// values are discretized to a grid, a Parzen estimator with Scott's bandwidth (plus a uniform prior kernel) is fitted
// on the grid to the top trials and to the region's trials, and the importance is (γ'/γ)² times the Pearson
// divergence between the two (Theorem 4.2 of the paper), per regime of a conditional param.
#include "dltune/analyze/importance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "analysis_util.h"
#include "core/rng.h"

namespace dltune {
namespace {

// A param's trials as cells of its grid.
struct Column {
  bool categorical = false;
  bool single = false;        // a single value: nothing to tell apart
  int cells = 1;              // grid points (ranges) or choices (lists)
  std::vector<int> index;     // per trial; -1 where the param is absent
  std::vector<double> prior;  // the prior kernel's mass per cell (ranges)
};

// The standard normal's lower and upper tail at z.
double Lower(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
double Upper(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

// Φ(b) - Φ(a) for a <= b, from the tail that keeps its digits.
double GaussMass(double a, double b) {
  if (a >= 0) return Upper(a) - Upper(b);
  if (b <= 0) return Lower(b) - Lower(a);
  return 1.0 - Lower(a) - Upper(b);
}

// The mass on each cell 0..cells-1 of a normal kernel (mu, sigma) discretized to integers and truncated to
// [-0.5, cells - 0.5].
std::vector<double> KernelMasses(double mu, double sigma, int cells) {
  std::vector<double> masses(static_cast<std::size_t>(cells));
  const double norm = GaussMass((-0.5 - mu) / sigma, (cells - 0.5 - mu) / sigma);
  for (int g = 0; g < cells; ++g) {
    masses[static_cast<std::size_t>(g)] = GaussMass((g - 0.5 - mu) / sigma, (g + 0.5 - mu) / sigma) / norm;
  }
  return masses;
}

Column MakeColumn(const Param& param, const std::vector<std::optional<Value>>& values, int steps) {
  Column column;
  column.index.assign(values.size(), -1);
  if (param.IsChoice()) {
    column.categorical = true;
    column.cells = static_cast<int>(std::max<std::size_t>(param.values.size(), 1));
    column.single = param.values.size() <= 1;
    for (std::size_t t = 0; t < values.size(); ++t) {
      if (!values[t]) continue;
      for (std::size_t i = 0; i < param.values.size(); ++i) {
        if (SameValue(param.values[i], *values[t])) column.index[t] = static_cast<int>(i);
      }
    }
    return column;
  }
  const bool log = param.scale == Scale::kLog;
  int cells = std::max(steps, 2);
  if (param.kind == ParamKind::kInt && log) {
    cells = std::min(static_cast<int>(std::ceil(std::log(param.max - param.min + 1) / std::log(2.0))) + 1, cells);
  } else if (param.kind == ParamKind::kInt) {
    cells = std::min(static_cast<int>(std::lround(param.max - param.min)) + 1, cells);
  }
  column.cells = cells;
  column.single = !(param.max > param.min) || cells < 2;
  if (column.single) return column;
  const double low = log ? std::log(param.min) : param.min;
  const double high = log ? std::log(param.max) : param.max;
  const double step = (high - low) / (cells - 1);
  for (std::size_t t = 0; t < values.size(); ++t) {
    const auto number = values[t] ? NumericValue(*values[t]) : std::nullopt;
    if (!number || (log && !(*number > 0))) continue;
    const double x = log ? std::log(*number) : *number;
    // Midpoints go to the lower cell, as Optuna's ceil(x - 0.5) does.
    const double cell = std::ceil((x - low) / step - 0.5);
    column.index[t] = static_cast<int>(std::clamp(cell, 0.0, static_cast<double>(cells - 1)));
  }
  column.prior = KernelMasses((cells - 1) / 2.0, cells, cells);
  return column;
}

// The Parzen estimator's probability of each cell given the counts of the trials in each cell.
std::vector<double> GridPdf(const Column& column, const std::vector<double>& counts, double prior_weight) {
  const auto cells = static_cast<std::size_t>(column.cells);
  std::vector<double> pdf(cells, 0.0);
  std::vector<std::size_t> observed;
  double total = 0;
  for (std::size_t g = 0; g < cells; ++g) {
    if (counts[g] > 0) {
      observed.push_back(g);
      total += counts[g];
    }
  }
  const double weight_sum = total + prior_weight;
  if (column.categorical) {
    // One kernel per observed choice: its choice plus prior_weight / kernels spread over every choice.
    const double base = prior_weight / static_cast<double>(observed.size() + 1);
    const double row_sum = static_cast<double>(cells) * base + 1.0;
    for (const std::size_t o : observed) {
      const double weight = counts[o] / weight_sum;
      for (std::size_t g = 0; g < cells; ++g) pdf[g] += weight * (base + (g == o ? 1.0 : 0.0)) / row_sum;
    }
    if (prior_weight > 0) {
      for (double& p : pdf) p += prior_weight / weight_sum / static_cast<double>(cells);
    }
    return pdf;
  }
  // Scott's rule on the cell indices, weighted by counts, never narrower than 0.5 / 1.64 (90% within one cell).
  double mean = 0;
  for (const std::size_t o : observed) mean += static_cast<double>(o) * counts[o];
  mean /= total;
  double squares = 0;
  for (const std::size_t o : observed)
    squares += (static_cast<double>(o) - mean) * (static_cast<double>(o) - mean) * counts[o];
  const double sd = std::sqrt(squares / std::max(1.0, total - 1));
  const double q1_count = std::floor(total / 4);
  const double q3_count = std::floor(total * 3 / 4);
  std::size_t q1 = observed.size(), q3 = observed.size();
  double cumulative = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    cumulative += counts[observed[i]];
    if (q1 == observed.size() && cumulative >= q1_count) q1 = i;
    if (q3 == observed.size() && cumulative > q3_count) q3 = i;
  }
  q3 = std::min(q3, observed.size() - 1);
  const double iqr = static_cast<double>(observed[q3]) - static_cast<double>(observed[q1]);
  const double sigma = std::max(1.059 * std::min(iqr / 1.34, sd) * std::pow(total, -0.2), 0.5 / 1.64);
  // Masses of a kernel at integer mu depend on g - mu only: a table over offsets -cells..cells-1 of the tails.
  const int n = column.cells;
  std::vector<double> lower(static_cast<std::size_t>(2 * n)), upper(lower.size());
  for (int d = -n; d < n; ++d) {
    const double z = (d + 0.5) / sigma;
    const int at = d + n;
    lower[static_cast<std::size_t>(at)] = Lower(z);
    upper[static_cast<std::size_t>(at)] = Upper(z);
  }
  const auto mass = [&](int da, int db) {  // Φ((db + 0.5) / σ) - Φ((da + 0.5) / σ)
    const int from = da + n, to = db + n;
    const auto a = static_cast<std::size_t>(from), b = static_cast<std::size_t>(to);
    if (da + 0.5 >= 0) return upper[a] - upper[b];
    if (db + 0.5 <= 0) return lower[b] - lower[a];
    return 1.0 - lower[a] - upper[b];
  };
  for (const std::size_t o : observed) {
    const int mu = static_cast<int>(o);
    const double weight = counts[o] / weight_sum / mass(-mu - 1, n - 1 - mu);
    for (int g = 0; g < n; ++g) pdf[static_cast<std::size_t>(g)] += weight * mass(g - mu - 1, g - mu);
  }
  for (std::size_t g = 0; g < cells; ++g) pdf[g] += prior_weight / weight_sum * column.prior[g];
  return pdf;
}

// Optuna's quantile filter: the trials whose loss is at most the ceil(q n)-th smallest (ties all kept).
std::vector<bool> TopQuantile(const std::vector<double>& losses, double quantile) {
  std::vector<bool> keep(losses.size(), true);
  if (quantile >= 1.0 || losses.empty()) return keep;
  const auto k = static_cast<std::size_t>(std::ceil(quantile * static_cast<double>(losses.size()))) - 1;
  std::vector<double> sorted = losses;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
  const double cutoff = sorted[k];
  for (std::size_t i = 0; i < losses.size(); ++i) keep[i] = losses[i] <= cutoff;
  return keep;
}

// The importance of every column over the trials `sample` (indices into the columns, repeats allowed) whose losses
// are `losses` (aligned with `sample`).
std::vector<double> Importances(const std::vector<Column>& columns, const std::vector<std::size_t>& sample,
                                const std::vector<double>& losses, const ImportanceSettings& settings) {
  std::vector<double> importances(columns.size(), 0.0);
  if (sample.size() <= 1) return importances;
  const std::vector<bool> target = TopQuantile(losses, settings.target_quantile);
  const std::vector<bool> region = TopQuantile(losses, settings.region_quantile);
  const auto target_count = static_cast<double>(std::count(target.begin(), target.end(), true));
  const auto region_count = static_cast<double>(std::count(region.begin(), region.end(), true));
  if (target_count == 0) return importances;
  const double quantile = target_count / region_count;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const Column& column = columns[c];
    if (column.single) continue;
    std::vector<double> top(static_cast<std::size_t>(column.cells), 0.0), local(top.size(), 0.0);
    double top_n = 0, local_n = 0;
    for (std::size_t i = 0; i < sample.size(); ++i) {
      const int cell = column.index[sample[i]];
      if (cell < 0 || !region[i]) continue;
      local[static_cast<std::size_t>(cell)] += 1;
      local_n += 1;
      if (target[i]) {
        top[static_cast<std::size_t>(cell)] += 1;
        top_n += 1;
      }
    }
    if (local_n < settings.min_trials_in_regime || top_n == 0) continue;
    const std::vector<double> p_top = GridPdf(column, top, settings.prior_weight);
    const std::vector<double> p_local = GridPdf(column, local, settings.prior_weight);
    double divergence = 0;
    for (std::size_t g = 0; g < p_top.size(); ++g) {
      const double t = p_top[g] + 1e-12, l = p_local[g] + 1e-12;  // Optuna's guard against 0 / 0
      divergence += l * (t / l - 1) * (t / l - 1);
    }
    const double alpha = top_n / target_count, beta = local_n / region_count;  // the regime's shares
    importances[c] = alpha * alpha / beta * divergence * (quantile * quantile);
  }
  return importances;
}

}  // namespace

double PedAnovaImportance(const Param& param, const std::vector<std::optional<Value>>& values,
                          const std::vector<double>& losses, const ImportanceSettings& settings) {
  const std::vector<Column> columns = {MakeColumn(param, values, settings.grid_steps)};
  std::vector<std::size_t> sample(std::min(values.size(), losses.size()));
  std::iota(sample.begin(), sample.end(), 0);
  std::vector<double> sampled(losses.begin(), losses.begin() + static_cast<std::ptrdiff_t>(sample.size()));
  return Importances(columns, sample, sampled, settings).front();
}

HyperparameterImportance AnalyzeImportance(const StudyData& data, const ImportanceSettings& settings) {
  HyperparameterImportance result{.settings = settings, .substudies = {}};
  if (!data.spec.space) return result;
  std::vector<const Param*> params;
  for (const Param* param : data.spec.space->WithRole(Role::kNuisance)) {
    if (param->Varies()) params.push_back(param);
  }
  const double sign = data.spec.objective.direction == Direction::kMinimize ? 1.0 : -1.0;
  for (const auto& group : analysis_util::RankedBySubStudy(data)) {
    if (group.size() < 2) continue;
    SubStudyImportance sub;
    sub.index = group.front().trial->substudy;
    sub.substudy = group.front().trial->substudy_label;
    sub.trials = static_cast<int>(group.size());
    sub.best_trial = group.front().trial->number;
    // Trials in number order, so the resamples do not depend on the ranking's ties.
    std::vector<const analysis_util::RankedTrial*> trials;
    trials.reserve(group.size());
    for (const auto& ranked : group) trials.push_back(&ranked);
    std::sort(trials.begin(), trials.end(), [](auto* a, auto* b) { return a->trial->number < b->trial->number; });
    std::vector<double> losses;
    losses.reserve(trials.size());
    for (const auto* t : trials) losses.push_back(sign * t->objective);
    const std::vector<bool> top = TopQuantile(losses, settings.target_quantile);
    sub.top_trials = static_cast<int>(std::count(top.begin(), top.end(), true));
    std::vector<Column> columns;
    for (const Param* param : params) {
      std::vector<std::optional<Value>> values;
      for (const auto* t : trials) {
        const auto found = t->trial->params.find(param->id);
        values.push_back(found == t->trial->params.end() ? std::nullopt : std::optional<Value>(found->second));
      }
      columns.push_back(MakeColumn(*param, values, settings.grid_steps));
      ParamImportance entry{.param_id = param->id, .param_name = param->name};
      entry.trials =
          static_cast<int>(std::count_if(values.begin(), values.end(), [](auto& v) { return v.has_value(); }));
      const auto best = group.front().trial->params.find(param->id);
      if (best != group.front().trial->params.end()) entry.best_value = best->second;
      sub.params.push_back(std::move(entry));
    }
    const std::size_t n = trials.size();
    std::vector<std::size_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    const std::vector<double> point = Importances(columns, all, losses, settings);
    // The bootstrap: resamples of the trials with replacement.
    std::vector<std::vector<double>> draws(columns.size());
    Rng resample_rng(MixSeed(settings.seed, 3 * sub.index));
    std::vector<std::size_t> sample(n);
    std::vector<double> sample_losses(n);
    const auto resample = [&](Rng& rng) {
      for (std::size_t i = 0; i < n; ++i) {
        sample[i] = static_cast<std::size_t>(rng.Below(n));
        sample_losses[i] = losses[sample[i]];
      }
    };
    for (int r = 0; r < std::max(settings.resamples, 1); ++r) {
      resample(resample_rng);
      const std::vector<double> values = Importances(columns, sample, sample_losses, settings);
      for (std::size_t c = 0; c < columns.size(); ++c) draws[c].push_back(values[c]);
    }
    // The noise floors: the objectives paired with the params at random, of the trials and of resamples of them.
    const int permutations = std::max(settings.permutations, 1);
    std::vector<double> floor(columns.size(), 0.0), resampled_floor(columns.size(), 0.0);
    Rng permute_rng(MixSeed(settings.seed, 3 * sub.index + 1));
    std::vector<double> shuffled = losses;
    for (int p = 0; p < permutations; ++p) {
      permute_rng.Shuffle(shuffled);
      const std::vector<double> values = Importances(columns, all, shuffled, settings);
      for (std::size_t c = 0; c < columns.size(); ++c) floor[c] += values[c] / permutations;
    }
    Rng null_rng(MixSeed(settings.seed, 3 * sub.index + 2));
    for (int p = 0; p < permutations; ++p) {
      resample(null_rng);
      null_rng.Shuffle(sample_losses);
      const std::vector<double> values = Importances(columns, sample, sample_losses, settings);
      for (std::size_t c = 0; c < columns.size(); ++c) resampled_floor[c] += values[c] / permutations;
    }
    for (std::size_t c = 0; c < columns.size(); ++c) {
      ParamImportance& entry = sub.params[c];
      std::sort(draws[c].begin(), draws[c].end());
      entry.importance = point[c];
      entry.low = analysis_util::Quantile(draws[c], settings.interval_low);
      entry.high = analysis_util::Quantile(draws[c], settings.interval_high);
      entry.noise_floor = floor[c];
      entry.resampled_floor = resampled_floor[c];
      entry.above_noise = entry.importance - entry.noise_floor;
      entry.above_noise_low = entry.low - entry.resampled_floor;
      entry.above_noise_high = entry.high - entry.resampled_floor;
      entry.indistinguishable = entry.above_noise_low <= 0;
    }
    result.substudies.push_back(std::move(sub));
  }
  return result;
}

}  // namespace dltune
