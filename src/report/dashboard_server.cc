// The live dashboard's HTTP server (ServeDashboard, dltune/report/dashboard_api.h): cpp-httplib behind GuardedServer,
// answering the page's JSON requests from the store and serving the page and its scripts — a fixed list of files —
// and the trials' profile traces, found from the store's records; nothing else from the filesystem; and the notes and
// decisions the page writes (dashboard_writes.h).
#include <httplib.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/report/dashboard_api.h"
#include "report/dashboard_writes.h"
#include "report/guarded_server.h"
#include "store/tracking.h"

namespace dltune {
namespace {

// `data` in gzip format (RFC 1952).
std::string Gzip(const std::string& data) {
  z_stream stream{};
  constexpr int kGzipWindowBits = 15 + 16;  // 16: a gzip header and trailer instead of zlib's
  if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw Error("zlib: cannot start compressing");
  }
  std::string out(deflateBound(&stream, data.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int result = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (result != Z_STREAM_END) throw Error("zlib: cannot compress");
  return out;
}

// A file the page may load, and its gzip form.
struct Asset {
  std::string body;
  std::string gzipped;
  std::string content_type;
};

// The files the page may load, by URL name: read and compressed once at start-up, so no request can reach another
// file, and none waits for its compression (cpp-httplib would otherwise compress each response, with brotli when the
// browser accepts it: about a second for vega.min.js).
std::map<std::string, Asset> LoadAssets() {
  std::map<std::string, Asset> assets;
  for (const auto& asset : DashboardAssets()) {
    std::string body = ReadWholeFile(asset.path);
    std::string gzipped = Gzip(body);
    assets[asset.url_name] = {std::move(body), std::move(gzipped), asset.content_type};
  }
  return assets;
}

void SendAsset(const httplib::Request& request, httplib::Response& response, const Asset& asset) {
  const bool gzip = request.get_header_value("Accept-Encoding").find("gzip") != std::string::npos;
  if (gzip) response.set_header("Content-Encoding", "gzip");
  const std::string& bytes = gzip ? asset.gzipped : asset.body;
  // A content provider of known length is sent as it is; set_content would be compressed (again) by cpp-httplib.
  response.set_content_provider(bytes.size(), asset.content_type,
                                [&bytes](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                                  return sink.write(bytes.data() + offset, length);
                                });
}

void SendJsonText(httplib::Response& response, const std::string& text) {
  response.set_header("Cache-Control", "no-store");
  response.set_content(text, "application/json; charset=utf-8");
}

void SendJson(httplib::Response& response, const nlohmann::json& json) { SendJsonText(response, json.dump()); }

void SendError(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  SendJson(response, {{"error", message}});
}

// The guards of a server listening as `options` say.
ServerGuards GuardsFor(const DashboardServerOptions& options) {
  ServerGuards guards;
  guards.max_connections = options.max_connections;
  guards.token = options.token;
  const bool loopback = IsLoopbackHost(options.host);
  // Writes need a token also on loopback: any page the machine's browser opens can send requests to 127.0.0.1.
  if (guards.token.empty() && (!loopback || options.writes)) guards.token = NewAccessToken();
  guards.reads_open = loopback && options.token.empty();
  guards.writes = options.writes;
  // Which Host headers name this server: a wildcard address is reached by any name, so the token guards it.
  if (options.host != "0.0.0.0" && options.host != "::") {
    guards.allowed_hosts = {options.host};
    if (loopback) guards.allowed_hosts.insert(guards.allowed_hosts.end(), {"localhost", "127.0.0.1", "::1"});
    for (const auto& host : options.allowed_hosts) guards.allowed_hosts.push_back(host);
  }
  return guards;
}

// What a running dashboard answers from: its stores, its cached study pages and the page's files.
struct DashboardState {
  explicit DashboardState(const std::string& store_url) : stores(store_url) {}

  ReadOnlyStorePool stores;    // a Store serves one thread at a time; the server answers on several
  StudyPageCache study_pages;  // a running study's page is rebuilt once per interval, not once per poll
  std::map<std::string, Asset> assets;
};

void RouteAssets(httplib::Server& server, const DashboardState& state) {
  server.Get("/", [&assets = state.assets](const httplib::Request& request, httplib::Response& response) {
    SendAsset(request, response, assets.at("index.html"));
  });
  server.Get(R"(/assets/([A-Za-z0-9_.\-]+))",
             [&assets = state.assets](const httplib::Request& request, httplib::Response& response) {
               const auto it = assets.find(request.matches[1].str());
               if (it == assets.end() || it->first == "index.html") return SendError(response, 404, "no such file");
               response.set_header("Cache-Control", "max-age=3600");
               SendAsset(request, response, it->second);
             });
}

void RouteApi(httplib::Server& server, DashboardState& state) {
  // An API answer, made with a store of this thread's; a study or trial the store does not have is a 404.
  auto api = [&stores = state.stores](auto&& answer) {
    return [&stores, answer](const httplib::Request& request, httplib::Response& response) {
      try {
        const ReadOnlyStorePool::Lease store = stores.Acquire();
        SendJsonText(response, answer(*store, request));
      } catch (const Error& e) {
        SendError(response, 404, e.what());
      }
    };
  };
  const auto study_part = [&pages = state.study_pages](Store& store, const std::string& name, StudyPart part) {
    const StudyRecord study = RequireStudy(store, name);
    const std::string key = name + (part == StudyPart::kRecords ? "\n records" : "\n measurements");
    return pages.Get(key, study.updated_at, [&] { return StudyJson(store, name, part).dump(); });
  };
  server.Get("/api/studies", api([](Store& store, const httplib::Request&) { return StudiesJson(store).dump(); }));
  server.Get(R"(/api/studies/([^/]+))", api([study_part](Store& store, const httplib::Request& request) {
               return study_part(store, request.matches[1].str(), StudyPart::kRecords);
             }));
  server.Get(R"(/api/studies/([^/]+)/measurements)", api([study_part](Store& store, const httplib::Request& request) {
               return study_part(store, request.matches[1].str(), StudyPart::kMeasurements);
             }));
  server.Get(R"(/api/studies/([^/]+)/trials/(\d{1,18}))", api([](Store& store, const httplib::Request& request) {
               return TrialJson(store, request.matches[1].str(), std::stoull(request.matches[2].str())).dump();
             }));
}

// A trial's profile trace, to download and open in ui.perfetto.dev: the one file beside the trial's checkpoints that
// the store's records lead to (TrialProfileTrace), never a path the request names.
void RouteProfileTraces(httplib::Server& server, DashboardState& state) {
  server.Get(R"(/api/studies/([^/]+)/trials/(\d{1,18})/profile\.trace\.json)",
             [&stores = state.stores](const httplib::Request& request, httplib::Response& response) {
               std::optional<std::filesystem::path> trace;
               const auto number = std::stoull(request.matches[2].str());
               try {
                 const ReadOnlyStorePool::Lease store = stores.Acquire();
                 trace = TrialProfileTrace(*store, request.matches[1].str(), number);
               } catch (const Error& e) {
                 return SendError(response, 404, e.what());
               }
               if (!trace) return SendError(response, 404, "this trial has no profile trace");
               std::string body;
               try {
                 body = ReadWholeFile(*trace);
               } catch (const Error& e) {
                 return SendError(response, 404, e.what());
               }
               response.set_header("Cache-Control", "no-store");
               response.set_header("Content-Disposition",
                                   fmt::format("attachment; filename=\"trial_{}.profile.trace.json\"", number));
               response.set_content(body, "application/json; charset=utf-8");
             });
}

void AnswerExceptionsWith500(httplib::Server& server) {
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(std::move(error));
    } catch (const std::exception& e) {
      message = e.what();
    }
    SendError(response, 500, message);
  });
}

