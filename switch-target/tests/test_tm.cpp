// Unit tests of the FlexPass traffic-manager core (flexpass/tm.h).
//
// Most tests drive one EgressPort with a small discrete-event harness: some
// queues are kept backlogged (topped up before every dequeue), the port is
// polled at the time it names (end of serialization, or the next time a shaped
// queue becomes eligible), and the wire bytes sent per queue are counted.
#include "flexpass/tm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace flexpass::tm;

namespace {

constexpr uint64_t kGbps = 1'000'000'000ULL;
constexpr uint64_t kMs = 1'000'000ULL;  // ns

using SizeFn = std::function<uint32_t(std::mt19937_64 &)>;

SizeFn fixed(uint32_t b) {
  return [b](std::mt19937_64 &) { return b; };
}
// Uniform in [lo, hi] from the raw generator output (portable, unlike the
// standard distributions).
SizeFn uniform(uint32_t lo, uint32_t hi) {
  return [lo, hi](std::mt19937_64 &g) { return lo + static_cast<uint32_t>(g() % (hi - lo + 1)); };
}
// `small` with probability p_small_percent %, else `large`.
SizeFn bimodal(uint32_t small, uint32_t large, unsigned p_small_percent) {
  return [=](std::mt19937_64 &g) { return (g() % 100) < p_small_percent ? small : large; };
}

struct Source {
  uint8_t queue;
  SizeFn size;
  uint64_t keep_bytes;  // top the queue up to at least this depth
  Color color = Color::kGreen;
};

struct Harness {
  explicit Harness(EgressPort &p, uint64_t seed = 1) : port(p), rng(seed) {}

  EgressPort &port;
  std::mt19937_64 rng;
  uint64_t now = 0;
  uint64_t next_id = 1;
  std::vector<Source> sources;
  std::vector<uint64_t> sent = std::vector<uint64_t>(kMaxQueues, 0);  // wire bytes per queue
  uint64_t packets = 0;

  void top_up() {
    for (auto &s : sources) {
      while (port.queue_stats(s.queue).depth_bytes < s.keep_bytes) {
        PacketMeta m{next_id++, s.size(rng), s.queue, s.color, false};
        auto r = port.enqueue(m, now);
        if (!r.admitted) break;
      }
    }
  }

  void reset_counters() { std::fill(sent.begin(), sent.end(), 0); }

  // Runs until `end_ns`; packets starting before end_ns are counted.
  void run_until(uint64_t end_ns) {
    while (now < end_ns) {
      top_up();
      DequeueResult r = port.dequeue(now);
      switch (r.status) {
        case DequeueStatus::kPacket:
          sent[r.queue] += uint64_t{r.packet.bytes} + port.port_config().wire_overhead_bytes;
          ++packets;
          now = r.tx_end_ns;
          break;
        case DequeueStatus::kNotReady:
          ASSERT_GT(r.next_eligible_ns, now);
          now = r.next_eligible_ns;
          break;
        case DequeueStatus::kEmpty:
          now = end_ns;
          break;
      }
    }
  }
};

double gbps(uint64_t wire_bytes, uint64_t ns) { return static_cast<double>(wire_bytes) * 8.0 / static_cast<double>(ns); }

QueueConfig dwrr_queue(double weight, uint8_t prio = 0) {
  QueueConfig q;
  q.priority = prio;
  q.weight = weight;
  return q;
}

PortConfig port_at(uint64_t rate_bps) {
  PortConfig p;
  p.link_rate_bps = rate_bps;
  return p;
}

PacketMeta pkt(uint64_t id, uint32_t bytes, uint8_t queue, Color c = Color::kGreen, bool ect = false) {
  return PacketMeta{id, bytes, queue, c, ect};
}

}  // namespace

// ---------------------------------------------------------------------------
// DWRR

struct DwrrCase {
  double w0, w1;
  const char *mix;
};

void PrintTo(const DwrrCase &c, std::ostream *os) { *os << c.mix << " weights " << c.w0 << ":" << c.w1; }

class DwrrShares : public ::testing::TestWithParam<DwrrCase> {};

SizeFn mix_for(const std::string &mix, int queue) {
  if (mix == "mtu") return fixed(1538);
  if (mix == "min") return fixed(64);
  if (mix == "mtu_vs_min") return queue == 0 ? fixed(1538) : fixed(64);
  if (mix == "min_vs_mtu") return queue == 0 ? fixed(64) : fixed(1538);
  if (mix == "uniform") return uniform(64, 1538);
  if (mix == "bimodal") return bimodal(64, 1538, 90);
  if (mix == "jumbo_vs_mtu") return queue == 0 ? fixed(9000) : fixed(1538);
  if (mix == "odd") return queue == 0 ? uniform(60, 200) : uniform(1000, 1538);
  ADD_FAILURE() << "unknown mix " << mix;
  return fixed(1);
}

TEST_P(DwrrShares, ByteSharesMatchWeightsWithin2Percent) {
  const DwrrCase c = GetParam();
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(c.w0), dwrr_queue(c.w1)});
  Harness h(port, 42);
  h.sources = {{0, mix_for(c.mix, 0), 20'000}, {1, mix_for(c.mix, 1), 20'000}};
  h.run_until(1 * kMs);  // warm-up
  h.reset_counters();
  const uint64_t t0 = h.now;
  h.run_until(t0 + 10 * kMs);
  const double total = static_cast<double>(h.sent[0] + h.sent[1]);
  const double share0 = h.sent[0] / total, share1 = h.sent[1] / total;
  const double exp0 = c.w0 / (c.w0 + c.w1), exp1 = c.w1 / (c.w0 + c.w1);
  EXPECT_NEAR(share0, exp0, 0.02 * exp0) << "mix " << c.mix;
  EXPECT_NEAR(share1, exp1, 0.02 * exp1) << "mix " << c.mix;
  // Both backlogged: the link is fully used.
  EXPECT_NEAR(gbps(h.sent[0] + h.sent[1], h.now - t0), 10.0, 0.01);
}

