// `dltune serve`: the live, read-only dashboard. An HTTP server (cpp-httplib) that answers the page's JSON requests
// from the store (dltune/report/dashboard_api.h) and serves the page and its scripts — a fixed list of files — and
// the trials' profile traces, found from the store's records; nothing else from the filesystem.
#include <httplib.h>
#include <zlib.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "commands.h"
#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/report/dashboard_api.h"
#include "guarded_server.h"
#include "store/tracking.h"

namespace dltune::cli {
namespace {

std::atomic<bool> serve_stop{false};
extern "C" void StopServing(int) { serve_stop.store(true); }

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
  for (const auto& asset : dltune::DashboardAssets()) {
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

}  // namespace

void RegisterServeCommand(CLI::App& app) {
  struct Args {
    std::string storage;
    std::string host = "127.0.0.1";
    int port = 8737;
    std::string token;
    std::vector<std::string> allowed_hosts;
    int max_connections = 64;
  };
  auto args = std::make_shared<Args>();
  auto* serve = app.add_subcommand(
      "serve",
      "Serve a live, read-only dashboard of every study in the store: the studies table, each study's tracking "
      "record, diagnostics and charts, each trial's curves, params and checkpoints, updated every few seconds while "
      "trials run. Binds 127.0.0.1 unless --host says otherwise. Ctrl-C stops it.\n\n"
      "Example:\n  dltune serve --port 8737    # then open http://127.0.0.1:8737/");
  AddStorageOption(serve, args->storage);
  serve->add_option("--host", args->host,
                    "Address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 serves every network the "
                    "machine is on: then every request needs the token printed at start, or --token)");
  serve->add_option("--port", args->port, "Port (default 8737; 0 picks a free one)")->check(WholeNumberIn(0, 65535));
  serve->add_option("--token", args->token,
                    "The token every request must carry when --host is not a loopback address (default: a random "
                    "one, printed at start); also required on loopback when given");
  serve->add_option("--allow-host", args->allowed_hosts,
                    "A name the dashboard may be reached by (its Host header), besides the --host address and, on "
                    "loopback, localhost; repeatable. Other Host values are refused (against DNS rebinding)");
  serve
      ->add_option("--max-connections", args->max_connections,
                   "Connections open at once; more are refused with 503 (default 64)")
      ->check(WholeNumberIn(1, 4096));
  serve->callback([args] {
    const std::string url = StoreUrlOrDefault(args->storage);
    ReadOnlyStorePool stores(url);  // a Store serves one thread at a time; the server answers on several
    const std::string store_url = stores.Acquire()->url();  // opened now: a store that cannot be read fails here
    StudyPageCache study_pages;  // a running study's page is rebuilt once per interval, not once per poll
    const auto assets = LoadAssets();

    ServerGuards guards;
    guards.max_connections = static_cast<std::size_t>(args->max_connections);
    guards.token = args->token;
    const bool loopback = IsLoopbackHost(args->host);
    if (!loopback && guards.token.empty()) guards.token = NewAccessToken();
    // Which Host headers name this server: a wildcard address is reached by any name, so the token guards it.
    if (args->host != "0.0.0.0" && args->host != "::") {
      guards.allowed_hosts = {args->host};
      if (loopback) guards.allowed_hosts.insert(guards.allowed_hosts.end(), {"localhost", "127.0.0.1", "::1"});
      for (const auto& host : args->allowed_hosts) guards.allowed_hosts.push_back(host);
    }
    GuardedServer server(guards);
    server.set_payload_max_length(1 << 16);
    server.Get("/", [&](const httplib::Request& request, httplib::Response& response) {
      SendAsset(request, response, assets.at("index.html"));
    });
    server.Get(R"(/assets/([A-Za-z0-9_.\-]+))", [&](const httplib::Request& request, httplib::Response& response) {
      const auto it = assets.find(request.matches[1].str());
      if (it == assets.end() || it->first == "index.html") return SendError(response, 404, "no such file");
      response.set_header("Cache-Control", "max-age=3600");
      SendAsset(request, response, it->second);
    });
    // An API answer, made with a store of this thread's; a study or trial the store does not have is a 404.
    auto api = [&](auto&& answer) {
      return [&, answer](const httplib::Request& request, httplib::Response& response) {
        try {
          const ReadOnlyStorePool::Lease store = stores.Acquire();
          SendJsonText(response, answer(*store, request));
        } catch (const Error& e) {
          SendError(response, 404, e.what());
        }
      };
    };
    const auto study_part = [&](Store& store, const std::string& name, StudyPart part) {
      const StudyRecord study = RequireStudy(store, name);
      const std::string key = name + (part == StudyPart::kRecords ? "\n records" : "\n measurements");
      return study_pages.Get(key, study.updated_at, [&] { return StudyJson(store, name, part).dump(); });
    };
    server.Get("/api/studies", api([&](Store& store, const httplib::Request&) { return StudiesJson(store).dump(); }));
    server.Get(R"(/api/studies/([^/]+))", api([&](Store& store, const httplib::Request& request) {
                 return study_part(store, request.matches[1].str(), StudyPart::kRecords);
               }));
    server.Get(R"(/api/studies/([^/]+)/measurements)", api([&](Store& store, const httplib::Request& request) {
                 return study_part(store, request.matches[1].str(), StudyPart::kMeasurements);
               }));
    server.Get(R"(/api/studies/([^/]+)/trials/(\d{1,18}))", api([&](Store& store, const httplib::Request& request) {
                 return TrialJson(store, request.matches[1].str(), std::stoull(request.matches[2].str())).dump();
               }));
    // A trial's profile trace, to download and open in ui.perfetto.dev: the one file beside the trial's checkpoints
    // that the store's records lead to (TrialProfileTrace), never a path the request names.
    server.Get(R"(/api/studies/([^/]+)/trials/(\d{1,18})/profile\.trace\.json)",
               [&](const httplib::Request& request, httplib::Response& response) {
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
    server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(std::move(error));
      } catch (const std::exception& e) {
        message = e.what();
      }
      SendError(response, 500, message);
    });

    int port = args->port;
    if (port == 0) {
      port = server.bind_to_any_port(args->host);
    } else if (!server.bind_to_port(args->host, port)) {
      port = -1;
    }
    if (port < 0) {
      throw Error(
          fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", args->host, args->port));
    }
    const std::string address = args->host.find(':') != std::string::npos ? "[" + args->host + "]" : args->host;
    std::printf("dltune dashboard of %s at http://%s:%d/%s (Ctrl-C stops it)\n", store_url.c_str(), address.c_str(),
                port, guards.token.empty() ? "" : ("?token=" + guards.token).c_str());
    if (!loopback) {
      std::printf("every request needs the token: open the address above (the page keeps it in a cookie)\n");
    }
    std::fflush(stdout);
    std::signal(SIGINT, StopServing);
    std::signal(SIGTERM, StopServing);
    std::thread watcher([&] {
      while (!serve_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      server.stop();
    });
    server.listen_after_bind();
    serve_stop.store(true);
    watcher.join();
  });
}

}  // namespace dltune::cli
