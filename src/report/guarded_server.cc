#include "report/guarded_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dltune {
namespace {

using Clock = std::chrono::steady_clock;

// Set while a connection is handled on the accepting thread, because every connection thread is taken: it is
// refused at once rather than served there.
thread_local bool refuse_on_this_thread = false;
// Set when a request was refused before its body was read: its connection is closed after the answer, so that the
// unread body is never taken for the next request.
thread_local bool close_after_this_response = false;

// Runs each connection on a thread of its own, up to `limit` threads; past that, on the caller's (the accepting)
// thread, where it is refused at once.
class ThreadPerConnection final : public httplib::TaskQueue {
 public:
  explicit ThreadPerConnection(std::size_t limit) : limit_(limit) {}

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (running_ < limit_) {
        ++running_;
        std::thread([this, fn = std::move(fn)] {
          fn();
          std::lock_guard<std::mutex> done(mutex_);
          --running_;
          idle_.notify_all();
        }).detach();
        return;
      }
    }
    refuse_on_this_thread = true;
    fn();
    refuse_on_this_thread = false;
  }

  void shutdown() override {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return running_ == 0; });
  }

 private:
  std::size_t limit_;
  std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t running_ = 0;
};

// A connection's socket as cpp-httplib reads and writes it, with deadlines: reads wait at most until the request's
// deadline (a client trickling its headers is cut off, however often it sends a byte), writes at most until the
// response's.
class DeadlineStream final : public httplib::Stream {
 public:
  explicit DeadlineStream(int sock) : sock_(sock) {}

  void SetDeadlines(Clock::time_point read_by, Clock::time_point write_by) {
    read_by_ = read_by;
    write_by_ = write_by;
  }