// Binds `server` to the options' address; returns the port.
int Bind(httplib::Server& server, const DashboardServerOptions& options) {
  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
  } else if (!server.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port < 0) {
    throw Error(
        fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", options.host, options.port));
  }
  return port;
}

std::string PageUrl(const std::string& host, int port, const std::string& token) {
  const std::string address = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return fmt::format("http://{}:{}/{}", address, port, token.empty() ? "" : "?token=" + token);
}

}  // namespace

void ServeDashboard(const std::string& store_url, const DashboardServerOptions& options, const std::atomic<bool>& stop,
                    const std::function<void(const DashboardAddress&)>& listening) {
  DashboardState state(store_url);
  const std::string url = state.stores.Acquire()->url();  // opened now: a store that cannot be read fails here
  state.assets = LoadAssets();

  const ServerGuards guards = GuardsFor(options);
  GuardedServer server(guards);
  RouteAssets(server, state);
  RouteApi(server, state);
  RouteProfileTraces(server, state);
  // Whether the page shows its forms (dashboard_writes.js).
  server.Get("/api/writes", [writes = options.writes](const httplib::Request&, httplib::Response& response) {
    SendJson(response, {{"writes", writes}});
  });
  if (options.writes) {
    // The page reads the study again after its write: it gets the new document, not one built before.
    RouteWrites(server, store_url, options.author,
                [&pages = state.study_pages](const std::string& study) { pages.Forget(study + "\n"); });
  }
  AnswerExceptionsWith500(server);

  const int port = Bind(server, options);
  listening({url, PageUrl(options.host, port, guards.token), IsLoopbackHost(options.host), options.writes});
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!stop.load() && !done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Stopping a server that has not begun listening does nothing: a stop asked that early waits for it to begin.
    while (!done.load() && !server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!done.load()) server.stop();
  });
  server.listen_after_bind();
  done.store(true);
  watcher.join();
}

}  // namespace dltune
