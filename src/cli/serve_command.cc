// `dltune serve`: the live dashboard (ServeDashboard, dltune/report/dashboard_api.h) until Ctrl-C.
#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/run/launch.h"

namespace dltune::cli {
namespace {

std::atomic<bool> serve_stop{false};
extern "C" void StopServing(int) { serve_stop.store(true); }

// Prints where the dashboard listens, then lets Ctrl-C (or SIGTERM) stop it.
void AnnounceAndStopOnSignals(const DashboardAddress& address) {
  std::printf("dltune dashboard of %s at %s (Ctrl-C stops it)\n", address.store_url.c_str(), address.url.c_str());
  if (!address.loopback) {
    std::printf("every request needs the token: open the address above (the page keeps it in a cookie)\n");
  } else if (address.writes) {
    std::printf(
        "reading needs no token on this machine; writing notes and decisions from the page needs the token "
        "in the address above\n");
  }
  std::fflush(stdout);
  std::signal(SIGINT, StopServing);
  std::signal(SIGTERM, StopServing);
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
    bool read_only = false;
  };
  auto args = std::make_shared<Args>();
  auto* serve = app.add_subcommand(
      "serve",
      "Serve a live dashboard of every study in the store: the studies table, each study's tracking record, "
      "diagnostics and charts, each trial's curves, params and checkpoints, updated every few seconds while trials "
      "run. Its study and trial pages also add notes and record decisions to the study's decision log, as dltune note "
      "and dltune decide do; a write needs the token of the address printed at start (also on 127.0.0.1, where "
      "reading needs none) and is accepted only from the dashboard's own page. --read-only serves no writes. Binds "
      "127.0.0.1 unless --host says otherwise. Ctrl-C stops it.\n\n"
      "Examples:\n  dltune serve --port 8737    # then open the printed http://127.0.0.1:8737/?token=...\n"
      "  dltune serve --read-only --host 0.0.0.0    # colleagues look; notes are written with dltune note");
  AddStorageOption(serve, args->storage);
  serve->add_option("--host", args->host,
                    "Address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 serves every network the "
                    "machine is on: then every request needs the token printed at start, or --token)");
  serve->add_option("--port", args->port, "Port (default 8737; 0 picks a free one)")->check(WholeNumberIn(0, 65535));
  serve->add_option("--token", args->token,
                    "The token every write, and every request when --host is not a loopback address, must carry "
                    "(default: a random one, printed at start in the page's address); when given, also required "
                    "for reading on loopback");
  serve->add_flag(
      "--read-only", args->read_only,
      "Serve no writes: every POST is refused (403); notes and decisions are then written with dltune note and "
      "dltune decide");
  serve->add_option("--allow-host", args->allowed_hosts,
                    "A name the dashboard may be reached by (its Host header), besides the --host address and, on "
                    "loopback, localhost; repeatable. Other Host values are refused (against DNS rebinding)");
  serve
      ->add_option("--max-connections", args->max_connections,
                   "Connections open at once; more are refused with 503 (default 64)")
      ->check(WholeNumberIn(1, 4096));
  serve->callback([args] {
    DashboardServerOptions options;
    options.host = args->host;
    options.port = args->port;
    options.token = args->token;
    options.allowed_hosts = args->allowed_hosts;
    options.max_connections = static_cast<std::size_t>(args->max_connections);
    options.writes = !args->read_only;
    options.author = CurrentAuthor();
    ServeDashboard(StoreUrlOrDefault(args->storage), options, serve_stop, AnnounceAndStopOnSignals);
  });
}

}  // namespace dltune::cli
