#include "report/importance_text.h"

#include <fmt/format.h>

#include "report/text_table.h"

namespace dltune {
namespace {

constexpr const char* kMethod = "PED-ANOVA";
constexpr const char* kReference =
    "S. Watanabe, A. Bansal, F. Hutter: PED-ANOVA: Efficiently Quantifying Hyperparameter Importance in Arbitrary "
    "Subspaces. IJCAI 2023 (arXiv:2304.10255)";

std::string Short(double value) { return fmt::format("{:.3g}", value); }

// `text` wrapped at spaces into lines of at most `width` bytes (a longer word keeps its own line).
std::string Wrapped(const std::string& text, std::size_t width = 100) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line + "\n";
}

std::string IntervalName(const ImportanceSettings& settings) {
  return fmt::format("{:g}-{:g}%", settings.interval_low * 100, settings.interval_high * 100);
}

}  // namespace

std::string BestValueText(const ParamImportance& param, const SubStudyImportance& substudy) {
  if (!param.best_value) return "";
  return fmt::format("{} (trial {})", FormatValue(*param.best_value), substudy.best_trial.value_or(0));
}

std::string ImportanceText(const StudyData& data, const HyperparameterImportance& importance) {
  const ImportanceSettings& s = importance.settings;
  std::string out = Wrapped(fmt::format(
      "Hyperparameter importance of study {} ({}: Watanabe et al., IJCAI 2023): how much each nuisance "
      "hyperparameter decides whether a trial reaches the top {:g}% of {}, against the noise floor (what a "
      "hyperparameter of no effect gets from the same trials: the mean over {} random pairings of objectives and "
      "params), with the {} bootstrap interval ({} resamples of the trials) of the importance above the floor. One "
      "whose interval holds 0 is indistinguishable from no effect: a candidate to fix in the next round, at the best "
      "trial's value.",
      data.study.name, kMethod, s.target_quantile * 100, data.spec.objective.Name(), s.permutations, IntervalName(s),
      s.resamples));
  if (importance.substudies.empty()) {
    return out + "\nNo sub-study has 2 completed trials with an objective yet.\n";
  }
  for (const SubStudyImportance& sub : importance.substudies) {
    out += fmt::format("\nsub-study {}: {} completed trials, {} in the top {:g}%{}\n", sub.substudy, sub.trials,
                       sub.top_trials, s.target_quantile * 100,
                       sub.top_trials < kMinTopTrialsToFix
                           ? fmt::format(" (fewer than {}: too few to tell which to fix)", kMinTopTrialsToFix)
                           : "");
    if (sub.params.empty()) {
      out += "  no nuisance hyperparameter varies\n";
      continue;
    }
    TextTable table(
        {"param", "importance", "noise floor", "above the floor", "interval " + IntervalName(s), "verdict"});
    for (const ParamImportance& p : sub.params) {
      table.AddRow({p.param_id, Short(p.importance), Short(p.noise_floor), Short(p.above_noise),
                    fmt::format("[{}, {}]", Short(p.above_noise_low), Short(p.above_noise_high)),
                    p.indistinguishable
                        ? "indistinguishable from no effect; best trial's value " + BestValueText(p, sub)
                        : "stands out of the noise"});
    }
    out += table.Render(2);
  }
  return out;
}

nlohmann::json ImportanceJson(const StudyData& data, const HyperparameterImportance& importance) {
  const ImportanceSettings& s = importance.settings;
  nlohmann::json substudies = nlohmann::json::array();
  for (const SubStudyImportance& sub : importance.substudies) {
    nlohmann::json params = nlohmann::json::array();
    for (const ParamImportance& p : sub.params) {
      params.push_back({{"id", p.param_id},
                        {"name", p.param_name},
                        {"importance", p.importance},
                        {"low", p.low},
                        {"high", p.high},
                        {"noise_floor", p.noise_floor},
                        {"resampled_floor", p.resampled_floor},
                        {"above_noise", p.above_noise},
                        {"above_noise_low", p.above_noise_low},
                        {"above_noise_high", p.above_noise_high},
                        {"indistinguishable", p.indistinguishable},
                        {"trials", p.trials},
                        {"best_value", p.best_value ? ValueToJson(*p.best_value) : nlohmann::json()}});
    }
    substudies.push_back({{"substudy", sub.substudy},
                          {"trials", sub.trials},
                          {"top_trials", sub.top_trials},
                          {"best_trial", sub.best_trial ? nlohmann::json(*sub.best_trial) : nlohmann::json()},
                          {"params", params}});
  }
  return {{"study", data.study.name},
          {"objective", data.spec.objective.Name()},
          {"direction", data.spec.objective.direction == Direction::kMinimize ? "minimize" : "maximize"},
          {"method", kMethod},
          {"reference", kReference},
          {"settings",
           {{"target_quantile", s.target_quantile},
            {"region_quantile", s.region_quantile},
            {"grid_steps", s.grid_steps},
            {"prior_weight", s.prior_weight},
            {"min_trials_in_regime", s.min_trials_in_regime},
            {"resamples", s.resamples},
            {"permutations", s.permutations},
            {"interval", {s.interval_low, s.interval_high}},
            {"seed", s.seed}}},
          {"substudies", substudies}};
}

}  // namespace dltune
