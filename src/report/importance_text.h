// Hyperparameter importance with its noise as `dltune show STUDY --importance` prints it: a table per sub-study
// (text), or the analysis as JSON (docs/json-output.md, "show --importance").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dltune/analyze/importance.h"

namespace dltune {

// "0.9 (trial 12)": the value the best trial gave a param, as the text and the checklist name it.
std::string BestValueText(const ParamImportance& param, const SubStudyImportance& substudy);

// The method and its settings, then per sub-study its trials and a row per nuisance param: importance, noise floor,
// the importance above it with its interval, and whether it stands out of the noise (else the best trial's value).
std::string ImportanceText(const StudyData& data, const HyperparameterImportance& importance);

// {study, objective, direction, method, reference, settings: {...}, substudies: [{substudy, trials, top_trials,
// best_trial, params: [{id, name, importance, low, high, noise_floor, resampled_floor, above_noise, above_noise_low,
// above_noise_high, indistinguishable, trials, best_value}]}]}.
nlohmann::json ImportanceJson(const StudyData& data, const HyperparameterImportance& importance);

}  // namespace dltune