INSTANTIATE_TEST_SUITE_P(
    WeightsAndMixes, DwrrShares,
    ::testing::Values(DwrrCase{1, 1, "mtu"}, DwrrCase{1, 3, "mtu"}, DwrrCase{1, 1, "mtu_vs_min"},
                      DwrrCase{1, 3, "mtu_vs_min"}, DwrrCase{3, 1, "mtu_vs_min"}, DwrrCase{1, 3, "min_vs_mtu"},
                      DwrrCase{0.3, 0.7, "uniform"}, DwrrCase{0.5, 0.5, "bimodal"}, DwrrCase{0.1, 0.9, "mtu"},
                      DwrrCase{0.1, 0.9, "mtu_vs_min"}, DwrrCase{0.9, 0.1, "min_vs_mtu"},
                      DwrrCase{5, 2, "uniform"}, DwrrCase{0.25, 0.75, "jumbo_vs_mtu"},
                      DwrrCase{0.75, 0.25, "jumbo_vs_mtu"}, DwrrCase{0.2, 0.8, "odd"}, DwrrCase{2, 7, "bimodal"},
                      DwrrCase{1, 1, "min"}),
    [](const ::testing::TestParamInfo<DwrrCase> &i) {
      auto w = [](double x) { return std::to_string(static_cast<int>(std::lround(x * 100))); };
      return std::string(i.param.mix) + "_" + w(i.param.w0) + "_" + w(i.param.w1);
    });

TEST(Dwrr, ThreeQueuesShareByWeight) {
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1), dwrr_queue(2), dwrr_queue(4)});
  Harness h(port, 7);
  h.sources = {{0, uniform(64, 1538), 20'000}, {1, bimodal(64, 1538, 50), 20'000}, {2, fixed(1000), 20'000}};
  h.run_until(10 * kMs);
  const double total = static_cast<double>(h.sent[0] + h.sent[1] + h.sent[2]);
  EXPECT_NEAR(h.sent[0] / total, 1.0 / 7, 0.02 / 7);
  EXPECT_NEAR(h.sent[1] / total, 2.0 / 7, 0.04 / 7);
  EXPECT_NEAR(h.sent[2] / total, 4.0 / 7, 0.08 / 7);
}

TEST(Dwrr, QuantumProportionalToWeightLargestIsBase) {
  PortConfig pc = port_at(10 * kGbps);
  pc.dwrr_quantum_bytes = 2000;
  EgressPort port(pc, {dwrr_queue(0.25), dwrr_queue(1.0), dwrr_queue(0.5), dwrr_queue(9.0, 3)});
  EXPECT_EQ(port.dwrr_quantum(0), 500u);
  EXPECT_EQ(port.dwrr_quantum(1), 2000u);
  EXPECT_EQ(port.dwrr_quantum(2), 1000u);
  EXPECT_EQ(port.dwrr_quantum(3), 2000u);  // alone in its level
}

TEST(Dwrr, DeficitResetWhenQueueEmpties) {
  // A queue that empties loses its leftover deficit (it cannot bank credit
  // while idle and later burst past its quantum).
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1), dwrr_queue(1)});  // quanta 1538 B
  uint64_t id = 1, t = 0;
  ASSERT_TRUE(port.enqueue(pkt(id++, 100, 0), t).admitted);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(port.enqueue(pkt(id++, 1538, 1), t).admitted);
  auto a = port.dequeue(t);  // queue 0: deficit 1538 - 100, then empty
  ASSERT_EQ(a.queue, 0u);
  t = a.tx_end_ns;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(port.enqueue(pkt(id++, 1000, 0), t).admitted);
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) {
    auto r = port.dequeue(t);
    ASSERT_EQ(r.status, DequeueStatus::kPacket);
    order.push_back(r.queue);
    t = r.tx_end_ns;
  }
  // Queue 1 (1538), then queue 0 gets one quantum: one 1000 B packet (538 B
  // left, the next 1000 B does not fit), then queue 1 again.
  EXPECT_EQ(order, (std::vector<int>{1, 0, 1, 0, 0, 1}));
}

TEST(Dwrr, WorkConservingLoneBackloggedQueueGetsFullLink) {
  // Weight 0.1 of 1.0, but queue 1 stays empty: queue 0 must get the whole link.
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(0.1), dwrr_queue(0.9)});
  Harness h(port, 3);
  h.sources = {{0, uniform(64, 1538), 20'000}};
  h.run_until(5 * kMs);
  EXPECT_EQ(h.sent[1], 0u);
  EXPECT_NEAR(gbps(h.sent[0], h.now), 10.0, 0.01);
  // ... and when the heavy queue joins, the light one falls back to its share.
  h.sources.push_back({1, uniform(64, 1538), 20'000});
  h.reset_counters();
  const uint64_t t0 = h.now;
  h.run_until(t0 + 10 * kMs);
  const double total = static_cast<double>(h.sent[0] + h.sent[1]);
  EXPECT_NEAR(h.sent[0] / total, 0.1, 0.002);
}

// ---------------------------------------------------------------------------
// Strict priority and shaping

TEST(Priority, UnshapedHigherLevelStarvesLowerLevel) {
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1, 1), dwrr_queue(1, 0)});
  Harness h(port);
  h.sources = {{0, fixed(1000), 10'000}, {1, fixed(1000), 10'000}};
  h.run_until(2 * kMs);
  EXPECT_EQ(h.sent[1], 0u);
  EXPECT_NEAR(gbps(h.sent[0], h.now), 10.0, 0.01);
}

TEST(Priority, ShapedHigherLevelTakesOnlyItsRateRestGoesToLowerLevel) {
  for (uint64_t rate : {uint64_t{258'939'581}, 1 * kGbps, 4 * kGbps}) {
    QueueConfig hi = dwrr_queue(1, 1);
    hi.shaper = ShaperConfig{rate, 2 * 1538};
    EgressPort port(port_at(10 * kGbps), {hi, dwrr_queue(1, 0)});
    Harness h(port, 9);
    h.sources = {{0, uniform(84, 1538), 10'000}, {1, uniform(64, 1538), 10'000}};
    h.run_until(20 * kMs);
    const double hi_gbps = gbps(h.sent[0], h.now), lo_gbps = gbps(h.sent[1], h.now);
    const double r = static_cast<double>(rate) / kGbps;
    EXPECT_NEAR(hi_gbps, r, 0.01 * r) << "rate " << rate;
    EXPECT_NEAR(lo_gbps, 10.0 - r, 0.01 * (10.0 - r)) << "rate " << rate;
    EXPECT_NEAR(hi_gbps + lo_gbps, 10.0, 0.01) << "rate " << rate;
  }
}

