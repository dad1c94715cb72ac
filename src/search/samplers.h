// Internal: the sampler implementations behind MakeSampler and the pieces they share.
#pragma once

#include <functional>
#include <memory>

#include "dltune/search/sampler.h"

namespace dltune::internal {

// Fills in every param that exists given `given`: fixed params take their value, sampled params (dims) take
// param.FromUnit(coordinate(d)) for their dimension d.
Assignment CompleteAssignment(const SearchSpace& space, Assignment given, const std::vector<std::size_t>& dims,
                              const std::function<double(std::size_t)>& coordinate);

// The scientific values of trial `index` of a joint study: each scientific combination once per block of
// combinations.size() trials, so every value gets an equal share of the trials.
Assignment JointScientificValues(const std::vector<Assignment>& combinations, std::uint64_t seed, std::uint64_t index);

// halton, halton_algoperf and random: points of the unit cube mapped through the params.
std::unique_ptr<Sampler> MakeUnitCubeSampler(const SamplerOptions& options, const SamplingTarget& target);
std::unique_ptr<Sampler> MakeGridSampler(const SamplerOptions& options, const SamplingTarget& target);
std::unique_ptr<Sampler> MakeListSampler(const SamplerOptions& options, const SamplingTarget& target);
// gp: Bayesian optimization (gp_sampler.cc).
std::unique_ptr<Sampler> MakeGpSampler(const SamplerOptions& options, const SamplingTarget& target);

}  // namespace dltune::internal
