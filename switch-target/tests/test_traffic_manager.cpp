// The real-time TrafficManager of flexpass_switch (bmv2/traffic_manager.cpp)
// with a test consumer in place of BMv2's egress thread.  Packets are null
// bm::Packet pointers: the TM never looks into them.
#include <gtest/gtest.h>

#include <bm/bm_sim/packet.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "../bmv2/traffic_manager.h"

namespace flexpass {
namespace bmv2 {
namespace {

// Stands in for the egress thread: takes departures from the sink and calls
// egress_done() after `per_packet` of work each.
class Egress {
 public:
  Egress(TrafficManager &tm, std::chrono::microseconds per_packet)
      : tm_(tm), per_packet_(per_packet), thread_([this] { run(); }) {}
  ~Egress() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void sink(Departure &&d) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(d.tm);
    }
    cv_.notify_one();
  }
  std::vector<tm::DequeueResult> done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      tm::DequeueResult d = q_.front();
      q_.pop_front();
      l.unlock();
      std::this_thread::sleep_for(per_packet_);
      tm_.egress_done();
      l.lock();
      done_.push_back(d);
    }
  }
  TrafficManager &tm_;
  const std::chrono::microseconds per_packet_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<tm::DequeueResult> q_;
  std::vector<tm::DequeueResult> done_;
  bool stop_ = false;
  std::thread thread_;
};

// Stops the scheduler before the Egress it feeds is destroyed (declared after it).
struct Stopper {
  TrafficManager &tm;
  ~Stopper() { tm.stop(); }
};

TmDefaults defaults(uint64_t rate_bps, uint64_t buffer_bytes, uint32_t backlog) {
  TmDefaults d;
  d.port.link_rate_bps = rate_bps;
  d.queue.buffer_bytes = buffer_bytes;
  d.egress_backlog_pkts = backlog;
  return d;
}

uint64_t offer(TrafficManager &tm, int n, uint32_t bytes) {
  uint64_t admitted = 0;
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<bm::Packet> pkt;
    tm::PacketMeta m;
    m.bytes = bytes;
    if (tm.enqueue(1, pkt, m, [](const tm::EnqueueResult &, uint64_t) {}).admitted) ++admitted;
  }
  return admitted;
}

template <typename Pred>
bool wait_for(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// An egress far slower than the link (1 ms per packet, 10 Gbit/s link): the
// backlog stops at its bound, the rest waits in the TM queue and the excess is
// dropped and counted there; every admitted packet still leaves.
TEST(TrafficManagerEgress, SlowEgressHoldsPacketsInTheTmQueue) {
  TrafficManager tm(defaults(10'000'000'000, 20 * 100, 8));
  Egress eg(tm, std::chrono::microseconds(1000));
  Stopper stopper{tm};
  tm.start([&](Departure &&d) { eg.sink(std::move(d)); });
  const uint64_t admitted = offer(tm, 300, 100);
  const tm::QueueStats q = tm.with_port(1, [](tm::EgressPort &p, uint64_t) { return p.queue_stats(0); });
  EXPECT_EQ(q.dropped_pkts[static_cast<int>(tm::DropReason::kQueueFull)], 300 - admitted);
  EXPECT_GE(300 - admitted, 250u) << "the burst went past the TM instead of queueing in it";
  ASSERT_TRUE(wait_for([&] { return eg.done().size() == admitted; }, std::chrono::seconds(20)))
      << eg.done().size() << " of " << admitted << " admitted packets left";
  const EgressStats s = tm.egress_stats();
  EXPECT_EQ(s.max_backlog_pkts, 8u);
  EXPECT_GT(s.holds, 0u);
  EXPECT_EQ(s.backlog_pkts, 0u);
}

// An egress that keeps up: the bound never holds the TM back and the TM's
// link pacing is unchanged (1000 B at 8 Mbit/s: 1 ms apart in TM time).
TEST(TrafficManagerEgress, FastEgressKeepsTheLinkRate) {
  TrafficManager tm(defaults(8'000'000, 1'000'000, 64));
  Egress eg(tm, std::chrono::microseconds(0));
  Stopper stopper{tm};
  tm.start([&](Departure &&d) { eg.sink(std::move(d)); });
  ASSERT_EQ(offer(tm, 50, 1000), 50u);
  ASSERT_TRUE(wait_for([&] { return eg.done().size() == 50; }, std::chrono::seconds(10)));
  const std::vector<tm::DequeueResult> d = eg.done();
  EXPECT_EQ(tm.egress_stats().holds, 0u);
  EXPECT_LT(tm.egress_stats().max_backlog_pkts, 64u);
  uint64_t back_to_back = 0;
  for (std::size_t i = 1; i < d.size(); ++i)
    if (d[i].tx_start_ns == d[i - 1].tx_end_ns || d[i].tx_start_ns + 1 == d[i - 1].tx_end_ns) ++back_to_back;
  // A scheduler later than the catch-up window (a loaded host) may leave a gap.
  EXPECT_GE(back_to_back, 45u);
}

TEST(TrafficManagerEgress, ZeroBoundIsRejected) {
  EXPECT_THROW(TrafficManager(defaults(8'000'000, 1000, 0)), std::invalid_argument);
}

}  // namespace
}  // namespace bmv2
}  // namespace flexpass
