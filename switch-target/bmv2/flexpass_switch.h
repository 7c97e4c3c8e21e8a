// flexpass_switch: a BMv2 (bm_sim) target that runs a v1model program with
// the FlexPass traffic manager (flexpass_tm) between ingress and egress.
//
// Threads (see README.md):
//   receive (bm DevMgr)  -> input buffer
//   ingress              parser, verify checksum, ingress pipeline; TM admission
//   scheduler            TrafficManager: dequeues when a port's link is free
//   egress               egress pipeline, update checksum, deparser, transmit
#ifndef FLEXPASS_BMV2_FLEXPASS_SWITCH_H_
#define FLEXPASS_BMV2_FLEXPASS_SWITCH_H_

#include <bm/bm_sim/packet.h>
#include <bm/bm_sim/switch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "traffic_manager.h"

namespace flexpass {
namespace bmv2 {

enum class QdepthUnits { kBytes, kPackets };

struct SwitchOptions {
  bool enable_swap = true;
  uint32_t drop_port = 511;
  std::string color_field = "flexpass_meta_t.color";  // "" = no colours
  QdepthUnits qdepth_units = QdepthUnits::kBytes;
  TmDefaults tm;
};

// Small blocking FIFO between threads; nullptr is the stop sentinel.
template <typename T>
class Channel {
 public:
  explicit Channel(std::size_t capacity) : capacity_(capacity) {}
  void push(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    can_push_.wait(lock, [this] { return q_.size() < capacity_; });
    q_.push_back(std::move(item));
    lock.unlock();
    can_pop_.notify_one();
  }
  void push_unbounded(T item) {  // never blocks (TM departures: the TM bounds them)
    {
      std::lock_guard<std::mutex> lock(mu_);
      q_.push_back(std::move(item));
    }
    can_pop_.notify_one();
  }
  T pop() {
    std::unique_lock<std::mutex> lock(mu_);
    can_pop_.wait(lock, [this] { return !q_.empty(); });
    T item = std::move(q_.front());
    q_.pop_front();
    lock.unlock();
    can_push_.notify_one();
    return item;
  }

 private:
  std::mutex mu_;
  std::condition_variable can_push_, can_pop_;
  std::deque<T> q_;
  std::size_t capacity_;
};

class FlexPassSwitch : public bm::Switch {
 public:
  using port_t = bm::Switch::port_t;
  using TransmitFn = std::function<void(port_t, const char *, int)>;

  explicit FlexPassSwitch(const SwitchOptions &opts);
  ~FlexPassSwitch() override;
  FlexPassSwitch(const FlexPassSwitch &) = delete;
  FlexPassSwitch &operator=(const FlexPassSwitch &) = delete;

  int receive_(port_t port, const char *buffer, int len) override;
  void start_and_return_() override;
  void swap_notify_() override;

  void set_transmit_fn(TransmitFn fn) { transmit_ = std::move(fn); }
  TrafficManager &traffic_manager() { return tm_; }

  // Checks the loaded program for what this target needs (the colour field)
  // and caches field names for the data path; returns "" or an error message.
  // Must not run while packets are in flight (start-up or ingress thread).
  std::string resolve_program();

 private:
  struct ProgramInfo {
    std::string color_field;     // full PHV name, "" if colours are disabled
    std::string priority_field;  // "" if the program has none (queue 0)
    std::string rank_field;      // pFabric rank / flow key, "" if the program has none
    std::string flow_field;
    bool has_ipv4_ecn = false;
  };

  void ingress_loop();
  void egress_loop();
  void admit(std::unique_ptr<bm::Packet> packet, port_t egress_port);
  void egress(Departure &&d);
  uint64_t qdepth(uint64_t bytes, uint64_t pkts) const;

  const SwitchOptions opts_;
  TrafficManager tm_;
  // Written only by resolve_program() (start-up, or the ingress thread before
  // its first packet after a config swap, when no other packet exists).
  ProgramInfo prog_;
  std::atomic<bool> program_changed_{false};
  TransmitFn transmit_;
  std::atomic<uint64_t> next_packet_id_{0};
  Channel<std::unique_ptr<bm::Packet>> input_{1024};
  // Departures: at most TmDefaults::egress_backlog_pkts, bounded by the TM
  // (it holds packets back while the egress thread is behind).
  Channel<std::unique_ptr<Departure>> output_{std::numeric_limits<std::size_t>::max()};
  std::vector<std::thread> threads_;
};

}  // namespace bmv2
}  // namespace flexpass

#endif  // FLEXPASS_BMV2_FLEXPASS_SWITCH_H_
