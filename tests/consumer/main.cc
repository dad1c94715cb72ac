// Samples the study spec given as argument through the installed libdltune and prints its first trial.
#include <cstdio>

#include "dltune/dltune.h"  // the umbrella: every torch-free public header compiles in an installed tree

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const dltune::StudySpec spec = dltune::LoadStudySpec(argv[1]);
  const dltune::StudyPlan plan(spec);
  std::printf("dltune %s: %s has %llu trials; trial 0:", dltune::kVersion, spec.name.c_str(),
              static_cast<unsigned long long>(plan.TrialCount()));
  for (const auto& [id, value] : plan.Trial(0).params)
    std::printf(" %s=%s", id.c_str(), dltune::FormatValue(value).c_str());
  std::printf("\n");
  return 0;
}
