#include "dltune/analyze/analysis.h"

namespace dltune {

ObjectiveRef ObjectiveOf(const StudySpec& spec) {
  ObjectiveRef objective;
  const std::string& metric = spec.objective.metric;
  const auto slash = metric.find('/');
  objective.split = slash == std::string::npos ? "valid" : metric.substr(0, slash);
  objective.metric = slash == std::string::npos ? metric : metric.substr(slash + 1);
  objective.direction = spec.objective.direction;
  return objective;
}

}  // namespace dltune