TEST(Priority, NonPreemptiveHighArrivalWaitsForPacketOnWire) {
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1, 1), dwrr_queue(1, 0)});
  ASSERT_TRUE(port.enqueue(pkt(1, 1500, 1), 0).admitted);
  auto a = port.dequeue(0);
  ASSERT_EQ(a.status, DequeueStatus::kPacket);
  EXPECT_EQ(a.tx_end_ns, 1200u);
  ASSERT_TRUE(port.enqueue(pkt(2, 1500, 1), 100).admitted);
  ASSERT_TRUE(port.enqueue(pkt(3, 64, 0), 200).admitted);
  auto b = port.dequeue(300);
  ASSERT_EQ(b.status, DequeueStatus::kNotReady);
  EXPECT_EQ(b.next_eligible_ns, 1200u);
  auto c = port.dequeue(1200);
  ASSERT_EQ(c.status, DequeueStatus::kPacket);
  EXPECT_EQ(c.packet.id, 3u);  // the high-priority packet goes first once the link is free
  EXPECT_EQ(c.queue, 0u);
  EXPECT_EQ(c.enqueue_ns, 200u);
}

TEST(Shaper, LongRunRateWithin1Percent) {
  struct Case {
    uint64_t rate;
    uint64_t burst;
    SizeFn size;
  };
  std::vector<Case> cases = {{1 * kGbps, 3000, fixed(1000)},
                             {2'500'000'000ULL, 1538, uniform(64, 1538)},
                             {258'939'581ULL, 168, fixed(84)},
                             {7 * kGbps, 10'000, bimodal(64, 1538, 30)},
                             {100'000'000ULL, 1000, fixed(1500)}};  // packet > burst
  for (auto &c : cases) {
    QueueConfig q = dwrr_queue(1);
    q.shaper = ShaperConfig{c.rate, c.burst};
    EgressPort port(port_at(10 * kGbps), {q});
    Harness h(port, 5);
    h.sources = {{0, c.size, 20'000}};
    h.run_until(20 * kMs);
    const double r = static_cast<double>(c.rate) / kGbps;
    EXPECT_NEAR(gbps(h.sent[0], h.now), r, 0.01 * r) << "rate " << c.rate;
  }
}

TEST(Shaper, BurstHonouredExactly) {
  // 1 Gbit/s shaper, 3000 B bucket, 1000 B packets on a 10 Gbit/s link (800 ns each).
  QueueConfig q = dwrr_queue(1);
  q.shaper = ShaperConfig{1 * kGbps, 3000};
  EgressPort port(port_at(10 * kGbps), {q});
  for (uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 1000, 0), 0).admitted);
  // Tokens: 3000 -> send (2000) -> +100 at 800 ns -> send (1100) -> +100 at
  // 1600 -> send (200) -> +100 at 2400 = 300 < 1000: wait 700 B = 5600 ns.
  auto p1 = port.dequeue(0);
  ASSERT_EQ(p1.status, DequeueStatus::kPacket);
  auto p2 = port.dequeue(p1.tx_end_ns);
  ASSERT_EQ(p2.status, DequeueStatus::kPacket);
  auto p3 = port.dequeue(p2.tx_end_ns);
  ASSERT_EQ(p3.status, DequeueStatus::kPacket);
  EXPECT_EQ(p2.tx_start_ns, 800u);
  EXPECT_EQ(p3.tx_start_ns, 1600u);
  auto w = port.dequeue(p3.tx_end_ns);
  ASSERT_EQ(w.status, DequeueStatus::kNotReady);
  EXPECT_EQ(w.next_eligible_ns, 8000u);
  EXPECT_EQ(port.dequeue(7999).status, DequeueStatus::kNotReady);
  auto p4 = port.dequeue(8000);
  ASSERT_EQ(p4.status, DequeueStatus::kPacket);
  // Steady state: one 1000 B packet per 8000 ns.
  auto w2 = port.dequeue(p4.tx_end_ns);
  ASSERT_EQ(w2.status, DequeueStatus::kNotReady);
  EXPECT_EQ(w2.next_eligible_ns, 16000u);

  // A 2500 B bucket allows 2 packets, not 3 (the burst is not rounded up to a packet).
  q.shaper = ShaperConfig{1 * kGbps, 2500};
  EgressPort port2(port_at(10 * kGbps), {q});
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(port2.enqueue(pkt(i, 1000, 0), 0).admitted);
  auto a = port2.dequeue(0);
  auto b = port2.dequeue(a.tx_end_ns);
  auto c = port2.dequeue(b.tx_end_ns);
  EXPECT_EQ(a.status, DequeueStatus::kPacket);
  EXPECT_EQ(b.status, DequeueStatus::kPacket);
  ASSERT_EQ(c.status, DequeueStatus::kNotReady);
  // 2500 - 1000 + 100 - 1000 + 100 = 700 at 1600 ns; 300 B more = 2400 ns.
  EXPECT_EQ(c.next_eligible_ns, 4000u);
}

TEST(Shaper, IdleBucketCapsAtBurst) {
  QueueConfig q = dwrr_queue(1);
  q.shaper = ShaperConfig{1 * kGbps, 2000};
  EgressPort port(port_at(10 * kGbps), {q});
  // Idle for 1 s: the bucket must hold 2000 B, not 125 MB.
  uint64_t t = 1'000'000'000ULL;
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 1000, 0), t).admitted);
  auto a = port.dequeue(t);
  auto b = port.dequeue(a.tx_end_ns);
  auto c = port.dequeue(b.tx_end_ns);
  EXPECT_EQ(a.status, DequeueStatus::kPacket);
  EXPECT_EQ(b.status, DequeueStatus::kPacket);
  EXPECT_EQ(c.status, DequeueStatus::kNotReady);
}

