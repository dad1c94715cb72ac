#include "dltune/report/dashboard_api.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/reproduction.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/report/html_report.h"
#include "dltune/report/study_data.h"
#include "report/study_page.h"
#include "report/study_text.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"
#include "store/trial_resources.h"

namespace dltune {
namespace {

using nlohmann::json;

json Optional(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }
json Optional(const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); }

json StatesJson(const StudySummary& summary) {
  json states = json::object();
  for (int s = 0; s < 6; ++s) {
    const auto state = static_cast<TrialState>(s);
    states[TrialStateName(state)] = summary.Count(state);
  }
  return states;
}

json BestJson(const std::optional<BestTrial>& best) {
  if (!best) return nullptr;
  json out = {{"value", best->value},
              {"trial", best->number},
              {"substudy", best->substudy_label},
              {"step", Optional(best->step)},
              {"text", best->ValueText()}};
  if (best->stats) {
    out["replicas"] = best->stats->n;
    out["low"] = Optional(best->stats->low);
    out["high"] = Optional(best->stats->high);
  }
  return out;
}

json SectionsJson(const StudyData& data, PageParts parts) {
  json sections = json::array();
  for (const PageSection& section : StudyPageSections(data, StudyPageOptions{}, parts)) {
    sections.push_back(PageSectionJson(section));
  }
  return sections;
}

json ParamsJson(const StudySpec& spec, const Assignment& params) {
  json out = json::object();
  for (const auto& [id, value] : params) {
    const Param* param = spec.space->Find(id);
    out[param ? param->name : id] = ValueToJson(value);
  }
  return out;
}

}  // namespace

json StudiesJson(Store& store) {
  json studies = json::array();
  for (const auto& study : store.ListStudies()) {
    const StudySummary summary = SummarizeStudy(store, study, 0);
    const std::optional<StudyResult> result = ThroughputResultOf(store, study);
    studies.push_back({{"name", study.name},
                       {"description", study.description},
                       {"spec_path", study.spec_path},
                       {"trials", summary.trial_count},
                       {"states", StatesJson(summary)},
                       {"best", result ? json(nullptr) : BestJson(summary.best)},
                       {"result", result ? json(result->text) : json(nullptr)},
                       {"objective", summary.objective.Name()},
                       {"updated_at", study.updated_at}});
  }
  return {{"store", store.url()}, {"studies", studies}};
}

