// The dashboard's HTTP server: cpp-httplib's routing and request parsing, behind guards that keep it answering
// whatever its clients do. Each connection has a thread of its own (so slow or idle clients never hold up fresh
// requests), a deadline for each request to arrive whole, a short keep-alive; beyond a bound on open connections new
// ones are refused with 503; the Host header must name this server (against DNS rebinding); a token is required on
// every request when the server is reachable from other machines; and a write (any method but GET and HEAD) is
// admitted only from the server's own page: with the token in its X-Dltune-Token header (a custom header, which a
// cross-site page cannot send without the server's consent, never given), no Origin or Sec-Fetch-Site of another
// site, a JSON body (not a form's) of a bounded size.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace dltune {

struct ServerGuards {
  std::size_t max_connections = 64;                    // open at once; more are answered 503 and closed
  std::chrono::milliseconds request_deadline{10000};   // for a request's line and headers to arrive, once begun
  std::chrono::milliseconds keep_alive_idle{2000};     // an idle kept-alive connection is closed after this
  std::chrono::milliseconds response_deadline{60000};  // for a response to be taken by the client, once asked
  std::vector<std::string> allowed_hosts;              // Host header values accepted (without port); empty: any
  std::string token;                                   // required on every request when not empty
  bool reads_open = false;                             // GET and HEAD need no token (a server of this machine only)
  bool writes = false;                                 // other methods admitted (with the token, from its own page)
  std::size_t max_body = std::size_t{16} * 1024;       // bytes of a request's body; more is refused with 413
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ServerGuards guards);
  ~GuardedServer() override;
  GuardedServer(const GuardedServer&) = delete;
  GuardedServer& operator=(const GuardedServer&) = delete;

  // Connections open now (for tests and logs).
  std::size_t open_connections() const { return open_.load(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Whether the request may be answered; if not, fills `response` with why.
  bool Admit(const httplib::Request& request, httplib::Response& response) const;
  // The same for a write: refused unless writes are on, it carries the token in X-Dltune-Token, comes from no other
  // origin and has a JSON body within max_body. A refused write's connection is closed (its body is never read).
  bool AdmitWrite(const httplib::Request& request, httplib::Response& response) const;

  ServerGuards guards_;
  std::atomic<std::size_t> open_{0};
};

// Whether `host` names this machine's loopback interface (127.0.0.1, ::1, localhost).
bool IsLoopbackHost(const std::string& host);

// The header a write carries the token in.
inline constexpr const char* kTokenHeader = "X-Dltune-Token";

// A new random token (32 hex digits), for a server reachable from other machines and for writes.
std::string NewAccessToken();

}  // namespace dltune