TEST(Shaper, ShapedOutQueueIsSkippedWorkConserving) {
  // Shaped queue at the top level, shaped out; the lower level is served in the meantime.
  QueueConfig hi = dwrr_queue(1, 5);
  hi.shaper = ShaperConfig{1 * kGbps, 1000};
  EgressPort port(port_at(10 * kGbps), {hi, dwrr_queue(1, 0)});
  ASSERT_TRUE(port.enqueue(pkt(1, 1000, 0), 0).admitted);
  ASSERT_TRUE(port.enqueue(pkt(2, 1000, 0), 0).admitted);
  ASSERT_TRUE(port.enqueue(pkt(3, 1000, 1), 0).admitted);
  auto a = port.dequeue(0);
  EXPECT_EQ(a.packet.id, 1u);
  auto b = port.dequeue(a.tx_end_ns);
  ASSERT_EQ(b.status, DequeueStatus::kPacket);
  EXPECT_EQ(b.packet.id, 3u);
  auto c = port.dequeue(b.tx_end_ns);  // only the shaped-out packet is left
  ASSERT_EQ(c.status, DequeueStatus::kNotReady);
  EXPECT_EQ(c.next_eligible_ns, 8000u);
  EXPECT_EQ(port.dequeue(8000).packet.id, 2u);
}

// ---------------------------------------------------------------------------
// Admission

