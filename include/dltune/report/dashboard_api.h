// What the live dashboard (`dltune serve`) shows, as JSON documents built from the store: the studies table, one
// study (tracking record, diagnostics, charts, trials), one trial; and the server that answers the page with them
// (ServeDashboard), which only routes requests to these; the page (web/dashboard.js) renders them. Every user-written
// string is a JSON string value, never markup: the page inserts them as text. Each function reads the store once per
// call and is as thread-safe as its Store (one thread at a time: ReadOnlyStorePool lends one to each thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/store/store.h"

namespace dltune {

// {"store": URL, "studies": [{"name", "description", "spec_path", "trials", "states": {state: count}, "best":
//  {"value", "trial", "step"} | null, "result": text | null, "objective", "updated_at"}]}. A throughput sweep's
// "result" is the batch size it recommends, and it has no "best" (its batch sizes are not ranked by the objective);
// any other study's "result" is null.
nlohmann::json StudiesJson(Store& store);

// The study page comes in two parts, so that the page shows what the trial records alone tell while the
// measurements (of a 10,000-trial study: half a million rows) are read and analysed.
enum class StudyPart {
  // {"name", "description", "goal", "parent", "procedure", "children": [name], "notes": [{"kind", "adopt", "text",
  //  "author", "created_at"}], "launches": [{"id", "trial", "step", "metrics", "reason", "author", "git_commit",
  //  "export_path", "created_at"}], "test_evaluations", "replicas", "spec_path", "spec_hash", "dltune_version",
  //  "git_commit", "git_dirty", "reproduction" (the study's reproduction record, docs/store-schema.md), "created_at",
  //  "updated_at", "objective", "direction", "max_train_steps", "states",
  //  "best", "result" (as in StudiesJson: a throughput sweep's recommended batch size, with no "best" nor
  //  "best_per_substudy"), "best_per_substudy": [{"value", "trial", "substudy", "step", "text", and with replicas
  //  "replicas", "low", "high"}], "sections": [PageSectionJson] (study_page.h: trial variance, against the parent,
  //  isolation,
  //  axis plots, best steps, have we sampled enough?), "trials": [{"number", "configuration", "replica", "substudy",
  //  "state", "best", "best_step", "final", "reason", "params": {name: value}}]}.
  kRecords,
  // {"updated_at", "diagnostics": [{"id", "severity", "title", "detail", "suggestion", "section", "substudy",
  //  "handled" (the note that marks it handled, as Diagnostic::handled; "" while open)}],
  //  "sections": [...] (what reads the measurements: a step budget, throughput, instability, warmup or clipping
  //  study's section, training curves, gradient norms)}.
  kMeasurements,
};
// Throws Error for an unknown study.
nlohmann::json StudyJson(Store& store, const std::string& name, StudyPart part);

// Serialized documents of studies (StudyJson's parts), shared by the dashboard's threads so that no poll waits behind
// another's rebuild: a document is kept while its study does not change (its version, StudyRecord::updated_at, which
// every write of the store moves), and while it does (a running study changes with every write) it is rebuilt at most
// once per `max_age_seconds`. While one thread rebuilds a document, the others are answered with the previous one; the
// first request for a document waits for it. A document built within `settle_seconds` of its study's last write is
// never kept past max_age, so that a write in the same clock tick as a read cannot leave a stale page behind.
// Thread-safe.
class StudyPageCache {
 public:
  explicit StudyPageCache(double max_age_seconds = 2.0, double settle_seconds = 2.0)
      : max_age_seconds_(max_age_seconds), settle_seconds_(settle_seconds) {}

  // The document `key` of a study at version `updated_at`, built by `build` when the one kept is not current. An
  // exception of `build` reaches the caller that built (and the ones waiting for a first document).
  std::string Get(const std::string& key, double updated_at, const std::function<std::string()>& build);
  // Makes the documents whose key starts with `prefix` stale (a study's, after the dashboard wrote to it): the next
  // Get builds them again, whatever their age.
  void Forget(const std::string& prefix);
  // How many times a document was built, for tests and benchmarks.
  std::uint64_t builds() const;

 private:
  struct Entry {
    std::shared_ptr<const std::string> body;  // null until the first build ends
    double version = 0;                       // updated_at the body was built at
    double built_at = 0;                      // steady seconds
    bool settled = false;                     // built after the study's last write settled: kept while unchanged
    bool building = false;
    std::exception_ptr failure;  // of the last build, for requests that waited for a first body
  };

