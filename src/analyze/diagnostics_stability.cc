// Diagnostics of an instability probe and a warmup study (dltune plan instability / warmup): what each run did, and
// the learning rate or warmup the playbook's next step starts from.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/strings.h"
#include "diagnostic_checks.h"
#include "dltune/analyze/instability.h"

namespace dltune::diagnostic_checks {
namespace {

using analysis_util::Num;

inline constexpr const char* kUnstableSection = "Identifying unstable workloads";
inline constexpr const char* kApplyWarmupSection = "How to apply learning rate warmup";

std::string VerdictText(const StabilityVerdict& verdict) {
  return fmt::format("{} ({})", StabilityText(verdict.kind), verdict.evidence);
}

}  // namespace

bool IsStabilityProcedure(const StudyData& data) {
  return data.spec.procedure.kind == "instability" || data.spec.procedure.kind == "warmup" ||
         data.spec.procedure.kind == "clipping";
}

bool IsMeasurementProcedure(const StudyData& data) {
  return data.spec.procedure.kind == "throughput" || data.spec.procedure.kind == "fit-steps";
}

void CheckInstabilityProbe(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (data.spec.procedure.kind != "instability") return;
  const InstabilityProbe probe = AnalyzeInstabilityProbe(data);
  if (!probe.finished) return;
  std::string detail;
  std::vector<std::uint64_t> trials;
  for (const ProbeRow& row : probe.rows) {
    if (!row.verdict) continue;
    detail += fmt::format("{}{}x ({}): {}", detail.empty() ? "" : "; ", Num(row.multiplier), Num(row.learning_rate),
                          VerdictText(*row.verdict));
    if (row.verdict->kind != Stability::kStable) trials.push_back(row.trial);
  }
  const std::string study = ShellQuote(data.study.name);
  if (!probe.unstable_learning_rate) {
    out.push_back({.id = "instability_probe_stable",
                   .severity = Severity::kInfo,
                   .title = fmt::format("Stable up to {}x the best learning rate: instability is not what limits it",
                                        Num(probe.rows.back().multiplier)),
                   .detail = detail + ".",
                   .suggestion = "no warmup is needed to reach these learning rates; if the best learning rate sits "
                                 "at the edge of the search space, widen the space instead",
                   .section = kUnstableSection});
    return;
  }
  const auto unstable = std::find_if(probe.rows.begin(), probe.rows.end(), [&](const ProbeRow& row) {
    return row.learning_rate == *probe.unstable_learning_rate;
  });
  const Stability kind = unstable->verdict->kind;
  std::string fix = "learning-rate warmup (best for early instability) or gradient clipping";
  if (kind == Stability::kMidTraining || kind == Stability::kRecovered) {
    fix = "gradient clipping (good for sudden spikes mid-training) or learning-rate warmup";
  }
  out.push_back(
      {.id = "instability_probe",
       .severity = Severity::kWarning,
       .title = fmt::format("Training becomes unstable at {} ({}x the best learning rate): {}",
                            Num(*probe.unstable_learning_rate), Num(unstable->multiplier), StabilityText(kind)),
       .detail = detail + ". The playbook's unstable_base_learning_rate is " + Num(*probe.unstable_learning_rate) + ".",
       .suggestion = fmt::format("try {}: a warmup study at 10x that rate: dltune plan warmup --from {}", fix, study),
       .section = kUnstableSection,
       .trials = trials});
}

void CheckWarmupStudy(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (data.spec.procedure.kind != "warmup") return;
  const WarmupStudy study = AnalyzeWarmup(data);
  if (!study.finished || study.rows.empty()) return;
  std::string detail;
  for (const WarmupRow& row : study.rows) {
    if (!row.verdict) continue;
    detail += fmt::format("{}warmup {} ({} steps): {}", detail.empty() ? "" : "; ", row.warmup_steps, row.steps,
                          VerdictText(*row.verdict));
  }
  const std::string name = ShellQuote(data.study.name);
  if (!study.shortest_stable) {
    const std::int64_t longest = study.rows.back().warmup_steps;
    // The playbook caps warmup at a tenth of max_train_steps ("How to apply learning rate warmup").
    const std::int64_t cap = std::max<std::int64_t>(1, study.baseline_steps / 10);
    std::vector<std::int64_t> longer;
    for (const std::int64_t factor : {2, 5}) {
      const std::int64_t steps = std::min(factor * longest, cap);
      if (steps > longest && (longer.empty() || steps > longer.back())) longer.push_back(steps);
    }
    std::string suggestion;
    if (!longer.empty()) {
      suggestion = fmt::format(
          "try longer warmups, up to a tenth of the baseline's {} steps (dltune plan warmup --from {}{}{} "
          "--warmup-steps {} --name {}-longer), a smaller --factor, or gradient clipping",
          study.baseline_steps, ShellQuote(data.spec.procedure.parent),
          data.spec.procedure.options.value("factor", 10.0) != 10.0
              ? " --factor " + Num(data.spec.procedure.options.value("factor", 10.0))
              : "",
          data.spec.procedure.options.contains("unstable_given") ? " --unstable-lr " + Num(study.unstable_learning_rate)
                                                                 : "",
          fmt::join(longer, ","), data.study.name);
    } else {
      suggestion = fmt::format(
          "warmup cannot cure it: the longest the playbook allows, a tenth of the baseline's {} steps, was tried. "
          "Tune below the unstable learning rate {} (lower the top of the baseline's learning-rate range), or clip "
          "gradients",
          study.baseline_steps, Num(study.unstable_learning_rate));
    }
    out.push_back(
        {.id = "warmup_none",
         .severity = Severity::kWarning,
         .title = fmt::format("No warmup up to {} steps trains stably at {}", longest, Num(study.learning_rate)),
         .detail = detail + ".",
         .suggestion = suggestion,
         .section = kApplyWarmupSection});
    return;
  }
  const std::int64_t warmup = *study.shortest_stable;
  const bool long_warmup = warmup * 20 > study.baseline_steps;
  out.push_back(
      {.id = "warmup",
       .severity = Severity::kInfo,
       .title = fmt::format("{} steps of warmup train stably at {} ({}x the unstable learning rate {})", warmup,
                            Num(study.learning_rate), Num(study.learning_rate / study.unstable_learning_rate),
                            Num(study.unstable_learning_rate)),
       .detail = detail + "." +
                 (long_warmup ? fmt::format(" It is more than 5% of the baseline's {} steps: the playbook says "
                                            "max_train_steps may need to grow to account for it.",
                                            study.baseline_steps)
                              : ""),
       .suggestion = fmt::format("prepend it to the baseline (max_train_steps {} + {}): dltune plan apply-warmup "
                                 "--from {}",
                                 study.baseline_steps, warmup, name),
       .section = kApplyWarmupSection});
}

void CheckClippingStudy(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (data.spec.procedure.kind != "clipping") return;
  const ClippingStudy study = AnalyzeClipping(data);
  if (!study.finished || study.rows.empty()) return;
  std::string detail;
  for (const ClippingRow& row : study.rows) {
    if (!row.verdict) continue;
    detail += fmt::format("{}{}: {}{}", detail.empty() ? "" : "; ",
                          row.threshold > 0 ? "clipping at " + Num(row.threshold) : std::string("no clipping"),
                          VerdictText(*row.verdict),
                          row.clipped_share ? fmt::format(", {:.0f}% of steps clipped", 100 * *row.clipped_share) : "");
  }
  const std::string name = ShellQuote(data.study.name);
  if (!study.recommended) {
    out.push_back(
        {.id = "clipping_none",
         .severity = Severity::kWarning,
         .title = fmt::format("No clipping threshold trains stably at {} without clipping most steps",
                              Num(study.learning_rate)),
         .detail = detail + ".",
         .suggestion = fmt::format("neither warmup nor clipping cures it: tune below the unstable learning rate {} "
                                   "(a new study whose learning-rate range ends below it)",
                                   Num(study.learning_rate)),
         .section = kClippingSection});
    return;
  }
  out.push_back({.id = "clipping",
                 .severity = Severity::kInfo,
                 .title = fmt::format("Clipping gradients at {} trains stably at {} (the 90th percentile of the "
                                      "baseline's gradient norms is {})",
                                      Num(*study.recommended), Num(study.learning_rate), Num(study.percentile_90)),
                 .detail = detail + ".",
                 .suggestion = fmt::format("tune the baseline with it: dltune plan apply-clipping --from {}", name),
                 .section = kClippingSection});
}

}  // namespace dltune::diagnostic_checks