json StudyJson(Store& store, const std::string& name, StudyPart part) {
  const StudyData data = LoadStudyData(store, name, part == StudyPart::kMeasurements);
  if (part == StudyPart::kMeasurements) {
    const StudyPage page = BuildStudyPage(data, StudyPageOptions{}, PageParts::kMeasurements);
    json diagnostics = json::array();
    for (const auto& d : page.diagnostics) diagnostics.push_back(FindingJson(d));
    json sections = json::array();
    for (const PageSection& section : page.sections) sections.push_back(PageSectionJson(section));
    return {{"updated_at", data.study.updated_at}, {"diagnostics", diagnostics}, {"sections", sections}};
  }
  const StudySummary summary = SummarizeStudy(data.study, data.trials);
  // A throughput sweep's result is the batch size it recommends, read from the step times, not a best trial.
  const std::optional<StudyResult> result = ThroughputResultOf(store, data.study);
  json per_substudy = json::array();
  if (!result) {
    for (const auto& best : summary.best_per_substudy) per_substudy.push_back(BestJson(best));
  }
  json trials = json::array();
  for (const auto& trial : data.trials) {
    trials.push_back({{"number", trial.number},
                      {"configuration", trial.configuration},
                      {"replica", trial.replica},
                      {"substudy", trial.substudy_label},
                      {"state", TrialStateName(trial.state)},
                      {"best", Optional(trial.best_value)},
                      {"best_step", Optional(trial.best_step)},
                      {"final", Optional(trial.final_value)},
                      {"reason", trial.reason},
                      {"params", ParamsJson(data.spec, trial.params)}});
  }
  json notes = json::array();
  for (const StudyNote& note : data.notes) {
    notes.push_back({{"kind", NoteKindName(note.kind)},
                     {"adopt", note.adopt},
                     {"text", note.text},
                     {"author", note.author},
                     {"created_at", note.created_at}});
  }
  json launches = json::array();
  for (const LaunchRecord& launch : data.launches) {
    launches.push_back({{"id", launch.id},
                        {"trial", launch.evaluation.trial},
                        {"step", launch.evaluation.step},
                        {"metrics", launch.evaluation.metrics},
                        {"reason", launch.reason},
                        {"author", launch.author},
                        {"git_commit", launch.git_commit},
                        {"export_path", launch.export_path},
                        {"created_at", launch.created_at}});
  }
  const auto tests = std::count_if(data.evaluations.begin(), data.evaluations.end(),
                                   [](const CheckpointEvaluation& e) { return e.split == "test"; });
  return {{"name", data.study.name},
          {"description", data.study.description},
          {"goal", data.spec.goal},
          {"parent", data.spec.procedure.parent},
          {"procedure", data.spec.procedure.kind},
          {"children", data.children},
          {"notes", notes},
          {"launches", launches},
          {"test_evaluations", tests},
          {"replicas", data.spec.replicas},
          {"spec_path", data.study.spec_path},
          {"spec_hash", data.study.spec_hash},
          {"dltune_version", data.study.dltune_version},
          {"git_commit", data.study.git_commit},
          {"git_dirty", data.study.git_dirty ? json(*data.study.git_dirty) : json()},
          {"reproduction", ParseRecord(data.study.reproduction)},
          {"created_at", data.study.created_at},
          {"updated_at", data.study.updated_at},
          {"objective", data.spec.objective.Name()},
          {"direction", DirectionName(data.spec.objective.direction)},
          {"max_train_steps", data.spec.max_train_steps},
          {"states", StatesJson(summary)},
          {"best", result ? json(nullptr) : BestJson(summary.best)},
          {"result", result ? json(result->text) : json(nullptr)},
          {"best_per_substudy", per_substudy},
          {"sections", SectionsJson(data, PageParts::kRecords)},
          {"trials", trials}};
}

namespace {}  // namespace

std::string StudyPageCache::Get(const std::string& key, double updated_at, const std::function<std::string()>& build) {
  std::unique_lock<std::mutex> lock(mutex_);
  Entry& entry = entries_[key];
  const auto current = [&] {
    if (!entry.body) return false;
    if (entry.version == updated_at && entry.settled) return true;
    return SteadySeconds() - entry.built_at < max_age_seconds_;
  };
  if (current()) return *entry.body;
  if (entry.building) {
    if (entry.body) return *entry.body;  // the previous document while the next is built: no one waits
    built_.wait(lock, [&] { return !entry.building; });
    if (entry.body) return *entry.body;
    std::rethrow_exception(entry.failure);
  }
  entry.building = true;
  ++builds_;
  lock.unlock();
  std::shared_ptr<const std::string> body;
  std::exception_ptr failure;
  const double started = SteadySeconds();
  const bool settled = WallSeconds() - updated_at > settle_seconds_;
  try {
    body = std::make_shared<const std::string>(build());
  } catch (...) {
    failure = std::current_exception();
  }
  lock.lock();
  entry.building = false;
  entry.failure = failure;
  if (body) {
    entry.body = body;
    entry.version = updated_at;
    entry.built_at = started;
    entry.settled = settled;
  }
  built_.notify_all();
  lock.unlock();
  if (failure) std::rethrow_exception(failure);
  return *body;
}

void StudyPageCache::Forget(const std::string& prefix) {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.lower_bound(prefix); it != entries_.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    it->second.settled = false;
    it->second.built_at = -max_age_seconds_;  // older than any age kept
  }
}

std::uint64_t StudyPageCache::builds() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return builds_;
}

ReadOnlyStorePool::Lease::~Lease() {
  if (!store_) return;
  const std::lock_guard<std::mutex> lock(pool_->mutex_);
  pool_->idle_.push_back(std::move(store_));
}

ReadOnlyStorePool::Lease ReadOnlyStorePool::Acquire() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<Store> store = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(store));
    }
  }
  return Lease(*this, OpenStoreReadOnly(url_));  // opened outside the lock: others go on meanwhile
}