TEST(Admission, RedThresholdExactBothSides) {
  // Rule: a red packet is admitted iff queue depth before it < red_threshold.
  QueueConfig q = dwrr_queue(1);
  q.red_threshold = 100'000;
  q.buffer_bytes = 200'000;
  EgressPort port(port_at(10 * kGbps), {q});
  uint64_t id = 1;
  for (int i = 0; i < 99; ++i) ASSERT_TRUE(port.enqueue(pkt(id++, 1000, 0), 0).admitted);
  ASSERT_TRUE(port.enqueue(pkt(id++, 999, 0), 0).admitted);  // depth 99'999 = threshold - 1
  auto r1 = port.enqueue(pkt(id++, 1500, 0, Color::kRed), 0);
  EXPECT_TRUE(r1.admitted);
  EXPECT_EQ(r1.depth_bytes_before, 99'999u);
  EXPECT_EQ(r1.drop_reason, DropReason::kNone);
  // Depth is now 101'499 >= threshold.
  auto r2 = port.enqueue(pkt(id++, 64, 0, Color::kRed), 0);
  EXPECT_FALSE(r2.admitted);
  EXPECT_EQ(r2.drop_reason, DropReason::kRed);
  EXPECT_EQ(port.queue_stats(0).dropped(DropReason::kRed), 1u);

  // Exactly at the threshold: dropped.
  EgressPort port2(port_at(10 * kGbps), {q});
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(port2.enqueue(pkt(id++, 1000, 0), 0).admitted);
  auto r3 = port2.enqueue(pkt(id++, 64, 0, Color::kRed), 0);
  EXPECT_EQ(r3.depth_bytes_before, 100'000u);
  EXPECT_EQ(r3.drop_reason, DropReason::kRed);
  // After one byte-bearing packet leaves, depth 99'000 < threshold: admitted again.
  ASSERT_EQ(port2.dequeue(0).status, DequeueStatus::kPacket);
  EXPECT_TRUE(port2.enqueue(pkt(id++, 64, 0, Color::kRed), 0).admitted);
}

TEST(Admission, YellowThresholdExactBothSides) {
  QueueConfig q = dwrr_queue(1);
  q.yellow_threshold = 5000;
  q.red_threshold = 3000;
  EgressPort port(port_at(10 * kGbps), {q});
  ASSERT_TRUE(port.enqueue(pkt(1, 4999, 0), 0).admitted);
  auto y1 = port.enqueue(pkt(2, 100, 0, Color::kYellow), 0);  // depth 4999 < 5000
  EXPECT_TRUE(y1.admitted);
  auto y2 = port.enqueue(pkt(3, 100, 0, Color::kYellow), 0);  // depth 5099 >= 5000
  EXPECT_EQ(y2.drop_reason, DropReason::kYellow);
  auto r = port.enqueue(pkt(4, 100, 0, Color::kRed), 0);
  EXPECT_EQ(r.drop_reason, DropReason::kRed);
  EXPECT_EQ(port.queue_stats(0).dropped(DropReason::kYellow), 1u);
  EXPECT_EQ(port.queue_stats(0).dropped(DropReason::kRed), 1u);
}

TEST(Admission, GreenAdmittedAboveRedThresholdUntilBufferLimit) {
  QueueConfig q = dwrr_queue(1);
  q.red_threshold = 100'000;
  q.buffer_bytes = 150'000;
  EgressPort port(port_at(10 * kGbps), {q});
  uint64_t id = 1;
  for (int i = 0; i < 149; ++i) ASSERT_TRUE(port.enqueue(pkt(id++, 1000, 0), 0).admitted) << i;
  EXPECT_EQ(port.enqueue(pkt(id++, 64, 0, Color::kRed), 0).drop_reason, DropReason::kRed);
  // depth 149'000 + 1000 = 150'000 == limit: admitted.
  auto g1 = port.enqueue(pkt(id++, 1000, 0), 0);
  EXPECT_TRUE(g1.admitted);
  // depth 150'000 + 1 > limit: dropped.
  auto g2 = port.enqueue(pkt(id++, 1, 0), 0);
  EXPECT_FALSE(g2.admitted);
  EXPECT_EQ(g2.drop_reason, DropReason::kQueueFull);
  EXPECT_EQ(port.queue_stats(0).depth_bytes, 150'000u);
  EXPECT_EQ(port.queue_stats(0).max_depth_bytes, 150'000u);
  EXPECT_EQ(port.queue_stats(0).dropped(DropReason::kQueueFull), 1u);
  // A yellow packet without a yellow threshold behaves as green.
  EXPECT_EQ(port.enqueue(pkt(id++, 1, 0, Color::kYellow), 0).drop_reason, DropReason::kQueueFull);
}

TEST(Admission, BufferLimitOverflowBoundary) {
  QueueConfig q = dwrr_queue(1);
  q.buffer_bytes = 3000;
  EgressPort port(port_at(10 * kGbps), {q});
  EXPECT_TRUE(port.enqueue(pkt(1, 2000, 0), 0).admitted);
  EXPECT_EQ(port.enqueue(pkt(2, 1001, 0), 0).drop_reason, DropReason::kQueueFull);
  EXPECT_TRUE(port.enqueue(pkt(3, 1000, 0), 0).admitted);
  EXPECT_EQ(port.queue_stats(0).depth_bytes, 3000u);
  EXPECT_EQ(port.queue_stats(0).dropped_bytes[static_cast<size_t>(DropReason::kQueueFull)], 1001u);
}

TEST(Admission, PerColorDepthMode) {
  QueueConfig q = dwrr_queue(1);
  q.red_threshold = 2000;
  q.per_color_depth = true;
  EgressPort port(port_at(10 * kGbps), {q});
  // 10 kB of green does not count against red.
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 1000, 0), 0).admitted);
  EXPECT_TRUE(port.enqueue(pkt(20, 1999, 0, Color::kRed), 0).admitted);  // red bytes 0
  EXPECT_TRUE(port.enqueue(pkt(21, 100, 0, Color::kRed), 0).admitted);   // red bytes 1999 < 2000
  EXPECT_EQ(port.enqueue(pkt(22, 100, 0, Color::kRed), 0).drop_reason, DropReason::kRed);  // 2099
  EXPECT_EQ(port.queue_stats(0).depth_bytes_by_color[static_cast<size_t>(Color::kRed)], 2099u);
  // Same traffic in total-depth mode: the first red packet is already dropped.
  q.per_color_depth = false;
  EgressPort port2(port_at(10 * kGbps), {q});
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(port2.enqueue(pkt(i, 1000, 0), 0).admitted);
  EXPECT_EQ(port2.enqueue(pkt(20, 1999, 0, Color::kRed), 0).drop_reason, DropReason::kRed);
}

TEST(Admission, SharedPortBuffer) {
  PortConfig pc = port_at(10 * kGbps);
  pc.shared_buffer_bytes = 5000;
  EgressPort port(pc, {dwrr_queue(1), dwrr_queue(1)});
  EXPECT_TRUE(port.enqueue(pkt(1, 3000, 0), 0).admitted);
  EXPECT_TRUE(port.enqueue(pkt(2, 2000, 1), 0).admitted);  // 5000 == limit
  auto r = port.enqueue(pkt(3, 1, 1), 0);
  EXPECT_EQ(r.drop_reason, DropReason::kPortFull);
  EXPECT_EQ(port.queue_stats(1).dropped(DropReason::kPortFull), 1u);
  EXPECT_EQ(port.port_stats().buffered_bytes, 5000u);
  ASSERT_EQ(port.dequeue(0).status, DequeueStatus::kPacket);  // frees 3000 B
  EXPECT_TRUE(port.enqueue(pkt(4, 3000, 1), 0).admitted);
  port.set_shared_buffer(kUnlimited);
  EXPECT_TRUE(port.enqueue(pkt(5, 100'000, 1), 0).admitted);
}

TEST(Admission, InvalidPacketsDropped) {
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1), dwrr_queue(1)});
  EXPECT_EQ(port.enqueue(pkt(1, 100, 2), 0).drop_reason, DropReason::kInvalid);
  EXPECT_EQ(port.enqueue(pkt(2, 0, 0), 0).drop_reason, DropReason::kInvalid);
  EXPECT_EQ(port.port_stats().invalid_drops, 1u);
  EXPECT_EQ(port.queue_stats(0).dropped(DropReason::kInvalid), 1u);
  EXPECT_EQ(port.dequeue(0).status, DequeueStatus::kEmpty);
}

TEST(Ecn, MarkReportedOnlyAboveKForEct) {
  QueueConfig q = dwrr_queue(1);
  q.ecn_threshold = 60'000;
  EgressPort port(port_at(10 * kGbps), {q});
  uint64_t id = 1;
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(port.enqueue(pkt(id++, 1000, 0, Color::kGreen, true), 0).admitted);
  // depth 60'000 == K: not marked (mark iff depth > K).
  auto a = port.enqueue(pkt(id++, 1, 0, Color::kGreen, true), 0);
  EXPECT_TRUE(a.admitted);
  EXPECT_FALSE(a.ecn_mark);
  EXPECT_EQ(a.depth_bytes_before, 60'000u);
  EXPECT_EQ(a.depth_pkts_before, 60u);
  // depth 60'001 > K: marked if ECT, not otherwise.
  auto b = port.enqueue(pkt(id++, 100, 0, Color::kGreen, true), 0);
  EXPECT_TRUE(b.ecn_mark);
  auto c = port.enqueue(pkt(id++, 100, 0, Color::kGreen, false), 0);
  EXPECT_TRUE(c.admitted);
  EXPECT_FALSE(c.ecn_mark);
  EXPECT_EQ(port.queue_stats(0).ecn_marked_pkts, 1u);
}

// ---------------------------------------------------------------------------
// Link timing

TEST(Link, BackToBackSpacingIsBytesTimes8OverRate) {
  // 1500 B at 10 Gbit/s = 1200 ns.
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1)});
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 1500, 0), 1000).admitted);
  uint64_t t = 1000;
  for (uint64_t i = 0; i < 5; ++i) {
    auto r = port.dequeue(t);
    ASSERT_EQ(r.status, DequeueStatus::kPacket);
    EXPECT_EQ(r.tx_start_ns, 1000 + 1200 * i);
    EXPECT_EQ(r.tx_end_ns, 1000 + 1200 * (i + 1));
    EXPECT_EQ(r.depth_pkts_before, 5 - i);
    EXPECT_EQ(r.depth_bytes_after, 1500 * (4 - i));
    if (i < 4) {
      auto busy = port.dequeue(r.tx_end_ns - 1);
      ASSERT_EQ(busy.status, DequeueStatus::kNotReady);
      EXPECT_EQ(busy.next_eligible_ns, r.tx_end_ns);
    }
    t = r.tx_end_ns;
  }
  EXPECT_EQ(port.dequeue(t).status, DequeueStatus::kEmpty);
}

