// Helpers shared by the analyses (not installed: the module's own sources only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune::analysis_util {

// The trial's finite evaluations of the objective, by step.
std::vector<CurvePoint> ObjectiveSeries(const StudyData& data, std::uint64_t trial, const Objective& objective);

// The trial's training measurements (empty when it has none).
const std::vector<TrainMeasurement>& TrainOf(const StudyData& data, std::uint64_t trial);

// The q-quantile (0 <= q <= 1) of ascending, non-empty `sorted` by linear interpolation between order statistics
// (numpy's default, "linear").
double Quantile(const std::vector<double>& sorted, double q);

// Where a range param's value lies in its range: 0 at min, 1 at max, on a log scale for Scale::kLog.
double UnitPosition(const Param& param, double value);
// The value at unit position `u` (the inverse of UnitPosition).
double FromUnitPosition(const Param& param, double u);

// Whether `param` is a float or int range.
bool IsRange(const Param& param);

// Whether the param looks like a learning rate: its id or name contains "learning_rate", or its name is "lr" or
// ends in "_lr".
bool IsLearningRate(const Param& param);

// A number as people read it in a diagnostic: 3 significant digits ("0.00316", "1e-05", "1000").
std::string Num(double value);
// A fraction as a whole percentage ("35%").
std::string Percent(double fraction);
// "3, 5 and 8" (at most `limit` numbers, then "and 4 more").
std::string TrialList(const std::vector<std::uint64_t>& trials, std::size_t limit = 8);

// The number of distinct sub-studies among the trials.
std::size_t SubStudyCount(const StudyData& data);

// `points` (by step) thinned to max(max_points, 3, what must be kept) points evenly spaced by index that include the
// first, the last and the points at the indices in `keep`.
std::vector<CurvePoint> Thin(const std::vector<CurvePoint>& points, std::size_t max_points,
                             const std::vector<std::size_t>& keep);
// The index of the last point at or before `step`, if any.
std::optional<std::size_t> IndexAtStep(const std::vector<CurvePoint>& points, std::int64_t step);

// Completed trials with a best objective, grouped by sub-study index (ascending), each group best first.
struct RankedTrial {
  const TrialRecord* trial = nullptr;
  double objective = 0;
};
std::vector<std::vector<RankedTrial>> RankedBySubStudy(const StudyData& data);

}  // namespace dltune::analysis_util
