#include "traffic_manager.h"

#include <bm/bm_sim/packet.h>
#include <sys/prctl.h>
#include <time.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace flexpass {
namespace bmv2 {

namespace {
uint64_t raw_monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ULL + uint64_t(ts.tv_nsec);
}
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
// Below this much remaining time the scheduler spins (yielding) instead of
// sleeping on the condition variable.
constexpr uint64_t kSpinNs = 20'000;
}  // namespace

uint64_t monotonic_ns() {
  static const uint64_t origin = raw_monotonic_ns();
  return raw_monotonic_ns() - origin + 1;  // never 0
}

TrafficManager::Port::Port(const TmDefaults &d)
    : tm(d.port, std::vector<tm::QueueConfig>(kQueues, d.queue)) {}

// Invariant: the times passed to the TM never go backwards, because due_ns
// comes from the TM itself (>= every time it has seen) and wall-clock times
// only grow.  While packets are queued and the scheduler is at most `catchup`
// late, the TM is called at due_ns, so its link starts the next packet where
// the previous one ended.
uint64_t TrafficManager::Port::clock(uint64_t now, uint64_t catchup) const {
  if (tm.port_stats().buffered_pkts > 0 && now > due_ns && now - due_ns <= catchup) return due_ns;
  return now;
}

TrafficManager::TrafficManager(TmDefaults defaults) : defaults_(std::move(defaults)) {
  // Fail at start-up, not on the first packet, if the defaults are invalid.
  tm::EgressPort probe(defaults_.port, std::vector<tm::QueueConfig>(kQueues, defaults_.queue));
  if (defaults_.egress_backlog_pkts == 0)
    throw std::invalid_argument("egress backlog bound must be at least 1 packet");
  for (auto &s : slots_) s.store(nullptr);
}

TrafficManager::~TrafficManager() { stop(); }

void TrafficManager::ensure_port(uint32_t port) {
  if (port >= kMaxPorts)
    throw std::out_of_range("port " + std::to_string(port) + " out of range (0.." +
                            std::to_string(kMaxPorts - 1) + ")");
  if (slots_[port].load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(create_mu_);
  if (slots_[port].load(std::memory_order_relaxed)) return;
  owned_.push_back(std::make_unique<Port>(defaults_));
  slots_[port].store(owned_.back().get(), std::memory_order_release);
  const uint32_t n = nports_.load(std::memory_order_relaxed);
  order_[n] = port;
  nports_.store(n + 1, std::memory_order_release);  // publishes order_[n]
}

bool TrafficManager::has_port(uint32_t port) const {
  return port < kMaxPorts && slots_[port].load(std::memory_order_acquire) != nullptr;
}

std::vector<uint32_t> TrafficManager::ports() const {
  std::vector<uint32_t> out;
  for (uint32_t p = 0; p < kMaxPorts; ++p)
    if (has_port(p)) out.push_back(p);
  return out;
}

tm::EnqueueResult TrafficManager::enqueue(
    uint32_t port, std::unique_ptr<bm::Packet> &packet, const tm::PacketMeta &meta,
    const std::function<void(const tm::EnqueueResult &, uint64_t)> &on_admit) {
  ensure_port(port);
  Port &p = *slots_[port].load(std::memory_order_acquire);
  tm::EnqueueResult r;
  uint64_t wake = kNever;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    const uint64_t wall = monotonic_ns();
    const uint64_t now = p.clock(wall, defaults_.catchup_ns);
    tm::PacketMeta m = meta;
    m.id = p.next_id++;
    r = p.tm.enqueue(m, now);
    if (!r.admitted) return r;
    // pFabric: packets of lower priority the TM dropped to make room.
    for (const tm::PacketMeta &v : r.evicted) take(p.fifo[v.queue], v.id);
    on_admit(r, now);
    p.fifo[m.queue].push_back(Entry{m.id, std::move(packet)});
    // A packet behind others changes nothing for the scheduler.  One joining
    // an empty queue may be eligible at once: serve the port here (saves a
    // thread hand-off when the link is idle) and wake the scheduler only if
    // the port still needs a timed visit.
    if (r.depth_pkts_before != 0) return r;
    std::size_t sent = 0;
    wake = serve(p, port, wall, &sent);
  }
  if (wake != kNever) kick();
  return r;
}

void TrafficManager::kick() {
  {
    std::lock_guard<std::mutex> lock(sched_mu_);
    kicked_ = true;
  }
  sched_cv_.notify_one();
}

void TrafficManager::start(Sink sink) {
  sink_ = std::move(sink);
  thread_ = std::thread(&TrafficManager::scheduler_loop, this);
}

