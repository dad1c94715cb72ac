// A dltune user's program, built against the installed libdltune:
//   consumer SPEC             samples the study and prints its first trial;
//   consumer SPEC STORE_URL   runs the study's trials (RunStudy) and prints how they ended.
#include <atomic>
#include <cstdio>

#include "dltune/dltune.h"  // the umbrella: every torch-free public header compiles in an installed tree

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) return 2;
  try {
    const dltune::StudySpec spec = dltune::LoadStudySpec(argv[1]);
    if (argc == 3) {
      const auto store = dltune::OpenStore(argv[2]);
      dltune::RunObserver quiet;
      const std::atomic<int> no_stop{0};
      const dltune::RunSummary summary = dltune::RunStudy(*store, spec, {}, quiet, no_stop);
      std::printf("%s: completed %d, failed %d, exit status %d\n", spec.name.c_str(), summary.completed, summary.failed,
                  summary.exit_status);
      return summary.exit_status;
    }
    const dltune::StudyPlan plan(spec);
    std::printf("dltune %s: %s has %llu trials; trial 0:", dltune::kVersion, spec.name.c_str(),
                static_cast<unsigned long long>(plan.TrialCount()));
    for (const auto& [id, value] : plan.Trial(0).params)
      std::printf(" %s=%s", id.c_str(), dltune::FormatValue(value).c_str());
    std::printf("\n");
  } catch (const dltune::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return dltune::ExitStatusFor(e.kind());
  }
  return 0;
}