std::optional<std::filesystem::path> TrialProfileTrace(Store& store, const std::string& name, std::uint64_t number) {
  const StudyRecord study = RequireStudy(store, name);
  const auto trial = store.FindTrial(study.id, number);
  if (!trial) throw Error(fmt::format("study '{}' has no trial {}", name, number));
  return FindProfileTrace(store.ListCheckpoints(trial->id));
}

json TrialJson(Store& store, const std::string& name, std::uint64_t number) {
  const StudyRecord study = RequireStudy(store, name);
  const StudySpec spec = RecordedSpec(study);
  const auto trial = store.FindTrial(study.id, number);
  if (!trial) throw Error(fmt::format("study '{}' has no trial {}", name, number));
  const std::vector<CheckpointRecord> checkpoint_records = store.ListCheckpoints(trial->id);
  json profile_trace = nullptr;
  if (const auto trace = FindProfileTrace(checkpoint_records)) {
    std::error_code error;
    const auto bytes = std::filesystem::file_size(*trace, error);
    profile_trace = {{"path", trace->string()},
                     {"steps", spec.training.profile_steps},
                     {"bytes", error ? json(nullptr) : json(bytes)}};
  }
  json checkpoints = json::array();
  for (const auto& c : checkpoint_records) {
    checkpoints.push_back({{"step", c.step},
                           {"path", c.path},
                           {"objective", Optional(c.objective)},
                           {"pool", CheckpointPoolName(c.pool)},
                           {"deleted", c.deleted}});
  }
  // The trial alone, as a StudyData the curve analyses read.
  StudyData data;
  data.study = study;
  data.spec = spec;
  data.trials = {*trial};
  data.evals[number] = store.EvalSeries(trial->id);
  data.train[number] = store.TrainSeries(trial->id);
  const auto gpu = ParseGpuUsage(trial->resources);
  return {{"study", study.name},
          {"number", trial->number},
          {"substudy", trial->substudy_label},
          {"state", TrialStateName(trial->state)},
          {"reason", trial->reason},
          {"worker", trial->worker},
          {"retries", trial->retries},
          {"started_at", trial->started_at ? json(*trial->started_at) : json(nullptr)},
          {"ended_at", trial->ended_at ? json(*trial->ended_at) : json(nullptr)},
          {"best", Optional(trial->best_value)},
          {"best_step", Optional(trial->best_step)},
          {"final", Optional(trial->final_value)},
          {"exit_status", trial->exit_status ? json(*trial->exit_status) : json(nullptr)},
          {"stderr_tail", trial->stderr_tail},
          {"gpu", gpu ? DescribeGpuUsage(*gpu) : ""},
          {"fused", DescribeFusedGroup(FusedGroupOf(trial->resources), trial->number)},
          {"params", ParamsJson(spec, trial->params)},
          {"checkpoints", checkpoints},
          {"profile_trace", profile_trace},
          {"sections", SectionsJson(data, PageParts::kMeasurements)}};
}

std::vector<WebAsset> DashboardAssets() {
  const std::filesystem::path libraries = FindWebDir();
  // web/ holds the page next to node_modules/; an installed share/dltune/web the same way.
  const std::filesystem::path page_dir =
      std::filesystem::exists(libraries / "dashboard.html") ? libraries : libraries.parent_path();
  const std::string js = "text/javascript; charset=utf-8";
  std::vector<WebAsset> assets = {{"index.html", page_dir / "dashboard.html", "text/html; charset=utf-8"},
                                  {"dashboard.js", page_dir / "dashboard.js", js},
                                  {"dashboard_writes.js", page_dir / "dashboard_writes.js", js},
                                  {"dashboard.css", page_dir / "dashboard.css", "text/css; charset=utf-8"}};
  for (const char* library : {"vega", "vega-lite", "vega-embed"}) {
    assets.push_back(
        {fmt::format("{}.min.js", library), libraries / library / "build" / fmt::format("{}.min.js", library), js});
  }
  for (const auto& asset : assets) {
    if (!std::filesystem::exists(asset.path)) {
      throw Error(fmt::format("{}: the dashboard's file is missing (run scripts/setup, or set DLTUNE_WEB_DIR)",
                              asset.path.string()));
    }
  }
  return assets;
}

}  // namespace dltune