void TrafficManager::stop() {
  {
    std::lock_guard<std::mutex> lock(sched_mu_);
    if (stop_) return;
    stop_ = true;
  }
  sched_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

// The TM and the packet queues hold the same packets in the same arrival
// order; a FIFO queue sends its front, a pFabric queue any of its packets.
std::unique_ptr<bm::Packet> TrafficManager::take(std::deque<Entry> &q, uint64_t id) {
  auto it = q.begin();
  while (it != q.end() && it->id != id) ++it;
  if (it == q.end()) throw std::logic_error("flexpass_switch: TM and packet queue out of step");
  std::unique_ptr<bm::Packet> pkt = std::move(it->packet);
  q.erase(it);
  return pkt;
}

// Dekker-style with egress_done(): serve() publishes held_ before it
// re-reads the backlog, egress_done() decrements before it reads held_, so
// either serve() sees the room or egress_done() sees held_ and kicks.
bool TrafficManager::egress_full() {
  const uint32_t limit = defaults_.egress_backlog_pkts;
  if (backlog_.load() < limit) return false;
  held_.store(true);
  if (backlog_.load() < limit) return false;
  holds_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void TrafficManager::egress_done() {
  const uint32_t left = backlog_.fetch_sub(1) - 1;
  if (left <= defaults_.egress_backlog_pkts / 2 && held_.exchange(false)) kick();
}

EgressStats TrafficManager::egress_stats() const {
  EgressStats s;
  s.backlog_pkts = backlog_.load(std::memory_order_relaxed);
  s.max_backlog_pkts = max_backlog_.load(std::memory_order_relaxed);
  s.limit_pkts = defaults_.egress_backlog_pkts;
  s.holds = holds_.load(std::memory_order_relaxed);
  return s;
}

uint64_t TrafficManager::serve(Port &p, uint32_t port, uint64_t now, std::size_t *sent) {
  for (;;) {
    // Egress backlog at its bound: leave the packets in the TM (the link
    // idles, queues build, admission drops); egress_done() kicks us.
    if (egress_full()) return kNever;
    const uint64_t t = p.clock(now, defaults_.catchup_ns);
    tm::DequeueResult d = p.tm.dequeue(t);
    switch (d.status) {
      case tm::DequeueStatus::kPacket: {
        Departure dep{take(p.fifo[d.queue], d.packet.id), port, d};
        const uint32_t n = backlog_.fetch_add(1) + 1;  // before the consumer can see it
        uint32_t m = max_backlog_.load(std::memory_order_relaxed);
        while (n > m && !max_backlog_.compare_exchange_weak(m, n, std::memory_order_relaxed)) {
        }
        sink_(std::move(dep));
        ++*sent;
        p.due_ns = d.tx_end_ns;
        continue;  // the next call reports when the link is free again
      }
      case tm::DequeueStatus::kNotReady:
        p.due_ns = d.next_eligible_ns;
        // Late but within the catch-up window: serve it at its due time now.
        if (d.next_eligible_ns > t && d.next_eligible_ns <= now &&
            p.clock(now, defaults_.catchup_ns) < now)
          continue;
        return d.next_eligible_ns;
      case tm::DequeueStatus::kEmpty:
        return kNever;
    }
  }
}

void TrafficManager::scheduler_loop() {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // precise sleeps for this thread
  uint32_t first = 0;  // rotates, so that no port is always served first after a hold
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(sched_mu_);
      if (stop_) return;
      kicked_ = false;  // everything enqueued before this point is seen below
    }
    const uint64_t now = monotonic_ns();
    uint64_t wake = kNever;
    std::size_t sent = 0;
    const uint32_t n = nports_.load(std::memory_order_acquire);
    if (n) first = (first + 1) % n;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t id = order_[(first + i) % n];
      Port *p = slots_[id].load(std::memory_order_acquire);
      std::lock_guard<std::mutex> lock(p->mu);
      wake = std::min(wake, serve(*p, id, now, &sent));
    }
    if (sent) continue;  // serving took time: look again before sleeping
    std::unique_lock<std::mutex> lock(sched_mu_);
    if (kicked_ || stop_) continue;
    if (wake == kNever) {
      sched_cv_.wait(lock, [this] { return kicked_ || stop_; });
      continue;
    }
    const uint64_t t = monotonic_ns();
    if (wake > t + kSpinNs) {
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::nanoseconds(wake - t - kSpinNs);
      sched_cv_.wait_until(lock, deadline, [this] { return kicked_ || stop_; });
      continue;
    }
    lock.unlock();
    while (monotonic_ns() < wake) {
      std::this_thread::yield();
      std::lock_guard<std::mutex> l(sched_mu_);
      if (kicked_ || stop_) break;
    }
  }
}

}  // namespace bmv2
}  // namespace flexpass