TEST(Link, FractionalNanosecondsDoNotDrift) {
  // 1538 B at 100 Gbit/s = 123.04 ns: the n-th packet ends at ceil(123.04 n).
  EgressPort port(port_at(100 * kGbps), {dwrr_queue(1)});
  const int n = 1000;
  for (int i = 0; i < n; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 1538, 0), 0).admitted);
  uint64_t t = 0;
  for (int i = 1; i <= n; ++i) {
    auto r = port.dequeue(t);
    ASSERT_EQ(r.status, DequeueStatus::kPacket);
    const uint64_t exact_num = 1538ULL * 8 * i;  // end time in ns * 100
    EXPECT_EQ(r.tx_end_ns, (exact_num + 99) / 100) << i;
    t = r.tx_end_ns;
  }
  EXPECT_EQ(t, 123'040u);
}

TEST(Link, WireOverheadCountsOnTheWireNotInTheBuffer) {
  PortConfig pc = port_at(10 * kGbps);
  pc.wire_overhead_bytes = 20;
  QueueConfig q = dwrr_queue(1);
  q.buffer_bytes = 1518;
  EgressPort port(pc, {q});
  ASSERT_TRUE(port.enqueue(pkt(1, 1518, 0), 0).admitted);  // buffer charged 1518
  auto r = port.dequeue(0);
  EXPECT_EQ(r.tx_end_ns, 1231u);  // serialized as 1538 B: 1230.4 ns, rounded up
  EXPECT_EQ(port.port_stats().tx_wire_bytes, 1538u);
  EXPECT_EQ(port.port_stats().tx_bytes, 1518u);
}

TEST(Link, IdleLinkStartsAtCallTimeAndTimeNeverGoesBack) {
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1)});
  ASSERT_TRUE(port.enqueue(pkt(1, 1000, 0), 5000).admitted);
  auto r = port.dequeue(7000);
  EXPECT_EQ(r.tx_start_ns, 7000u);
  EXPECT_EQ(r.tx_end_ns, 7800u);
  EXPECT_EQ(r.enqueue_ns, 5000u);
  // A stale timestamp is treated as the latest time seen.
  ASSERT_TRUE(port.enqueue(pkt(2, 1000, 0), 100).admitted);
  auto s = port.dequeue(200);
  ASSERT_EQ(s.status, DequeueStatus::kNotReady);
  EXPECT_EQ(s.next_eligible_ns, 7800u);
  EXPECT_EQ(port.dequeue(7800).enqueue_ns, 7000u);
}

// ---------------------------------------------------------------------------
// FlexPass profile

