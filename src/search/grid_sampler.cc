// grid: every combination of a few values per param; the playbook accepts it only in one or two dimensions.
#include <fmt/format.h>

#include "samplers.h"

namespace dltune::internal {
namespace {

constexpr std::size_t kMaxGridDimensions = 2;
constexpr std::uint64_t kMaxGridPoints = 10000;

class GridSampler final : public Sampler {
 public:
  GridSampler(const SamplerOptions& options, const SamplingTarget& target) : target_(target) {
    const auto& params = target.space->params();
    // Values known before the grid varies anything: the sub-study's scientific values and the fixed params.
    Assignment known = target.scientific;
    for (const auto& param : params) {
      if (!param.Varies()) known[param.id] = param.values.front();
    }
    for (const auto& param : params) {
      if (!param.Varies() || target.scientific.count(param.id) != 0) continue;
      for (const auto& condition : param.when) {
        if (known.count(condition.param_id) == 0) {
          throw SpecError(param.where, "space." + param.id,
                          fmt::format("depends on '{}', which the grid varies; the grid sampler supports conditions "
                                      "on scientific and fixed params only (use halton)",
                                      condition.param_id));
        }
      }
      if (!SearchSpace::ConditionsHold(param, known)) continue;
      axes_.push_back({&param, param.GridValues(options.grid_points)});
    }
    if (axes_.size() > kMaxGridDimensions) {
      throw SpecError(options.where, "sampler",
                      fmt::format("grid would search {} params; the playbook accepts grid search only in 1-2 "
                                  "dimensions (Bergstra & Bengio 2012) — use halton",
                                  axes_.size()));
    }
    count_ = 1;
    for (const auto& axis : axes_) count_ *= axis.values.size();
    if (count_ > kMaxGridPoints) {
      throw SpecError(options.where, "sampler",
                      fmt::format("grid has {} points, more than the {} allowed; lower points: or use halton", count_,
                                  kMaxGridPoints));
    }
  }

  std::uint64_t TrialCount() const override { return count_; }

  Assignment Suggest(std::uint64_t index) const override {
    Assignment given = target_.scientific;
    // Mixed radix, the first param varying slowest.
    for (auto axis = axes_.rbegin(); axis != axes_.rend(); ++axis) {
      given[axis->param->id] = axis->values[index % axis->values.size()];
      index /= axis->values.size();
    }
    return CompleteAssignment(*target_.space, std::move(given), {}, [](std::size_t) { return 0.0; });
  }

 private:
  struct Axis {
    const Param* param;
    std::vector<Value> values;
  };
  SamplingTarget target_;
  std::vector<Axis> axes_;
  std::uint64_t count_ = 1;
};

}  // namespace

std::unique_ptr<Sampler> MakeGridSampler(const SamplerOptions& options, const SamplingTarget& target) {
  return std::make_unique<GridSampler>(options, target);
}

}  // namespace dltune::internal
