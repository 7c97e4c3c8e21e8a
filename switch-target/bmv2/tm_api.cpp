#include "tm_api.h"

#include <arpa/inet.h>
#include <json/json.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace flexpass {
namespace bmv2 {

namespace {

constexpr std::size_t kMaxLine = 64 * 1024;
constexpr int kMaxClients = 16;

// A request error: becomes {"ok":false,"error":...}.
struct ApiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const Json::Value *member(const Json::Value &req, const char *key) {
  return req.isMember(key) && !req[key].isNull() ? &req[key] : nullptr;
}

uint64_t as_u64(const Json::Value &v, const char *key) {
  // JSON numbers written as integers only: 1e6 or 1.5 are rejected.
  if (v.isBool() || !v.isIntegral() || !(v.isUInt64()))
    throw ApiError(std::string("'") + key + "' must be a non-negative integer");
  return v.asUInt64();
}

uint64_t req_u64(const Json::Value &req, const char *key) {
  const Json::Value *v = member(req, key);
  if (!v) throw ApiError(std::string("missing '") + key + "'");
  return as_u64(*v, key);
}

// Optional byte limit: absent or null = unlimited.
uint64_t opt_limit(const Json::Value &req, const char *key) {
  const Json::Value *v = member(req, key);
  return v ? as_u64(*v, key) : tm::kUnlimited;
}

uint32_t req_port(const Json::Value &req) {
  const uint64_t p = req_u64(req, "port");
  if (p >= TrafficManager::kMaxPorts)
    throw ApiError("'port' " + std::to_string(p) + " out of range (0.." +
                   std::to_string(TrafficManager::kMaxPorts - 1) + ")");
  return static_cast<uint32_t>(p);
}

uint32_t to_u32(uint64_t v, const char *key) {
  if (v > UINT32_MAX) throw ApiError(std::string("'") + key + "' too large");
  return static_cast<uint32_t>(v);
}

Json::Value limit_json(uint64_t v) { return v == tm::kUnlimited ? Json::Value() : Json::Value(Json::UInt64(v)); }

Json::Value queue_config_json(const tm::EgressPort &p, std::size_t q) {
  const tm::QueueConfig &c = p.queue_config(q);
  Json::Value j;
  j["queue"] = Json::UInt(q);
  j["priority"] = Json::UInt(c.priority);
  j["weight"] = c.weight;
  j["dwrr_quantum_bytes"] = Json::UInt64(p.dwrr_quantum(q));
  j["buffer_bytes"] = limit_json(c.buffer_bytes);
  j["red_threshold"] = limit_json(c.red_threshold);
  j["yellow_threshold"] = limit_json(c.yellow_threshold);
  j["ecn_threshold"] = limit_json(c.ecn_threshold);
  j["per_color_depth"] = c.per_color_depth;
  j["discipline"] = tm::to_string(c.discipline);
  j["shaper_rate_bps"] = c.shaper ? Json::Value(Json::UInt64(c.shaper->rate_bps)) : Json::Value();
  j["shaper_burst_bytes"] = c.shaper ? Json::Value(Json::UInt64(c.shaper->burst_bytes)) : Json::Value();
  return j;
}

Json::Value port_config_json(uint32_t port, const tm::EgressPort &p) {
  const tm::PortConfig &c = p.port_config();
  Json::Value j;
  j["port"] = port;
  j["link_rate_bps"] = Json::UInt64(c.link_rate_bps);
  j["shared_buffer_bytes"] = limit_json(c.shared_buffer_bytes);
  j["wire_overhead_bytes"] = c.wire_overhead_bytes;
  j["dwrr_quantum_bytes"] = c.dwrr_quantum_bytes;
  Json::Value qs(Json::arrayValue);
  for (std::size_t q = 0; q < p.num_queues(); ++q) qs.append(queue_config_json(p, q));
  j["queues"] = qs;
  return j;
}

Json::Value drops_json(const std::array<uint64_t, tm::kNumDropReasons> &a) {
  Json::Value j;
  for (std::size_t r = 1; r < tm::kNumDropReasons; ++r)
    j[tm::to_string(static_cast<tm::DropReason>(r))] = Json::UInt64(a[r]);
  return j;
}

Json::Value stats_json(uint32_t port, const tm::EgressPort &p) {
  Json::Value j;
  j["port"] = port;
  const tm::PortStats &ps = p.port_stats();
  Json::Value t;
  t["buffered_bytes"] = Json::UInt64(ps.buffered_bytes);
  t["buffered_pkts"] = Json::UInt64(ps.buffered_pkts);
  t["max_buffered_bytes"] = Json::UInt64(ps.max_buffered_bytes);
  t["tx_pkts"] = Json::UInt64(ps.tx_pkts);
  t["tx_bytes"] = Json::UInt64(ps.tx_bytes);
  t["tx_wire_bytes"] = Json::UInt64(ps.tx_wire_bytes);
  t["invalid_drops"] = Json::UInt64(ps.invalid_drops);
  uint64_t dropped = ps.invalid_drops;
  Json::Value qs(Json::arrayValue);
  for (std::size_t q = 0; q < p.num_queues(); ++q) {
    const tm::QueueStats &s = p.queue_stats(q);
    Json::Value k;
    k["queue"] = Json::UInt(q);
    k["depth_bytes"] = Json::UInt64(s.depth_bytes);
    k["depth_pkts"] = Json::UInt64(s.depth_pkts);
    k["max_depth_bytes"] = Json::UInt64(s.max_depth_bytes);
    k["max_depth_pkts"] = Json::UInt64(s.max_depth_pkts);
    k["enqueued_pkts"] = Json::UInt64(s.enqueued_pkts);
    k["enqueued_bytes"] = Json::UInt64(s.enqueued_bytes);
    k["dequeued_pkts"] = Json::UInt64(s.dequeued_pkts);
    k["dequeued_bytes"] = Json::UInt64(s.dequeued_bytes);
    k["dequeued_wire_bytes"] = Json::UInt64(s.dequeued_wire_bytes);
    k["ecn_marked_pkts"] = Json::UInt64(s.ecn_marked_pkts);
    k["dropped_pkts"] = drops_json(s.dropped_pkts);
    k["dropped_bytes"] = drops_json(s.dropped_bytes);
    Json::Value colors;
    for (int c = 0; c < 3; ++c)
      colors[tm::to_string(static_cast<tm::Color>(c))] = Json::UInt64(s.depth_bytes_by_color[c]);
    k["depth_bytes_by_color"] = colors;
    dropped += s.total_dropped_pkts();
    qs.append(k);
  }
  t["dropped_pkts"] = Json::UInt64(dropped);
  j["totals"] = t;
  j["queues"] = qs;
  return j;
}

void check_keys(const Json::Value &req, std::initializer_list<const char *> allowed) {
  for (const auto &k : req.getMemberNames()) {
    bool ok = k == "op" || k == "id";
    for (const char *a : allowed) ok = ok || k == a;
    if (!ok) throw ApiError("unknown field '" + k + "' for op '" + req["op"].asString() + "'");
  }
}

Json::Value op_set_port(TrafficManager &tm, const Json::Value &req) {
  check_keys(req, {"port", "link_rate_bps", "shared_buffer_bytes", "wire_overhead_bytes",
                   "dwrr_quantum_bytes"});
  const uint32_t port = req_port(req);
  return tm.with_port(port, [&](tm::EgressPort &p, uint64_t) {
    tm::PortConfig c = p.port_config();
    if (member(req, "link_rate_bps")) c.link_rate_bps = req_u64(req, "link_rate_bps");
    if (req.isMember("shared_buffer_bytes")) c.shared_buffer_bytes = opt_limit(req, "shared_buffer_bytes");
    if (member(req, "wire_overhead_bytes"))
      c.wire_overhead_bytes = to_u32(req_u64(req, "wire_overhead_bytes"), "wire_overhead_bytes");
    if (member(req, "dwrr_quantum_bytes"))
      c.dwrr_quantum_bytes = to_u32(req_u64(req, "dwrr_quantum_bytes"), "dwrr_quantum_bytes");
    const std::string err = tm::validate(c);
    if (!err.empty()) throw ApiError("invalid port config: " + err);
    p.set_link_rate(c.link_rate_bps);
    p.set_shared_buffer(c.shared_buffer_bytes);
    p.set_wire_overhead(c.wire_overhead_bytes);
    p.set_dwrr_quantum(c.dwrr_quantum_bytes);
    return port_config_json(port, p);
  });
}

Json::Value op_set_queue(TrafficManager &tm, const Json::Value &req) {
  check_keys(req, {"port", "queue", "priority", "weight", "buffer_bytes", "red_threshold",
                   "yellow_threshold", "ecn_threshold", "per_color_depth", "shaper_rate_bps",
                   "shaper_burst_bytes", "discipline"});
  const uint32_t port = req_port(req);
  const uint64_t q = req_u64(req, "queue");
  if (q >= TrafficManager::kQueues)
    throw ApiError("'queue' " + std::to_string(q) + " out of range (0.." +
                   std::to_string(TrafficManager::kQueues - 1) + ")");
  tm::QueueConfig c;
  const uint64_t prio = req_u64(req, "priority");
  if (prio > 255) throw ApiError("'priority' must be 0..255");
  c.priority = static_cast<uint8_t>(prio);
  const Json::Value *w = member(req, "weight");
  if (!w) throw ApiError("missing 'weight'");
  if (!w->isNumeric() || w->isBool()) throw ApiError("'weight' must be a number");
  c.weight = w->asDouble();
  if (!req.isMember("buffer_bytes")) throw ApiError("missing 'buffer_bytes' (null = unlimited)");
  c.buffer_bytes = opt_limit(req, "buffer_bytes");
  c.red_threshold = opt_limit(req, "red_threshold");
  c.yellow_threshold = opt_limit(req, "yellow_threshold");
  c.ecn_threshold = opt_limit(req, "ecn_threshold");
  if (const Json::Value *v = member(req, "per_color_depth")) {
    if (!v->isBool()) throw ApiError("'per_color_depth' must be true or false");
    c.per_color_depth = v->asBool();
  }
  if (const Json::Value *v = member(req, "discipline")) {
    const std::string d = v->isString() ? v->asString() : "";
    if (d == "fifo") {
      c.discipline = tm::Discipline::kFifo;
    } else if (d == "pfabric") {
      c.discipline = tm::Discipline::kPfabric;
    } else {
      throw ApiError("'discipline' must be \"fifo\" or \"pfabric\"");
    }
  }
  const bool has_rate = member(req, "shaper_rate_bps"), has_burst = member(req, "shaper_burst_bytes");
  if (has_rate != has_burst)
    throw ApiError("'shaper_rate_bps' and 'shaper_burst_bytes' go together (both null = no shaper)");
  if (has_rate)
    c.shaper = tm::ShaperConfig{req_u64(req, "shaper_rate_bps"), req_u64(req, "shaper_burst_bytes")};
  const std::string err = tm::validate(c);
  if (!err.empty()) throw ApiError("invalid queue config: " + err);
  Json::Value out = tm.with_port(port, [&](tm::EgressPort &p, uint64_t now) {
    p.configure_queue(q, c, now);
    return queue_config_json(p, q);
  });
  out["port"] = port;
  tm.kick();  // a new shaper or priority can make a queue eligible earlier
  return out;
}

Json::Value dispatch(TrafficManager &tm, const Json::Value &req) {
  if (!req.isObject()) throw ApiError("request must be a JSON object");
  if (!req.isMember("op") || !req["op"].isString()) throw ApiError("missing 'op' (a string)");
  const std::string op = req["op"].asString();
  Json::Value out;
  if (op == "list_ports") {
    check_keys(req, {});
    Json::Value ports(Json::arrayValue);
    for (uint32_t p : tm.ports()) ports.append(p);
    out["ports"] = ports;
  } else if (op == "set_port") {
    out["config"] = op_set_port(tm, req);
  } else if (op == "set_queue") {
    out["config"] = op_set_queue(tm, req);
  } else if (op == "get_config") {
    check_keys(req, {"port"});
    const uint32_t port = req_port(req);
    if (!tm.has_port(port)) throw ApiError("no port " + std::to_string(port));
    out["config"] = tm.with_port(port, [&](tm::EgressPort &p, uint64_t) { return port_config_json(port, p); });
  } else if (op == "get_stats") {
    check_keys(req, {"port"});
    const uint32_t port = req_port(req);
    if (!tm.has_port(port)) throw ApiError("no port " + std::to_string(port));
    out["stats"] = tm.with_port(port, [&](tm::EgressPort &p, uint64_t) { return stats_json(port, p); });
    const EgressStats e = tm.egress_stats();
    Json::Value eg;
    eg["backlog_pkts"] = Json::UInt64(e.backlog_pkts);
    eg["max_backlog_pkts"] = Json::UInt64(e.max_backlog_pkts);
    eg["limit_pkts"] = Json::UInt64(e.limit_pkts);
    eg["holds"] = Json::UInt64(e.holds);
    out["stats"]["egress"] = eg;
  } else if (op == "clear_watermarks") {
    check_keys(req, {"port"});
    if (member(req, "port")) {
      const uint32_t port = req_port(req);
      if (!tm.has_port(port)) throw ApiError("no port " + std::to_string(port));
      tm.with_port(port, [](tm::EgressPort &p, uint64_t) { p.clear_watermarks(); return 0; });
    } else {
      for (uint32_t port : tm.ports())
        tm.with_port(port, [](tm::EgressPort &p, uint64_t) { p.clear_watermarks(); return 0; });
    }
  } else {
    throw ApiError("unknown op '" + op +
                   "' (ops: list_ports, set_port, set_queue, get_config, get_stats, clear_watermarks)");
  }
  out["ok"] = true;
  return out;
}

std::string to_line(const Json::Value &v) {
  Json::StreamWriterBuilder wb;
  wb["indentation"] = "";
  return Json::writeString(wb, v);
}

}  // namespace

std::string handle_tm_request(TrafficManager &tm, const std::string &line) {
  Json::Value req;
  Json::Value out;
  try {
    Json::CharReaderBuilder rb;
    Json::CharReaderBuilder::strictMode(&rb.settings_);
    std::unique_ptr<Json::CharReader> reader(rb.newCharReader());
    std::string perr;
    if (!reader->parse(line.data(), line.data() + line.size(), &req, &perr))
      throw ApiError("invalid JSON: " + perr);
    out = dispatch(tm, req);
  } catch (const ApiError &e) {
    out = Json::Value();
    out["ok"] = false;
    out["error"] = e.what();
  } catch (const tm::ConfigError &e) {
    out = Json::Value();
    out["ok"] = false;
    out["error"] = std::string("invalid config: ") + e.what();
  } catch (const std::exception &e) {
    out = Json::Value();
    out["ok"] = false;
    out["error"] = std::string("internal error: ") + e.what();
  }
  if (req.isObject() && req.isMember("id")) out["id"] = req["id"];
  return to_line(out);
}

TmApiServer::~TmApiServer() {
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

std::string TmApiServer::start(const std::string &host, uint16_t port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return std::string("socket: ") + std::strerror(errno);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) return "bad address " + host;
  if (bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) < 0 || listen(listen_fd_, 8) < 0)
    return "cannot listen on " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
  thread_ = std::thread(&TmApiServer::accept_loop, this);
  return "";
}

void TmApiServer::accept_loop() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // listening socket shut down
    }
    if (clients_.load() >= kMaxClients) {
      const std::string msg = "{\"ok\":false,\"error\":\"too many TM API clients\"}\n";
      (void)!write(fd, msg.data(), msg.size());
      close(fd);
      continue;
    }
    ++clients_;
    std::thread(&TmApiServer::serve_client, this, fd).detach();
  }
}

void TmApiServer::serve_client(int fd) {
  std::string buf;
  char chunk[4096];
  auto send_all = [fd](const std::string &s) {
    for (std::size_t off = 0; off < s.size();) {
      const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  };
  bool open = true;
  while (open) {
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t nl;
    while (open && (nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      open = send_all(handle_tm_request(tm_, line) + "\n");
    }
    if (buf.size() > kMaxLine) {
      send_all("{\"ok\":false,\"error\":\"request line longer than 65536 bytes\"}\n");
      break;
    }
  }
  close(fd);
  --clients_;
}

}  // namespace bmv2
}  // namespace flexpass