  bool is_readable() const override { return begin_ < end_ || Wait(POLLIN, read_by_); }
  bool is_writable() const override { return Wait(POLLOUT, write_by_); }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!Wait(POLLIN, read_by_)) return -1;
      ssize_t n = 0;
      do {
        n = ::recv(sock_, buffer_, sizeof(buffer_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<std::size_t>(n);
    }
    const std::size_t count = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, count);
    begin_ += count;
    return static_cast<ssize_t>(count);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Wait(POLLOUT, write_by_)) return -1;
    ssize_t n = 0;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(::getsockname, ip, port); }
  socket_t socket() const override { return sock_; }

  // Waits until the connection has something to read, or `idle` passes; false on timeout, close or error.
  bool WaitForRequest(std::chrono::milliseconds idle) const {
    return begin_ < end_ || Wait(POLLIN, Clock::now() + idle);
  }

 private:
  bool Wait(short events, Clock::time_point until) const {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      pollfd fd{sock_, events, 0};
      const int ready = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (ready > 0) return (fd.revents & (events | POLLHUP | POLLERR)) != 0;
      if (ready < 0 && errno != EINTR) return false;
    }
  }

  template <typename Get>
  void Address(Get get, std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    ip.clear();
    port = 0;
    if (get(sock_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
      port = ntohs(v4->sin_port);
    } else if (address.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int sock_;
  Clock::time_point read_by_{};
  Clock::time_point write_by_{};
  char buffer_[4096];
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

// The host part of a Host header ("127.0.0.1:8737" -> "127.0.0.1", "[::1]:80" -> "::1"), lowercase.
std::string HostName(std::string host) {
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    return close == std::string::npos ? host : host.substr(1, close - 1);
  }
  if (std::count(host.begin(), host.end(), ':') == 1) return host.substr(0, host.find(':'));
  return host;
}

bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;  // the same time whatever the first differing character
  for (std::size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

// The value of cookie `name` in a Cookie header.
std::string CookieValue(const std::string& header, const std::string& name) {
  std::size_t at = 0;
  while (at < header.size()) {
    while (at < header.size() && (header[at] == ' ' || header[at] == ';')) ++at;
    const auto end = header.find(';', at);
    const std::string pair = header.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (pair.rfind(name + "=", 0) == 0) return pair.substr(name.size() + 1);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

constexpr const char* kTokenCookie = "dltune_token";

std::string Lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The media type of a Content-Type header ("application/json; charset=utf-8" -> "application/json"), lowercase.
std::string MediaType(const std::string& content_type) {
  std::string type = Lowercase(content_type.substr(0, content_type.find(';')));
  type.erase(0, type.find_first_not_of(" \t"));
  type.erase(type.find_last_not_of(" \t") + 1);
  return type;
}

// Whether an Origin header names the site the request was sent to (its Host header): http or https, same authority.
bool SameOrigin(const std::string& origin, const std::string& host) {
  const std::string lower = Lowercase(origin);
  const std::string authority = Lowercase(host);
  return !authority.empty() && (lower == "http://" + authority || lower == "https://" + authority);
}

// Answers a refused request with `status` and {"error": message}.
void Refuse(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_header("Cache-Control", "no-store");
  response.set_content(nlohmann::json{{"error", message}}.dump(), "application/json; charset=utf-8");
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  const std::string name = HostName(host);
  return name == "localhost" || name == "::1" || name.rfind("127.", 0) == 0;
}

std::string NewAccessToken() {
  std::random_device entropy;
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", entropy());
  return token;
}

GuardedServer::GuardedServer(ServerGuards guards) : guards_(std::move(guards)) {
  const std::size_t limit = guards_.max_connections;
  new_task_queue = [limit] { return new ThreadPerConnection(limit); };
  set_payload_max_length(guards_.max_body);
  set_pre_routing_handler([this](const httplib::Request& request, httplib::Response& response) {
    return Admit(request, response) ? HandlerResponse::Unhandled : HandlerResponse::Handled;
  });
}

GuardedServer::~GuardedServer() = default;

bool GuardedServer::Admit(const httplib::Request& request, httplib::Response& response) const {
  const auto refuse = [&](int status, const std::string& message) {
    Refuse(response, status, message);
    return false;
  };
  if (!guards_.allowed_hosts.empty()) {
    const std::string host = HostName(request.get_header_value("Host"));
    if (std::find(guards_.allowed_hosts.begin(), guards_.allowed_hosts.end(), host) == guards_.allowed_hosts.end()) {
      return refuse(421, "this server does not answer for that Host; open it by the address dltune serve printed");
    }
  }
  if (request.method != "GET" && request.method != "HEAD") return AdmitWrite(request, response);
  if (guards_.token.empty() || guards_.reads_open) return true;
  const std::string from_query = request.get_param_value("token");
  std::string authorization = request.get_header_value("Authorization");
  const std::string bearer = authorization.rfind("Bearer ", 0) == 0 ? authorization.substr(7) : "";
  const std::string from_cookie = CookieValue(request.get_header_value("Cookie"), kTokenCookie);
  if (SameToken(from_query, guards_.token)) {
    // The page's later requests (scripts, data) carry it as a cookie.
    response.set_header("Set-Cookie",
                        fmt::format("{}={}; Path=/; HttpOnly; SameSite=Strict", kTokenCookie, guards_.token));
    return true;
  }
  if (SameToken(bearer, guards_.token) || SameToken(from_cookie, guards_.token)) return true;
  return refuse(401, "this dashboard needs its token: open the address dltune serve printed (it ends in ?token=...)");
}

bool GuardedServer::AdmitWrite(const httplib::Request& request, httplib::Response& response) const {
  const auto refuse = [&](int status, const std::string& message) {
    Refuse(response, status, message);
    response.set_header("Connection", "close");
    close_after_this_response = true;
    return false;
  };
  if (!guards_.writes || guards_.token.empty()) {
    return refuse(403, "this dashboard is read-only: record notes and decisions with dltune note and dltune decide");
  }
  // A page of another site may send a simple request (a form's POST) here; the browser names its origin.
  const std::string origin = request.get_header_value("Origin");
  if (!origin.empty() && !SameOrigin(origin, request.get_header_value("Host"))) {
    return refuse(403, fmt::format("a write must come from the dashboard's own page, not from {}", origin));
  }
  const std::string site = request.get_header_value("Sec-Fetch-Site");
  if (!site.empty() && site != "same-origin") {
    return refuse(403, fmt::format("a write must come from the dashboard's own page (Sec-Fetch-Site: {})", site));
  }
  if (!SameToken(request.get_header_value(kTokenHeader), guards_.token)) {
    return refuse(401, fmt::format("a write needs the dashboard's token in the {} header: open the address dltune "
                                   "serve printed (it ends in ?token=...)",
                                   kTokenHeader));
  }
  if (MediaType(request.get_header_value("Content-Type")) != "application/json") {
    return refuse(415, "a write's body must be JSON (Content-Type: application/json)");
  }
  const std::string length = request.get_header_value("Content-Length");
  if (!length.empty() && (length.size() > 18 || length.find_first_not_of("0123456789") != std::string::npos ||
                          std::stoull(length) > guards_.max_body)) {
    return refuse(413, fmt::format("a write's body may have at most {} bytes", guards_.max_body));
  }
  return true;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  const std::size_t open = ++open_;
  const auto close = [&] {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    --open_;
  };
  if (refuse_on_this_thread || open > guards_.max_connections) {
    static const std::string kBusyBody = "dltune serve: too many open connections; retry in a moment\n";
    static const std::string kBusy = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\nConnection: close\r\n"
        "Content-Length: {}\r\n\r\n{}",
        kBusyBody.size(), kBusyBody);
    (void)!::send(sock, kBusy.data(), kBusy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close();
    return false;
  }
  DeadlineStream stream(sock);
  bool served = false;
  for (std::size_t requests = 0; requests < keep_alive_max_count_ && svr_sock_ != INVALID_SOCKET; ++requests) {
    if (!stream.WaitForRequest(guards_.keep_alive_idle)) break;
    const auto now = Clock::now();
    // The request must arrive whole by its deadline; its response gets a longer one.
    stream.SetDeadlines(now + guards_.request_deadline, now + guards_.request_deadline + guards_.response_deadline);
    bool connection_closed = false;
    close_after_this_response = false;
    served = process_request(stream, requests + 1 == keep_alive_max_count_, connection_closed, nullptr);
    if (!served || connection_closed || close_after_this_response) break;
  }
  close();
  return served;
}

}  // namespace dltune