  double max_age_seconds_;
  double settle_seconds_;
  mutable std::mutex mutex_;
  std::condition_variable built_;
  std::map<std::string, Entry> entries_;
  std::uint64_t builds_ = 0;
};

// Read-only stores of one URL for threads that read at once (a Store serves one thread at a time): a lease lends one
// not in use, opening another when every one is (OpenStoreReadOnly). Thread-safe; the pool outlives its leases.
class ReadOnlyStorePool {
 public:
  explicit ReadOnlyStorePool(std::string url) : url_(std::move(url)) {}

  class Lease {
   public:
    Lease(ReadOnlyStorePool& pool, std::unique_ptr<Store> store) : pool_(&pool), store_(std::move(store)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    Store& operator*() const { return *store_; }
    Store* operator->() const { return store_.get(); }

   private:
    ReadOnlyStorePool* pool_;
    std::unique_ptr<Store> store_;
  };

  // A store for this thread until the lease ends; throws Error like OpenStoreReadOnly.
  Lease Acquire();
  const std::string& url() const { return url_; }

 private:
  std::string url_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Store>> idle_;
};

// {"study", "number", "substudy", "state", "reason", "worker", "retries", "started_at", "ended_at", "best",
//  "best_step", "final", "exit_status", "stderr_tail", "params", "checkpoints": [{"step", "path", "objective",
//  "pool", "deleted"}], "profile_trace": {"path", "steps", "bytes"} | null (the trial's profile trace, when the file
//  exists: TrialProfileTrace), "sections": [...] (the trial's training curves and gradient norms)}. Throws Error for
// an unknown study or trial.
nlohmann::json TrialJson(Store& store, const std::string& name, std::uint64_t number);

// The trial's profile trace file (training.profile_steps), found from its checkpoints (FindProfileTrace in
// html_report.h), for the dashboard to serve; nullopt when it has none. Throws Error for an unknown study or trial.
std::optional<std::filesystem::path> TrialProfileTrace(Store& store, const std::string& name, std::uint64_t number);

// A file the dashboard serves.
struct WebAsset {
  std::string url_name;  // "/assets/<url_name>"; the page itself is "index.html"
  std::filesystem::path path;
  std::string content_type;
};

// Every file the dashboard serves — its page, script and style (web/dashboard.*) and the vega builds — found where
// the report finds its libraries (FindWebDir, html_report.h). Throws Error naming what is missing.
std::vector<WebAsset> DashboardAssets();

// How the dashboard's server listens and whom it answers.
struct DashboardServerOptions {
  std::string host = "127.0.0.1";  // the address to listen on; a loopback one serves this machine only
  int port = 8737;                 // 0: a free one
  // Required on every request when not empty; when empty, a random one, required on every request when `host` is not
  // a loopback address and, on loopback, on writes only.
  std::string token;
  // Whether the page may write notes and decisions (POST, with the token in its X-Dltune-Token header, from the page's
  // own origin: GuardedServer); false serves it read-only.
  bool writes = true;
  std::string author;  // whom its notes and decisions are recorded as ("user@host", as dltune note records)
  // Names the server may be reached by (its Host header) besides `host` and, on loopback, localhost; other Host
  // values are refused (against DNS rebinding). A wildcard `host` (0.0.0.0, ::) is reached by any name.
  std::vector<std::string> allowed_hosts;
  std::size_t max_connections = 64;  // open at once; more are refused with 503
};

// Where a dashboard listens, told once it does.
struct DashboardAddress {
  std::string store_url;  // the store it shows
  std::string url;        // the page's address, with "?token=..." when the server needs its token
  bool loopback = true;   // whether it serves this machine only; if not, every request needs the token
  bool writes = true;     // whether the page may write notes and decisions (with the token)
};

// Serves the live dashboard of the store at `store_url` — the page and its files (DashboardAssets), the JSON of
// StudiesJson / StudyJson / TrialJson, the trials' profile traces (TrialProfileTrace), nothing else from the
// filesystem; and, unless read-only, records the notes and decisions the page sends (RouteWrites) — until `stop` is
// set, each connection on a thread of its own, with deadlines, a bound on connections, Host and token checks. Calls
// `listening` once it listens, before it answers. Throws Error when the store cannot be read, a file of the page is
// missing, or the address cannot be listened on.
void ServeDashboard(const std::string& store_url, const DashboardServerOptions& options, const std::atomic<bool>& stop,
                    const std::function<void(const DashboardAddress&)>& listening);

}  // namespace dltune
