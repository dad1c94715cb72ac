#include "run/study_report.h"

#include <algorithm>
#include <ctime>

#include "core/files.h"
#include "core/strings.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/report/html_report.h"
#include "dltune/report/study_data.h"
#include "run/trial_setup.h"

namespace dltune {

WrittenReport WriteStudyReport(Store& store, const std::string& study, const std::filesystem::path& output,
                               std::size_t top) {
  const StudyData data = LoadStudyData(store, study);

  ReportOptions options;
  options.top_trials = top;
  options.generated_at = FormatClockTime(static_cast<double>(std::time(nullptr)), "%Y-%m-%d %H:%M UTC", TimeZone::kUtc);
  for (const std::uint64_t number : TopTrials(data, static_cast<int>(top))) {
    for (const TrialRecord& trial : data.trials) {
      if (trial.number != number) continue;
      options.extras[number] = {.checkpoints = store.ListCheckpoints(trial.id),
                                .reproduce = ReproduceCommand(data.spec, data.study, trial)};
    }
  }
  const std::string html = RenderReport(data, options);
  const std::vector<Diagnostic> diagnostics = Diagnose(data);

  const std::filesystem::path path = output.empty() ? std::filesystem::path(data.study.name + "-report.html") : output;
  WriteFileAtomically(path, html);
  return {.path = std::filesystem::absolute(path).lexically_normal(),
          .study = data.study.name,
          .trials = data.trials.size(),
          .findings = static_cast<std::size_t>(std::count_if(diagnostics.begin(), diagnostics.end(),
                                                             [](const Diagnostic& d) { return d.handled.empty(); }))};
}

std::filesystem::path WriteComparison(Store& store, const std::string& a, const std::string& b,
                                      const std::filesystem::path& output) {
  const StudyData first = LoadStudyData(store, a);
  const StudyData second = LoadStudyData(store, b);
  ReportOptions options;
  options.generated_at = FormatClockTime(static_cast<double>(std::time(nullptr)), "%Y-%m-%d %H:%M UTC", TimeZone::kUtc);
  const std::string html = RenderComparison(first, second, options);
  const std::filesystem::path path =
      output.empty() ? std::filesystem::path(first.study.name + "-vs-" + second.study.name + ".html") : output;
  WriteFileAtomically(path, html);
  return std::filesystem::absolute(path).lexically_normal();
}

}  // namespace dltune
