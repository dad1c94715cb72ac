#include "analyze/search_budget.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/strings.h"
#include "space/yaml_writer.h"

namespace dltune {
namespace {

constexpr const char* kAdamSection = "How should Adam's hyperparameters be tuned?";

YamlTree LogRange(double min, double max, const std::string& comment = "") {
  YamlTree range = YamlTree::Map(/*flow=*/true);
  range.Set("min", YamlTree::Of(min));
  range.Set("max", YamlTree::Of(max));
  range.Set("scale", YamlTree::Of(std::string("log")));
  range.comment = comment;
  return range;
}

YamlTree Fixed(Value value, const std::string& comment = "") {
  YamlTree fixed = YamlTree::Of(std::move(value));
  fixed.comment = comment;
  return fixed;
}

bool IsAdamLike(const std::string& optimizer) { return optimizer == "adam" || optimizer == "nadam"; }

// The values `optimizer` takes in `substudy`'s trials (every value of a searched optimizer param).
std::vector<std::string> OptimizersOf(const SearchSpace& space, const SubStudy& substudy) {
  for (const Param& param : space.params()) {
    if (param.name != "optimizer") continue;
    if (const auto it = substudy.scientific.find(param.id); it != substudy.scientific.end()) {
      return {FormatValue(it->second)};
    }
    std::vector<std::string> values;
    for (const Value& value : param.values) values.push_back(FormatValue(value));
    return values;
  }
  return {"sgd"};  // the trainer's default
}

}  // namespace

AdamBudget AdamBudgetFor(std::uint64_t trials) {
  return {.beta1 = trials >= 10, .epsilon = trials > 25, .beta2 = trials >= kAdamBeta2Trials};
}

const std::vector<std::string>& SuggestableOptimizers() {
  static const std::vector<std::string> kOptimizers = {"adam", "nadam", "nesterov", "momentum", "sgd"};
  return kOptimizers;
}

std::string SuggestedSpace(const std::string& optimizer, std::uint64_t trials) {
  const auto& known = SuggestableOptimizers();
  if (std::find(known.begin(), known.end(), optimizer) == known.end()) {
    throw Error(fmt::format("--optimizer must be {}, not '{}'{}", JoinAlternatives(known, false), optimizer,
                            DidYouMean(optimizer, known)));
  }
  if (trials < 1) throw Error("--trials must be 1 or more");
  YamlTree space = YamlTree::Map();
  space.Set("optimizer", Fixed(Value(optimizer)));
  if (IsAdamLike(optimizer)) {
    const AdamBudget budget = AdamBudgetFor(trials);
    space.Set("learning_rate", LogRange(1e-5, 1e-1, "always tuned"));
    space.Set("one_minus_beta1", budget.beta1 ? LogRange(1e-2, 0.5, "tuned from 10 trials")
                                              : Fixed(Value(0.1), "beta1 = 0.9; tuned from 10 trials"));
    space.Set("epsilon", budget.epsilon ? LogRange(1e-10, 1e-2, "tuned above 25 trials")
                                        : Fixed(Value(1e-8), "tuned above 25 trials"));
    space.Set("one_minus_beta2",
              budget.beta2 ? LogRange(1e-4, 1e-1, fmt::format("tuned from {} trials", kAdamBeta2Trials))
                           : Fixed(Value(0.001), fmt::format("beta2 = 0.999; tuned from {} trials (substantially more "
                                                             "than 25)",
                                                             kAdamBeta2Trials)));
  } else if (optimizer == "sgd") {
    space.Set("learning_rate", LogRange(1e-3, 1.0, "the one hyperparameter of plain SGD"));
  } else {
    space.Set("learning_rate", LogRange(1e-3, 1.0));
    space.Set("one_minus_momentum",
              trials >= 10 ? LogRange(1e-2, 0.5, "momentum searched as 1 - momentum on a log scale")
                           : Fixed(Value(0.1), "momentum = 0.9; with so few trials tune the learning rate alone"));
  }
  space.Set("weight_decay", Fixed(Value(0.0)));
  std::string text = ToYamlText(space);
  std::string indented = "space:\n";
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    indented += "  " + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return fmt::format("# {} with {} trial{} per sub-study (the playbook's \"{}\")\n{}", optimizer, trials,
                     trials == 1 ? "" : "s", kAdamSection, indented);
}

std::vector<Diagnostic> CheckAdamBudget(const StudySpec& spec) {
  std::vector<Diagnostic> found;
  if (!spec.space) return found;
  const StudyPlan plan(spec);
  const SearchSpace& space = *spec.space;
  for (std::size_t s = 0; s < plan.SubStudyCount() && s < 1000; ++s) {
    const SubStudy substudy = plan.SubStudyAt(s);
    const std::vector<std::string> optimizers = OptimizersOf(space, substudy);
    const auto adam = std::find_if(optimizers.begin(), optimizers.end(), IsAdamLike);
    if (adam == optimizers.end()) continue;
    const std::uint64_t budget = plan.SubStudyTrialCount(s) / std::max<std::size_t>(optimizers.size(), 1);
    const AdamBudget supported = AdamBudgetFor(budget);
    std::vector<std::string> excess;
    for (const Param& param : space.params()) {
      if (!param.Varies() || substudy.scientific.count(param.id) != 0) continue;
      const bool beta1 = param.name == "beta1" || param.name == "one_minus_beta1";
      const bool beta2 = param.name == "beta2" || param.name == "one_minus_beta2";
      const bool epsilon = param.name == "epsilon";
      if ((beta1 && !supported.beta1) || (beta2 && !supported.beta2) || (epsilon && !supported.epsilon)) {
        excess.push_back(param.id);
      }
    }
    if (excess.empty()) continue;
    const std::string who = plan.SubStudyCount() > 1 ? "Sub-study " + substudy.label : "The study";
    found.push_back(
        {.id = "adam_budget",
         .severity = Severity::kWarning,
         .title = fmt::format("{} searches more of {} than its {} trials support: {}", who, *adam, budget,
                              fmt::join(excess, ", ")),
         .detail = fmt::format("The playbook tunes only the learning rate below 10 trials, adds beta1 from 10, "
                               "epsilon above 25 and beta2 only with substantially more (dltune: {}). Each extra "
                               "dimension spreads {} trials thinner.",
                               kAdamBeta2Trials, budget),
         .suggestion = fmt::format("fix {} at its default, or raise trials:; dltune space suggest --optimizer {} "
                                   "--trials {} prints the space for this budget",
                                   fmt::join(excess, ", "), *adam, budget),
         .section = kAdamSection,
         .substudy = plan.SubStudyCount() > 1 ? substudy.label : ""});
  }
  return found;
}

}  // namespace dltune