TEST(FlexPass, ProfileValues) {
  FlexPassParams p;  // 10 Gbit/s, w_q = 0.5
  EXPECT_EQ(flexpass_credit_rate_bps(p), 258'939'581u);  // round(0.5e10 * 84 / 1622 = 258939580.76)
  auto qs = flexpass_queue_configs(p);
  ASSERT_EQ(qs.size(), 3u);
  EXPECT_GT(qs[kCreditQueue].priority, qs[kFlexPassQueue].priority);
  EXPECT_EQ(qs[kFlexPassQueue].priority, qs[kLegacyQueue].priority);
  ASSERT_TRUE(qs[kCreditQueue].shaper.has_value());
  EXPECT_EQ(qs[kCreditQueue].shaper->burst_bytes, 168u);
  EXPECT_EQ(qs[kCreditQueue].buffer_bytes, 672u);
  EXPECT_EQ(qs[kFlexPassQueue].ecn_threshold, 60'000u);
  EXPECT_EQ(qs[kFlexPassQueue].red_threshold, 100'000u);
  EXPECT_DOUBLE_EQ(qs[kFlexPassQueue].weight, 0.5);
  EXPECT_DOUBLE_EQ(qs[kLegacyQueue].weight, 0.5);
  EXPECT_EQ(qs[kLegacyQueue].red_threshold, kUnlimited);
  // BMv2-style lengths without preamble/IFG/FCS: the buffer still holds 8 credits.
  p.wire_overhead_bytes = 24;
  EXPECT_EQ(flexpass_queue_configs(p)[kCreditQueue].buffer_bytes, 8u * 60);
}

TEST(FlexPass, CreditsGetShapedRateDataSplitsRestByWq) {
  for (double w_q : {0.5, 0.3, 0.8}) {
    FlexPassParams p;
    p.w_q = w_q;
    EgressPort port(flexpass_port_config(p), flexpass_queue_configs(p));
    Harness h(port, 11);
    h.sources = {{kCreditQueue, uniform(84, 92), 4 * 84},
                 {kFlexPassQueue, bimodal(84, 1538, 20), 50'000},
                 {kLegacyQueue, fixed(1538), 50'000}};
    h.run_until(20 * kMs);
    const double credit = gbps(h.sent[0], h.now), fp = gbps(h.sent[1], h.now), legacy = gbps(h.sent[2], h.now);
    const double r = static_cast<double>(flexpass_credit_rate_bps(p)) / kGbps;
    EXPECT_NEAR(credit, r, 0.01 * r) << "w_q " << w_q;
    EXPECT_NEAR(fp, w_q * (10.0 - r), 0.02 * w_q * (10.0 - r)) << "w_q " << w_q;
    EXPECT_NEAR(legacy, (1 - w_q) * (10.0 - r), 0.02 * (1 - w_q) * (10.0 - r)) << "w_q " << w_q;
    EXPECT_NEAR(credit + fp + legacy, 10.0, 0.01);
  }
}

TEST(FlexPass, DataTakesWholeLinkWithoutCredits) {
  FlexPassParams p;
  p.w_q = 0.3;
  EgressPort port(flexpass_port_config(p), flexpass_queue_configs(p));
  Harness h(port, 19);
  h.sources = {{kFlexPassQueue, uniform(64, 1538), 50'000}};
  h.run_until(5 * kMs);  // FlexPass alone: the whole link despite w_q = 0.3
  EXPECT_NEAR(gbps(h.sent[kFlexPassQueue], h.now), 10.0, 0.01);
  h.sources.push_back({kLegacyQueue, fixed(1538), 50'000});
  h.reset_counters();
  const uint64_t t0 = h.now;
  h.run_until(t0 + 10 * kMs);  // both, no credits: 3:7 of the whole link
  EXPECT_NEAR(gbps(h.sent[kFlexPassQueue], h.now - t0), 3.0, 0.06);
  EXPECT_NEAR(gbps(h.sent[kLegacyQueue], h.now - t0), 7.0, 0.14);
  EXPECT_EQ(h.sent[kCreditQueue], 0u);
}

TEST(FlexPass, CreditQueueHoldsEightCredits) {
  FlexPassParams p;
  EgressPort port(flexpass_port_config(p), flexpass_queue_configs(p));
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 84, kCreditQueue), 0).admitted);
  EXPECT_EQ(port.enqueue(pkt(8, 84, kCreditQueue), 0).drop_reason, DropReason::kQueueFull);
  // Burst of 2 credits: two go back to back, the third waits for tokens.
  auto a = port.dequeue(0);
  auto b = port.dequeue(a.tx_end_ns);
  auto c = port.dequeue(b.tx_end_ns);
  EXPECT_EQ(a.status, DequeueStatus::kPacket);
  EXPECT_EQ(b.status, DequeueStatus::kPacket);
  EXPECT_EQ(c.status, DequeueStatus::kNotReady);
  // Selective dropping on Q1: reactive (red) data dropped at 100 kB, green kept.
  for (uint64_t i = 0; i < 66; ++i) {
    ASSERT_TRUE(port.enqueue(pkt(100 + i, 1538, kFlexPassQueue, Color::kGreen, true), 0).admitted);
  }
  EXPECT_EQ(port.enqueue(pkt(200, 1538, kFlexPassQueue, Color::kRed, true), 0).drop_reason, DropReason::kRed);
  auto g = port.enqueue(pkt(201, 1538, kFlexPassQueue, Color::kGreen, true), 0);
  EXPECT_TRUE(g.admitted);
  EXPECT_TRUE(g.ecn_mark);
}

// ---------------------------------------------------------------------------
// Runtime reconfiguration

TEST(Reconfigure, WeightsChangeShares) {
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1), dwrr_queue(1)});
  Harness h(port, 13);
  h.sources = {{0, uniform(64, 1538), 20'000}, {1, uniform(64, 1538), 20'000}};
  h.run_until(5 * kMs);
  double total = static_cast<double>(h.sent[0] + h.sent[1]);
  EXPECT_NEAR(h.sent[0] / total, 0.5, 0.01);
  port.configure_queue(1, dwrr_queue(3), h.now);
  EXPECT_EQ(port.dwrr_quantum(0), 513u);  // round(1538 / 3)
  EXPECT_EQ(port.dwrr_quantum(1), 1538u);
  h.reset_counters();
  const uint64_t t0 = h.now;
  h.run_until(t0 + 10 * kMs);
  total = static_cast<double>(h.sent[0] + h.sent[1]);
  EXPECT_NEAR(h.sent[0] / total, 0.25, 0.005);
  EXPECT_NEAR(h.sent[1] / total, 0.75, 0.015);
}

TEST(Reconfigure, LinkRateChangesSpacing) {
  EgressPort port(port_at(10 * kGbps), {dwrr_queue(1)});
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 1000, 0), 0).admitted);
  auto a = port.dequeue(0);
  EXPECT_EQ(a.tx_end_ns, 800u);
  port.set_link_rate(1 * kGbps);  // the packet on the wire keeps its end time
  EXPECT_EQ(port.dequeue(799).next_eligible_ns, 800u);
  auto b = port.dequeue(800);
  EXPECT_EQ(b.tx_end_ns, 800u + 8000);
  EXPECT_EQ(port.port_config().link_rate_bps, 1 * kGbps);
}

TEST(Reconfigure, ShaperRateAndPriorityAtRuntime) {
  QueueConfig hi = dwrr_queue(1, 1);
  hi.shaper = ShaperConfig{1 * kGbps, 3076};
  EgressPort port(port_at(10 * kGbps), {hi, dwrr_queue(1, 0)});
  Harness h(port, 17);
  h.sources = {{0, fixed(1538), 10'000}, {1, fixed(1538), 10'000}};
  h.run_until(5 * kMs);
  EXPECT_NEAR(gbps(h.sent[0], h.now), 1.0, 0.01);
  hi.shaper->rate_bps = 3 * kGbps;
  port.configure_queue(0, hi, h.now);
  h.reset_counters();
  uint64_t t0 = h.now;
  h.run_until(t0 + 10 * kMs);
  EXPECT_NEAR(gbps(h.sent[0], h.now - t0), 3.0, 0.03);
  EXPECT_NEAR(gbps(h.sent[1], h.now - t0), 7.0, 0.07);
  // Remove the shaper and put queue 1 above queue 0: queue 0 now starves.
  port.configure_queue(0, dwrr_queue(1, 0), h.now);
  port.configure_queue(1, dwrr_queue(1, 2), h.now);
  h.reset_counters();
  t0 = h.now;
  h.run_until(t0 + 2 * kMs);
  EXPECT_EQ(h.sent[0], 0u);
  EXPECT_NEAR(gbps(h.sent[1], h.now - t0), 10.0, 0.02);
}

