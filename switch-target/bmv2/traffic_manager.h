// Real-time driver of the flexpass_tm core: one tm::EgressPort per egress
// port, each behind its own mutex, served by one scheduler thread that sleeps
// until the earliest time any port can send (or an enqueue wakes it).
#ifndef FLEXPASS_BMV2_TRAFFIC_MANAGER_H_
#define FLEXPASS_BMV2_TRAFFIC_MANAGER_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "flexpass/tm.h"

namespace bm {
class Packet;
}

namespace flexpass {
namespace bmv2 {

// Monotonic time (CLOCK_MONOTONIC), ns since the first call in the process.
uint64_t monotonic_ns();

struct TmDefaults {
  tm::PortConfig port;      // used for every port until set_port changes it
  tm::QueueConfig queue;    // used for all 8 queues until set_queue changes them
  // A port whose scheduler woke up late (by at most this much) is served at
  // the time it was due rather than at the wall-clock time, so OS wake-up
  // jitter does not leave the emulated link idle (long-run rates stay exact).
  uint64_t catchup_ns = 1'000'000;
  // Bound on departures handed to the egress thread and not yet transmitted
  // (egress_done() not yet called).  At the bound the scheduler dequeues
  // nothing: packets wait in the TM queues, where ECN and admission apply.
  uint32_t egress_backlog_pkts = 64;
};

// The egress backlog (switch-wide: one egress thread serves every port).
struct EgressStats {
  uint64_t backlog_pkts = 0;      // handed to the egress thread, not yet done
  uint64_t max_backlog_pkts = 0;  // watermark since start
  uint64_t limit_pkts = 0;        // TmDefaults::egress_backlog_pkts
  uint64_t holds = 0;             // times a port was not served because of the bound
};

// A packet leaving the TM (served by the scheduler, or inline by enqueue when
// its port was idle), handed to the egress thread.
struct Departure {
  std::unique_ptr<bm::Packet> packet;
  uint32_t port = 0;
  tm::DequeueResult tm;  // queue, depths, enqueue/tx times (TM clock)
};

class TrafficManager {
 public:
  static constexpr uint32_t kMaxPorts = 512;  // v1model: 9-bit port numbers
  static constexpr std::size_t kQueues = tm::kMaxQueues;

  // Receives each departing packet, called under the port's lock so packets
  // of one port reach the sink in departure order.  Must not block.
  using Sink = std::function<void(Departure &&)>;

  explicit TrafficManager(TmDefaults defaults);
  ~TrafficManager();
  TrafficManager(const TrafficManager &) = delete;
  TrafficManager &operator=(const TrafficManager &) = delete;

  // Starts the scheduler thread; departures are passed to sink (from the
  // scheduler, or from enqueue() when the packet can leave at once).
  void start(Sink sink);
  void stop();

  // Creates the port with the default configuration if it does not exist.
  // Throws std::out_of_range for port >= kMaxPorts.
  void ensure_port(uint32_t port);
  bool has_port(uint32_t port) const;
  std::vector<uint32_t> ports() const;

  // Admission.  On success the TM owns the packet (it is moved from); on a
  // drop, packet is left untouched and the caller discards it.
  // on_admit runs under the port lock just before the packet is queued (to
  // write the enqueue metadata into it).
  tm::EnqueueResult enqueue(uint32_t port, std::unique_ptr<bm::Packet> &packet,
                            const tm::PacketMeta &meta,
                            const std::function<void(const tm::EnqueueResult &, uint64_t now_ns)> &on_admit);

  // Runs fn(EgressPort &, uint64_t tm_now_ns) under the port's lock (creating
  // the port if needed); used by the runtime API for configuration and telemetry.
  template <typename Fn>
  auto with_port(uint32_t port, Fn &&fn) {
    ensure_port(port);
    Port &p = *slots_[port].load(std::memory_order_acquire);
    std::lock_guard<std::mutex> lock(p.mu);
    return fn(p.tm, p.clock(monotonic_ns(), defaults_.catchup_ns));
  }
  // Wakes the scheduler (after a configuration change).
  void kick();

  // Called by the consumer of the sink once per departure, when it is done
  // with it (transmitted or dropped by the egress pipeline).  Wakes the
  // scheduler when the backlog falls to half the bound after a hold.
  void egress_done();
  EgressStats egress_stats() const;

  const TmDefaults &defaults() const { return defaults_; }

 private:
  struct Entry {
    uint64_t id;
    std::unique_ptr<bm::Packet> packet;
  };
  struct Port {
    explicit Port(const TmDefaults &d);
    std::mutex mu;
    tm::EgressPort tm;
    std::array<std::deque<Entry>, kQueues> fifo;  // parallel to the TM's queues (arrival order)
    uint64_t due_ns = 0;  // when the TM last asked to be called again
    uint64_t next_id = 1;
    // TM time for a call at wall-clock time now (see TmDefaults::catchup_ns).
    uint64_t clock(uint64_t now, uint64_t catchup) const;
  };

  // Removes the packet with TM id `id` from q and returns it.
  static std::unique_ptr<bm::Packet> take(std::deque<Entry> &q, uint64_t id);
  void scheduler_loop();
  // Serves one port (lock held) at wall-clock time now; returns when it next
  // needs service (UINT64_MAX if empty) and counts departures in *sent.
  uint64_t serve(Port &p, uint32_t port, uint64_t now, std::size_t *sent);
  // True if the egress backlog is at its bound (then egress_done() will kick
  // the scheduler once it has drained to half).
  bool egress_full();

  const TmDefaults defaults_;
  std::array<std::atomic<Port *>, kMaxPorts> slots_{};
  std::vector<std::unique_ptr<Port>> owned_;   // guarded by create_mu_
  std::array<uint32_t, kMaxPorts> order_{};    // active port ids, append-only
  std::atomic<uint32_t> nports_{0};
  mutable std::mutex create_mu_;

  std::mutex sched_mu_;
  std::condition_variable sched_cv_;
  bool kicked_ = false;  // guarded by sched_mu_
  bool stop_ = false;    // guarded by sched_mu_
  Sink sink_;
  std::thread thread_;

  // Egress backlog (see TmDefaults::egress_backlog_pkts).  Invariant: a
  // departure is counted before the sink gets it and uncounted by egress_done().
  std::atomic<uint32_t> backlog_{0};
  std::atomic<uint32_t> max_backlog_{0};
  std::atomic<bool> held_{false};  // a serve() found the backlog full since the last kick
  std::atomic<uint64_t> holds_{0};
};

}  // namespace bmv2
}  // namespace flexpass

#endif  // FLEXPASS_BMV2_TRAFFIC_MANAGER_H_
