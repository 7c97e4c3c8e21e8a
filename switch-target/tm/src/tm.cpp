// FlexPass switch traffic manager core: see flexpass/tm.h for the model.
//
// Fixed-point conventions (all exact integer arithmetic):
//   * Link: the link is busy until busy_ns_ + busy_frac_/rate ns.  A packet of
//     b wire bits adds b·1e9/rate ns, carried exactly in busy_frac_, so
//     back-to-back packets are spaced by exactly b·8/rate with no drift.
//   * Shapers: tokens are kept in bits·1e9 ("bit-nanoseconds per second"), so
//     dt ns at r bit/s adds exactly r·dt tokens and a packet costs b·1e9.
#include "flexpass/tm.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace flexpass {
namespace tm {

namespace {

constexpr uint64_t kNsPerSec = 1'000'000'000ULL;
constexpr uint32_t kMaxWireOverhead = 1024;

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

int64_t shaper_cap(const ShaperConfig &s) {
  return static_cast<int64_t>(s.burst_bytes * 8 * kNsPerSec);
}

}  // namespace

const char *to_string(Color c) {
  switch (c) {
    case Color::kGreen: return "green";
    case Color::kYellow: return "yellow";
    case Color::kRed: return "red";
  }
  return "?";
}

const char *to_string(DropReason r) {
  switch (r) {
    case DropReason::kNone: return "none";
    case DropReason::kQueueFull: return "queue_full";
    case DropReason::kPortFull: return "port_full";
    case DropReason::kRed: return "red";
    case DropReason::kYellow: return "yellow";
    case DropReason::kInvalid: return "invalid";
    case DropReason::kPushedOut: return "pushed_out";
  }
  return "?";
}

const char *to_string(Discipline d) {
  switch (d) {
    case Discipline::kFifo: return "fifo";
    case Discipline::kPfabric: return "pfabric";
  }
  return "?";
}

uint64_t QueueStats::total_dropped_pkts() const {
  uint64_t n = 0;
  for (auto v : dropped_pkts) n += v;
  return n;
}

std::string validate(const PortConfig &cfg) {
  std::ostringstream err;
  if (cfg.link_rate_bps == 0) {
    err << "link rate must be > 0 bit/s";
  } else if (cfg.link_rate_bps > kMaxRateBps) {
    err << "link rate " << cfg.link_rate_bps << " bit/s exceeds " << kMaxRateBps;
  } else if (cfg.wire_overhead_bytes > kMaxWireOverhead) {
    err << "wire overhead " << cfg.wire_overhead_bytes << " B exceeds " << kMaxWireOverhead;
  } else if (cfg.dwrr_quantum_bytes == 0) {
    err << "DWRR quantum must be > 0 bytes";
  }
  return err.str();
}

std::string validate(const QueueConfig &cfg) {
  std::ostringstream err;
  if (!std::isfinite(cfg.weight) || !(cfg.weight > 0.0)) {
    err << "DWRR weight must be finite and > 0 (got " << cfg.weight << ")";
  } else if (cfg.shaper && cfg.shaper->rate_bps == 0) {
    err << "shaper rate must be > 0 bit/s";
  } else if (cfg.shaper && cfg.shaper->rate_bps > kMaxRateBps) {
    err << "shaper rate " << cfg.shaper->rate_bps << " bit/s exceeds " << kMaxRateBps;
  } else if (cfg.shaper && cfg.shaper->burst_bytes == 0) {
    err << "shaper burst must be > 0 bytes";
  } else if (cfg.shaper && cfg.shaper->burst_bytes > kMaxBurstBytes) {
    err << "shaper burst " << cfg.shaper->burst_bytes << " B exceeds " << kMaxBurstBytes;
  } else if (cfg.discipline != Discipline::kFifo && cfg.discipline != Discipline::kPfabric) {
    err << "unknown discipline " << static_cast<int>(cfg.discipline);
  }
  return err.str();
}

EgressPort::EgressPort(const PortConfig &port, const std::vector<QueueConfig> &queues) {
  if (auto e = validate(port); !e.empty()) throw ConfigError("port: " + e);
  if (queues.empty() || queues.size() > kMaxQueues) {
    throw ConfigError("number of queues must be 1.." + std::to_string(kMaxQueues) + " (got " +
                      std::to_string(queues.size()) + ")");
  }
  for (std::size_t i = 0; i < queues.size(); ++i) {
    if (auto e = validate(queues[i]); !e.empty()) throw ConfigError("queue " + std::to_string(i) + ": " + e);
  }
  port_ = port;
  queues_.resize(queues.size());
  for (std::size_t i = 0; i < queues.size(); ++i) {
    queues_[i].cfg = queues[i];
    if (queues[i].shaper) queues_[i].tokens = shaper_cap(*queues[i].shaper);
  }
  rebuild_levels();
}

const QueueConfig &EgressPort::queue_config(std::size_t queue) const {
  if (queue >= queues_.size()) throw std::out_of_range("queue id " + std::to_string(queue));
  return queues_[queue].cfg;
}

uint64_t EgressPort::dwrr_quantum(std::size_t queue) const {
  if (queue >= queues_.size()) throw std::out_of_range("queue id " + std::to_string(queue));
  return queues_[queue].quantum;
}

const QueueStats &EgressPort::queue_stats(std::size_t queue) const {
  if (queue >= queues_.size()) throw std::out_of_range("queue id " + std::to_string(queue));
  return queues_[queue].stats;
}

bool EgressPort::busy(uint64_t now_ns) const {
  return busy_ns_ > now_ns || (busy_ns_ == now_ns && busy_frac_ > 0);
}

void EgressPort::clear_watermarks() {
  for (auto &q : queues_) {
    q.stats.max_depth_bytes = q.stats.depth_bytes;
    q.stats.max_depth_pkts = q.stats.depth_pkts;
  }
  stats_.max_buffered_bytes = stats_.buffered_bytes;
}

uint64_t EgressPort::clamp_time(uint64_t now_ns) {
  // Time never goes backwards: a stale timestamp is treated as the latest one.
  last_now_ns_ = std::max(last_now_ns_, now_ns);
  return last_now_ns_;
}

// Groups queues by priority level (descending) and derives the DWRR quanta.
// DWRR pointers are kept for levels whose membership did not change.
void EgressPort::rebuild_levels() {
  std::vector<Level> old = std::move(levels_);
  levels_.clear();
  for (std::size_t i = 0; i < queues_.size(); ++i) {
    uint8_t p = queues_[i].cfg.priority;
    auto it = std::find_if(levels_.begin(), levels_.end(), [p](const Level &l) { return l.priority == p; });
    if (it == levels_.end()) {
      levels_.push_back(Level{});
      levels_.back().priority = p;
      it = levels_.end() - 1;
    }
    it->members.push_back(i);
  }
  std::sort(levels_.begin(), levels_.end(),
            [](const Level &a, const Level &b) { return a.priority > b.priority; });
  for (auto &lv : levels_) {
    for (const auto &o : old) {
      if (o.priority == lv.priority && o.members == lv.members) {
        lv.pos = o.pos;
        lv.in_service = o.in_service;
      }
    }
    double wmax = 0.0;
    for (auto i : lv.members) wmax = std::max(wmax, queues_[i].cfg.weight);
    for (auto i : lv.members) {
      double q = std::round(static_cast<double>(port_.dwrr_quantum_bytes) * queues_[i].cfg.weight / wmax);
      queues_[i].quantum = std::max<uint64_t>(1, static_cast<uint64_t>(q));
    }
  }
}

void EgressPort::configure_queue(std::size_t queue, const QueueConfig &cfg, uint64_t now_ns) {
  if (queue >= queues_.size()) {
    throw ConfigError("queue id " + std::to_string(queue) + " >= number of queues " +
                      std::to_string(queues_.size()));
  }
  if (auto e = validate(cfg); !e.empty()) throw ConfigError("queue " + std::to_string(queue) + ": " + e);
  now_ns = clamp_time(now_ns);
  Queue &q = queues_[queue];
  if (q.cfg.shaper) refill(q, now_ns);  // tokens earned so far, at the old rate
  if (!cfg.shaper) {
    q.tokens = 0;
  } else if (!q.cfg.shaper) {
    q.tokens = shaper_cap(*cfg.shaper);
  } else {
    q.tokens = std::min(q.tokens, shaper_cap(*cfg.shaper));
  }
  q.last_refill_ns = now_ns;
  if (cfg.priority != q.cfg.priority) q.deficit = 0;
  q.cfg = cfg;
  rebuild_levels();
}

void EgressPort::set_link_rate(uint64_t rate_bps) {
  PortConfig next = port_;
  next.link_rate_bps = rate_bps;
  if (auto e = validate(next); !e.empty()) throw ConfigError("port: " + e);
  // busy_frac_ is in units of 1/rate ns: round the finish time up to a whole ns.
  if (busy_frac_ > 0) {
    ++busy_ns_;
    busy_frac_ = 0;
  }
  port_ = next;
}

void EgressPort::set_shared_buffer(uint64_t bytes) { port_.shared_buffer_bytes = bytes; }

void EgressPort::set_wire_overhead(uint32_t bytes) {
  PortConfig next = port_;
  next.wire_overhead_bytes = bytes;
  if (auto e = validate(next); !e.empty()) throw ConfigError("port: " + e);
  port_ = next;
}

void EgressPort::set_dwrr_quantum(uint32_t bytes) {
  PortConfig next = port_;
  next.dwrr_quantum_bytes = bytes;
  if (auto e = validate(next); !e.empty()) throw ConfigError("port: " + e);
  port_ = next;
  rebuild_levels();
}

void EgressPort::drop(Queue *q, const PacketMeta &pkt, DropReason r, EnqueueResult &res) {
  res.admitted = false;
  res.drop_reason = r;
  if (q) {
    q->stats.dropped_pkts[static_cast<std::size_t>(r)] += 1;
    q->stats.dropped_bytes[static_cast<std::size_t>(r)] += pkt.bytes;
  } else {
    stats_.invalid_drops += 1;
  }
}

EnqueueResult EgressPort::enqueue(const PacketMeta &pkt, uint64_t now_ns) {
  now_ns = clamp_time(now_ns);
  EnqueueResult res;
  if (pkt.queue >= queues_.size()) {
    drop(nullptr, pkt, DropReason::kInvalid, res);
    return res;
  }
  Queue &q = queues_[pkt.queue];
  res.depth_bytes_before = q.stats.depth_bytes;
  res.depth_pkts_before = q.stats.depth_pkts;
  if (pkt.bytes == 0 || pkt.bytes > kMaxPacketBytes || static_cast<uint8_t>(pkt.color) > 2) {
    drop(&q, pkt, DropReason::kInvalid, res);
    return res;
  }
  const uint64_t depth = q.stats.depth_bytes;
  if (pkt.color == Color::kRed) {
    uint64_t d = q.cfg.per_color_depth ? q.stats.depth_bytes_by_color[2] : depth;
    if (d >= q.cfg.red_threshold) {
      drop(&q, pkt, DropReason::kRed, res);
      return res;
    }
  } else if (pkt.color == Color::kYellow) {
    uint64_t d = q.cfg.per_color_depth ? q.stats.depth_bytes_by_color[1] : depth;
    if (d >= q.cfg.yellow_threshold) {
      drop(&q, pkt, DropReason::kYellow, res);
      return res;
    }
  }
  if (q.cfg.discipline == Discipline::kPfabric) {
    if (DropReason r = pfabric_make_room(q, pkt, res); r != DropReason::kNone) {
      drop(&q, pkt, r, res);
      return res;
    }
  }
  // depth + bytes > limit, written so that it cannot overflow.
  if (q.cfg.buffer_bytes < pkt.bytes || q.stats.depth_bytes > q.cfg.buffer_bytes - pkt.bytes) {
    drop(&q, pkt, DropReason::kQueueFull, res);
    return res;
  }
  if (port_.shared_buffer_bytes < pkt.bytes ||
      stats_.buffered_bytes > port_.shared_buffer_bytes - pkt.bytes) {
    drop(&q, pkt, DropReason::kPortFull, res);
    return res;
  }

  res.admitted = true;
  res.ecn_mark = pkt.ect && depth > q.cfg.ecn_threshold;
  q.fifo.push_back(Entry{pkt, now_ns});
  QueueStats &s = q.stats;
  s.depth_bytes += pkt.bytes;
  s.depth_pkts += 1;
  s.depth_bytes_by_color[static_cast<std::size_t>(pkt.color)] += pkt.bytes;
  s.max_depth_bytes = std::max(s.max_depth_bytes, s.depth_bytes);
  s.max_depth_pkts = std::max(s.max_depth_pkts, s.depth_pkts);
  s.enqueued_pkts += 1;
  s.enqueued_bytes += pkt.bytes;
  if (res.ecn_mark) s.ecn_marked_pkts += 1;
  stats_.buffered_bytes += pkt.bytes;
  stats_.buffered_pkts += 1;
  stats_.max_buffered_bytes = std::max(stats_.max_buffered_bytes, stats_.buffered_bytes);
  return res;
}

// Bytes by which pkt overflows a limit (0 if it fits), without overflow.
static uint64_t excess(uint64_t used, uint64_t bytes, uint64_t limit) {
  if (limit < bytes) return kUnlimited;  // never fits
  return used > limit - bytes ? used - (limit - bytes) : 0;
}

DropReason EgressPort::pfabric_make_room(Queue &q, const PacketMeta &pkt, EnqueueResult &res) {
  const uint64_t need_q = excess(q.stats.depth_bytes, pkt.bytes, q.cfg.buffer_bytes);
  const uint64_t need_p = excess(stats_.buffered_bytes, pkt.bytes, port_.shared_buffer_bytes);
  if (need_q == 0 && need_p == 0) return DropReason::kNone;
  const DropReason full = need_q >= need_p ? DropReason::kQueueFull : DropReason::kPortFull;
  const uint64_t need = std::max(need_q, need_p);
  uint64_t evictable = 0;  // bytes of strictly lower priority than pkt
  for (const Entry &e : q.fifo)
    if (e.meta.rank > pkt.rank) evictable += e.meta.bytes;
  if (evictable < need) return full;  // pkt is (among) the lowest: it is dropped
  // Evict the lowest priority (the latest arrival among equals) until pkt fits;
  // every victim has rank > pkt.rank because their bytes cover `need`.
  uint64_t freed = 0;
  while (freed < need) {
    std::size_t victim = 0;
    for (std::size_t i = 1; i < q.fifo.size(); ++i)
      if (q.fifo[i].meta.rank >= q.fifo[victim].meta.rank) victim = i;
    const PacketMeta v = q.fifo[victim].meta;
    q.fifo.erase(q.fifo.begin() + static_cast<std::ptrdiff_t>(victim));
    freed += v.bytes;
    QueueStats &s = q.stats;
    s.depth_bytes -= v.bytes;
    s.depth_pkts -= 1;
    s.depth_bytes_by_color[static_cast<std::size_t>(v.color)] -= v.bytes;
    s.dropped_pkts[static_cast<std::size_t>(DropReason::kPushedOut)] += 1;
    s.dropped_bytes[static_cast<std::size_t>(DropReason::kPushedOut)] += v.bytes;
    stats_.buffered_bytes -= v.bytes;
    stats_.buffered_pkts -= 1;
    res.evicted.push_back(v);
  }
  return DropReason::kNone;
}

std::size_t EgressPort::pfabric_next(const Queue &q) {
  if (q.cfg.discipline != Discipline::kPfabric || q.fifo.empty()) return 0;
  std::size_t best = 0;  // highest priority, earliest among equals
  for (std::size_t i = 1; i < q.fifo.size(); ++i)
    if (q.fifo[i].meta.rank < q.fifo[best].meta.rank) best = i;
  const uint64_t flow = q.fifo[best].meta.flow;
  for (std::size_t i = 0; i < best; ++i)  // that flow's earliest packet
    if (q.fifo[i].meta.flow == flow) return i;
  return best;
}

void EgressPort::refill(Queue &q, uint64_t now_ns) {
  if (!q.cfg.shaper) return;
  if (now_ns <= q.last_refill_ns) return;
  const uint64_t dt = now_ns - q.last_refill_ns;
  q.last_refill_ns = now_ns;
  const int64_t cap = shaper_cap(*q.cfg.shaper);
  if (q.tokens >= cap) {
    q.tokens = cap;
    return;
  }
  const uint64_t room = static_cast<uint64_t>(cap - q.tokens);
  const uint64_t rate = q.cfg.shaper->rate_bps;
  if (dt >= ceil_div(room, rate)) {
    q.tokens = cap;
  } else {
    q.tokens += static_cast<int64_t>(rate * dt);
  }
}

// A shaped queue may send its head if the bucket holds the head's wire size,
// or if the bucket is full (a packet larger than the burst is then sent and
// the bucket goes negative, so the long-run rate is still exact).
bool EgressPort::shaper_ok(const Queue &q) const {
  if (!q.cfg.shaper) return true;
  const int64_t cost = static_cast<int64_t>(wire_bytes(q.fifo[q.head].meta) * 8 * kNsPerSec);
  return q.tokens >= cost || q.tokens >= shaper_cap(*q.cfg.shaper);
}

uint64_t EgressPort::shaper_ready_ns(const Queue &q, uint64_t now_ns) const {
  const int64_t cost = static_cast<int64_t>(wire_bytes(q.fifo[q.head].meta) * 8 * kNsPerSec);
  const int64_t need = std::min(cost, shaper_cap(*q.cfg.shaper));
  const uint64_t missing = static_cast<uint64_t>(need - q.tokens);  // > 0 when not ok
  return now_ns + std::max<uint64_t>(1, ceil_div(missing, q.cfg.shaper->rate_bps));
}

// Deficit round robin among the eligible queues of one level; returns the
// queue to serve.  Queues are visited in a fixed cyclic order; a visited
// queue gets its quantum once per visit and is served while its head fits in
// its deficit.  Empty queues lose their deficit; non-empty queues that are
// shaped out are skipped without a quantum and keep their deficit.
std::size_t EgressPort::select_in_level(Level &lv, uint32_t eligible_mask) {
  const std::size_t n = lv.members.size();
  for (;;) {
    for (std::size_t step = 0; step < n; ++step) {
      Queue &q = queues_[lv.members[lv.pos]];
      if (eligible_mask & (1u << lv.members[lv.pos])) {
        if (!lv.in_service) {
          q.deficit += q.quantum;
          lv.in_service = true;
        }
        if (wire_bytes(q.fifo[q.head].meta) <= q.deficit) return lv.members[lv.pos];
      } else if (q.fifo.empty()) {
        q.deficit = 0;
      }
      lv.pos = (lv.pos + 1) % n;
      lv.in_service = false;
    }
    // A full round served nobody (quanta smaller than the heads): skip the
    // k further rounds that would serve nobody either.
    uint64_t k = std::numeric_limits<uint64_t>::max();
    for (auto i : lv.members) {
      if (!(eligible_mask & (1u << i))) continue;
      const Queue &q = queues_[i];
      k = std::min(k, ceil_div(wire_bytes(q.fifo[q.head].meta) - q.deficit, q.quantum) - 1);
    }
    for (auto i : lv.members) {
      if (eligible_mask & (1u << i)) queues_[i].deficit += k * queues_[i].quantum;
    }
  }
}

DequeueResult EgressPort::dequeue(uint64_t now_ns) {
  now_ns = clamp_time(now_ns);
  DequeueResult res;
  if (stats_.buffered_pkts == 0) {
    res.status = DequeueStatus::kEmpty;
    return res;
  }
  if (busy(now_ns)) {
    res.status = DequeueStatus::kNotReady;
    res.next_eligible_ns = busy_ns_ + (busy_frac_ > 0);
    return res;
  }

  uint32_t eligible = 0;
  for (std::size_t i = 0; i < queues_.size(); ++i) {
    Queue &q = queues_[i];
    q.head = pfabric_next(q);
    refill(q, now_ns);
    if (!q.fifo.empty() && shaper_ok(q)) eligible |= 1u << i;
  }
  if (eligible == 0) {
    uint64_t next = std::numeric_limits<uint64_t>::max();
    for (const auto &q : queues_) {
      if (!q.fifo.empty()) next = std::min(next, shaper_ready_ns(q, now_ns));
    }
    res.status = DequeueStatus::kNotReady;
    res.next_eligible_ns = next;
    return res;
  }

  std::size_t qid = queues_.size();
  for (auto &lv : levels_) {
    uint32_t mask = 0;
    for (auto i : lv.members) mask |= eligible & (1u << i);
    if (mask) {
      qid = select_in_level(lv, mask);
      break;
    }
  }
  Queue &q = queues_[qid];
  Entry e = q.fifo[q.head];
  q.fifo.erase(q.fifo.begin() + static_cast<std::ptrdiff_t>(q.head));
  q.head = 0;
  const uint64_t wire = wire_bytes(e.meta);
  const uint64_t wire_bits = wire * 8;

  // DWRR and shaper accounting (selection guarantees deficit >= wire).
  q.deficit -= wire;
  if (q.cfg.shaper) q.tokens -= static_cast<int64_t>(wire_bits * kNsPerSec);
  if (q.fifo.empty()) {
    q.deficit = 0;
    for (auto &lv : levels_) {
      if (lv.priority == q.cfg.priority) {
        lv.pos = (lv.pos + 1) % lv.members.size();
        lv.in_service = false;
      }
    }
  }

  // Serialization.  If the caller polls no later than the (rounded-up) end of
  // the previous packet, the link was never idle: the packet starts exactly at
  // that end (internally; tx_start_ns reports the decision time now_ns).
  const uint64_t prev_end_ceil = busy_ns_ + (busy_frac_ > 0);
  if (now_ns > prev_end_ceil) {
    busy_ns_ = now_ns;
    busy_frac_ = 0;
  }
  res.tx_start_ns = now_ns;
  const uint64_t rate = port_.link_rate_bps;
  const uint64_t num = busy_frac_ + wire_bits * kNsPerSec;
  busy_ns_ += num / rate;
  busy_frac_ = num % rate;
  res.tx_end_ns = busy_ns_ + (busy_frac_ > 0);

  QueueStats &s = q.stats;
  res.status = DequeueStatus::kPacket;
  res.packet = e.meta;
  res.queue = static_cast<uint8_t>(qid);
  res.depth_bytes_before = s.depth_bytes;
  res.depth_pkts_before = s.depth_pkts;
  s.depth_bytes -= e.meta.bytes;
  s.depth_pkts -= 1;
  s.depth_bytes_by_color[static_cast<std::size_t>(e.meta.color)] -= e.meta.bytes;
  res.depth_bytes_after = s.depth_bytes;
  res.depth_pkts_after = s.depth_pkts;
  res.enqueue_ns = e.enqueue_ns;
  s.dequeued_pkts += 1;
  s.dequeued_bytes += e.meta.bytes;
  s.dequeued_wire_bytes += wire;
  stats_.buffered_bytes -= e.meta.bytes;
  stats_.buffered_pkts -= 1;
  stats_.tx_pkts += 1;
  stats_.tx_bytes += e.meta.bytes;
  stats_.tx_wire_bytes += wire;
  return res;
}

// ---------------------------------------------------------------------------

uint64_t flexpass_credit_rate_bps(const FlexPassParams &p) {
  const double r = p.w_q * static_cast<double>(p.link_rate_bps) * p.credit_wire_bytes /
                   (static_cast<double>(p.credit_wire_bytes) + p.max_frame_wire_bytes);
  return static_cast<uint64_t>(std::llround(r));
}

PortConfig flexpass_port_config(const FlexPassParams &p) {
  PortConfig c;
  c.link_rate_bps = p.link_rate_bps;
  c.shared_buffer_bytes = p.shared_buffer_bytes;
  c.wire_overhead_bytes = p.wire_overhead_bytes;
  c.dwrr_quantum_bytes = p.max_frame_wire_bytes;
  if (auto e = validate(c); !e.empty()) throw ConfigError("flexpass: " + e);
  return c;
}

std::vector<QueueConfig> flexpass_queue_configs(const FlexPassParams &p) {
  if (!(p.w_q > 0.0 && p.w_q < 1.0)) {
    throw ConfigError("flexpass: w_q must be in (0, 1) (got " + std::to_string(p.w_q) + ")");
  }
  if (p.credit_wire_bytes <= p.wire_overhead_bytes || p.max_frame_wire_bytes <= p.wire_overhead_bytes) {
    throw ConfigError("flexpass: credit and frame wire sizes must exceed the wire overhead");
  }
  if (p.credit_burst_credits == 0) throw ConfigError("flexpass: credit burst must be >= 1 credit");
  std::vector<QueueConfig> qs(3);
  QueueConfig &credit = qs[kCreditQueue];
  credit.priority = 1;
  credit.shaper = ShaperConfig{flexpass_credit_rate_bps(p),
                               uint64_t{p.credit_burst_credits} * p.credit_wire_bytes};
  // Buffers count PacketMeta::bytes, i.e. the wire size minus the overhead.
  credit.buffer_bytes = uint64_t{p.credit_buffer_credits} * (p.credit_wire_bytes - p.wire_overhead_bytes);

  QueueConfig &fp = qs[kFlexPassQueue];
  fp.priority = 0;
  fp.weight = p.w_q;
  fp.buffer_bytes = p.data_buffer_bytes;
  fp.ecn_threshold = p.flexpass_ecn_threshold;
  fp.red_threshold = p.flexpass_red_threshold;

  QueueConfig &legacy = qs[kLegacyQueue];
  legacy.priority = 0;
  legacy.weight = 1.0 - p.w_q;
  legacy.buffer_bytes = p.data_buffer_bytes;
  legacy.ecn_threshold = p.legacy_ecn_threshold;

  for (std::size_t i = 0; i < qs.size(); ++i) {
    if (auto e = validate(qs[i]); !e.empty()) throw ConfigError("flexpass queue " + std::to_string(i) + ": " + e);
  }
  return qs;
}

}  // namespace tm
}  // namespace flexpass