TEST(Reconfigure, ThresholdsAndBufferApplyToNewArrivalsOnly) {
  QueueConfig q = dwrr_queue(1);
  q.red_threshold = 10'000;
  EgressPort port(port_at(10 * kGbps), {q});
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(port.enqueue(pkt(i, 1000, 0), 0).admitted);
  EXPECT_EQ(port.enqueue(pkt(10, 100, 0, Color::kRed), 0).drop_reason, DropReason::kRed);
  q.red_threshold = 10'001;
  port.configure_queue(0, q);
  EXPECT_TRUE(port.enqueue(pkt(11, 100, 0, Color::kRed), 0).admitted);
  // Shrink the buffer below the current depth: nothing queued is lost.
  q.buffer_bytes = 5000;
  port.configure_queue(0, q);
  EXPECT_EQ(port.queue_stats(0).depth_bytes, 10'100u);
  EXPECT_EQ(port.enqueue(pkt(12, 1, 0), 0).drop_reason, DropReason::kQueueFull);
  int n = 0;
  uint64_t t = 0;
  for (;;) {
    auto r = port.dequeue(t);
    if (r.status != DequeueStatus::kPacket) break;
    t = r.tx_end_ns;
    ++n;
  }
  EXPECT_EQ(n, 11);
  EXPECT_EQ(port.queue_stats(0).dequeued_bytes, 10'100u);
  EXPECT_EQ(port.queue_stats(0).max_depth_bytes, 10'100u);
  port.clear_watermarks();
  EXPECT_EQ(port.queue_stats(0).max_depth_bytes, 0u);
}

// ---------------------------------------------------------------------------
// Telemetry

TEST(Telemetry, CountersAndWatermarks) {
  QueueConfig q = dwrr_queue(1);
  q.buffer_bytes = 3000;
  q.red_threshold = 1000;
  EgressPort port(port_at(10 * kGbps), {q, dwrr_queue(1)});
  port.enqueue(pkt(1, 1000, 0), 0);
  port.enqueue(pkt(2, 1000, 0), 0);
  port.enqueue(pkt(3, 1000, 0, Color::kRed), 0);  // red drop
  port.enqueue(pkt(4, 1000, 0), 0);
  port.enqueue(pkt(5, 1000, 0), 0);               // queue full
  port.enqueue(pkt(6, 500, 1), 0);
  const auto &s = port.queue_stats(0);
  EXPECT_EQ(s.enqueued_pkts, 3u);
  EXPECT_EQ(s.enqueued_bytes, 3000u);
  EXPECT_EQ(s.dropped(DropReason::kRed), 1u);
  EXPECT_EQ(s.dropped(DropReason::kQueueFull), 1u);
  EXPECT_EQ(s.total_dropped_pkts(), 2u);
  EXPECT_EQ(s.max_depth_pkts, 3u);
  auto a = port.dequeue(0);
  EXPECT_EQ(a.queue, 0u);
  EXPECT_EQ(a.depth_bytes_before, 3000u);
  EXPECT_EQ(a.depth_pkts_after, 2u);
  EXPECT_EQ(s.dequeued_pkts, 1u);
  EXPECT_EQ(s.dequeued_bytes, 1000u);
  EXPECT_EQ(s.depth_bytes, 2000u);
  EXPECT_EQ(s.max_depth_bytes, 3000u);
  EXPECT_EQ(port.port_stats().buffered_bytes, 2500u);
  EXPECT_EQ(port.port_stats().max_buffered_bytes, 3500u);
  EXPECT_EQ(port.port_stats().tx_pkts, 1u);
  EXPECT_STREQ(to_string(DropReason::kPortFull), "port_full");
  EXPECT_STREQ(to_string(Color::kRed), "red");
}

// ---------------------------------------------------------------------------
// Invalid configuration

TEST(Config, InvalidConfigurationRejected) {
  const auto ok_port = port_at(10 * kGbps);
  EXPECT_THROW(EgressPort(port_at(0), {dwrr_queue(1)}), ConfigError);
  EXPECT_THROW(EgressPort(port_at(kMaxRateBps + 1), {dwrr_queue(1)}), ConfigError);
  EXPECT_THROW(EgressPort(ok_port, {}), ConfigError);
  EXPECT_THROW(EgressPort(ok_port, std::vector<QueueConfig>(9, dwrr_queue(1))), ConfigError);
  EXPECT_NO_THROW(EgressPort(ok_port, std::vector<QueueConfig>(8, dwrr_queue(1))));
  for (double w : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_THROW(EgressPort(ok_port, {dwrr_queue(w)}), ConfigError) << w;
    EXPECT_FALSE(validate(dwrr_queue(w)).empty()) << w;
  }
  QueueConfig zero_rate = dwrr_queue(1);
  zero_rate.shaper = ShaperConfig{0, 1000};
  EXPECT_THROW(EgressPort(ok_port, {zero_rate}), ConfigError);
  QueueConfig zero_burst = dwrr_queue(1);
  zero_burst.shaper = ShaperConfig{kGbps, 0};
  EXPECT_THROW(EgressPort(ok_port, {zero_burst}), ConfigError);
  PortConfig zero_quantum = ok_port;
  zero_quantum.dwrr_quantum_bytes = 0;
  EXPECT_THROW(EgressPort(zero_quantum, {dwrr_queue(1)}), ConfigError);
  EXPECT_TRUE(validate(ok_port).empty());
  EXPECT_TRUE(validate(dwrr_queue(1)).empty());
  EXPECT_FALSE(validate(port_at(0)).empty());

  // Runtime: rejected changes leave the configuration untouched.
  EgressPort port(ok_port, {dwrr_queue(1), dwrr_queue(2)});
  EXPECT_THROW(port.set_link_rate(0), ConfigError);
  EXPECT_EQ(port.port_config().link_rate_bps, 10 * kGbps);
  EXPECT_THROW(port.configure_queue(0, dwrr_queue(-1)), ConfigError);
  EXPECT_DOUBLE_EQ(port.queue_config(0).weight, 1.0);
  EXPECT_THROW(port.configure_queue(2, dwrr_queue(1)), ConfigError);
  EXPECT_THROW(port.configure_queue(0, zero_rate), ConfigError);
  EXPECT_FALSE(port.queue_config(0).shaper.has_value());
  EXPECT_THROW(port.set_dwrr_quantum(0), ConfigError);
  EXPECT_THROW(port.queue_stats(2), std::out_of_range);

  FlexPassParams p;
  for (double w_q : {0.0, 1.0, -0.5, 1.5}) {
    p.w_q = w_q;
    EXPECT_THROW(flexpass_queue_configs(p), ConfigError) << w_q;
  }
  p.w_q = 0.5;
  p.link_rate_bps = 0;
  EXPECT_THROW(flexpass_port_config(p), ConfigError);
}
