// Unit tests of the TM's pFabric queue discipline (Discipline::kPfabric;
// Alizadeh et al., "pFabric: Minimal Near-Optimal Datacenter Transport",
// SIGCOMM'13 §4.1): smallest rank first, then that flow's earliest packet;
// on a full buffer the largest rank is dropped (the arriving packet if it is
// the lowest).  Built into the test_tm executable (CMakeLists.txt).
#include "flexpass/tm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

using namespace flexpass::tm;

namespace {

constexpr uint64_t kGbps = 1'000'000'000ULL;

PortConfig port_10g() {
  PortConfig p;
  p.link_rate_bps = 10 * kGbps;
  return p;
}

QueueConfig pfabric_queue(uint64_t buffer_bytes = kUnlimited) {
  QueueConfig q;
  q.discipline = Discipline::kPfabric;
  q.buffer_bytes = buffer_bytes;
  return q;
}

// A packet of `bytes` in queue 0 with pFabric rank `rank` of flow `flow`.
PacketMeta ranked(uint64_t id, uint32_t rank, uint64_t flow, uint32_t bytes = 1000) {
  PacketMeta m;
  m.id = id;
  m.bytes = bytes;
  m.queue = 0;
  m.rank = rank;
  m.flow = flow;
  return m;
}

// Dequeues everything (the link is polled whenever it is free); returns the ids.
std::vector<uint64_t> drain(EgressPort &port, uint64_t &now) {
  std::vector<uint64_t> ids;
  for (;;) {
    DequeueResult r = port.dequeue(now);
    if (r.status == DequeueStatus::kEmpty) return ids;
    if (r.status == DequeueStatus::kNotReady) {
      now = r.next_eligible_ns;
      continue;
    }
    ids.push_back(r.packet.id);
    now = r.tx_end_ns;
  }
}

}  // namespace

TEST(Pfabric, SmallestRankFirstEarliestAmongEquals) {
  EgressPort port(port_10g(), {pfabric_queue()});
  // Distinct flows: the flow rule plays no part.
  const uint32_t ranks[] = {500, 20, 7000, 20, 1, 500};
  for (uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(port.enqueue(ranked(i + 1, ranks[i], 100 + i), 0).admitted);
  uint64_t now = 0;
  EXPECT_EQ(drain(port, now), (std::vector<uint64_t>{5, 2, 4, 1, 6, 3}));
}

TEST(Pfabric, FifoQueueIgnoresRanks) {
  EgressPort port(port_10g(), {QueueConfig{}});
  const uint32_t ranks[] = {500, 20, 7000, 1};
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(port.enqueue(ranked(i + 1, ranks[i], 100 + i), 0).admitted);
  uint64_t now = 0;
  EXPECT_EQ(drain(port, now), (std::vector<uint64_t>{1, 2, 3, 4}));
}

// §4.1: "we first find the highest priority packet, then choose the earliest
// packet from the same flow": a flow's packets leave in arrival order even when
// a later one carries a smaller rank (its remaining size shrank meanwhile).
TEST(Pfabric, HighestPriorityFlowSendsItsEarliestPacket) {
  EgressPort port(port_10g(), {pfabric_queue()});
  ASSERT_TRUE(port.enqueue(ranked(1, 9000, /*flow=*/7), 0).admitted);   // flow A, older
  ASSERT_TRUE(port.enqueue(ranked(2, 5000, /*flow=*/8), 0).admitted);   // flow B
  ASSERT_TRUE(port.enqueue(ranked(3, 3000, /*flow=*/7), 0).admitted);   // flow A, newer, highest
  ASSERT_TRUE(port.enqueue(ranked(4, 2000, /*flow=*/7), 0).admitted);   // flow A, newest, highest now
  uint64_t now = 0;
  // A's highest-priority packet is 4, but A's earliest (1) goes first, then 3,
  // then 4; B last.  A rank-only order would be 4, 3, 2, 1 (A out of order).
  EXPECT_EQ(drain(port, now), (std::vector<uint64_t>{1, 3, 4, 2}));
}

TEST(Pfabric, FullBufferDropsTheLowestPriorityQueuedPacket) {
  EgressPort port(port_10g(), {pfabric_queue(3000)});
  ASSERT_TRUE(port.enqueue(ranked(1, 100, 1), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(2, 900, 2), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(3, 400, 3), 0).admitted);  // 3000 B: full
  EnqueueResult r = port.enqueue(ranked(4, 50, 4), 0);
  ASSERT_TRUE(r.admitted);
  ASSERT_EQ(r.evicted.size(), 1u);
  EXPECT_EQ(r.evicted[0].id, 2u);  // rank 900, the lowest
  const QueueStats &s = port.queue_stats(0);
  EXPECT_EQ(s.dropped(DropReason::kPushedOut), 1u);
  EXPECT_EQ(s.dropped_bytes[static_cast<std::size_t>(DropReason::kPushedOut)], 1000u);
  EXPECT_EQ(s.depth_bytes, 3000u);
  EXPECT_EQ(s.depth_pkts, 3u);
  EXPECT_EQ(port.port_stats().buffered_bytes, 3000u);
  uint64_t now = 0;
  EXPECT_EQ(drain(port, now), (std::vector<uint64_t>{4, 1, 3}));
}

TEST(Pfabric, ArrivingPacketDroppedWhenItIsTheLowest) {
  EgressPort port(port_10g(), {pfabric_queue(2000)});
  ASSERT_TRUE(port.enqueue(ranked(1, 100, 1), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(2, 300, 2), 0).admitted);
  EnqueueResult lower = port.enqueue(ranked(3, 301, 3), 0);
  EXPECT_FALSE(lower.admitted);
  EXPECT_EQ(lower.drop_reason, DropReason::kQueueFull);
  EXPECT_TRUE(lower.evicted.empty());
  // A tie is not lower: the queued packet stays and the arriving one is dropped.
  EnqueueResult tie = port.enqueue(ranked(4, 300, 4), 0);
  EXPECT_FALSE(tie.admitted);
  const QueueStats &s = port.queue_stats(0);
  EXPECT_EQ(s.dropped(DropReason::kQueueFull), 2u);
  EXPECT_EQ(s.dropped(DropReason::kPushedOut), 0u);
  EXPECT_EQ(s.enqueued_pkts, 2u);
  uint64_t now = 0;
  EXPECT_EQ(drain(port, now), (std::vector<uint64_t>{1, 2}));
}

TEST(Pfabric, EvictsSeveralLowestLatestFirstUntilItFits) {
  EgressPort port(port_10g(), {pfabric_queue(3000)});
  ASSERT_TRUE(port.enqueue(ranked(1, 800, 1), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(2, 10, 2), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(3, 800, 3), 0).admitted);  // ties with 1, arrived later
  // 1500 B with rank 500 needs 1500 B freed: 3 (latest of the two 800s), then 1.
  EnqueueResult r = port.enqueue(ranked(4, 500, 4, 1500), 0);
  ASSERT_TRUE(r.admitted);
  ASSERT_EQ(r.evicted.size(), 2u);
  EXPECT_EQ(r.evicted[0].id, 3u);
  EXPECT_EQ(r.evicted[1].id, 1u);
  EXPECT_EQ(port.queue_stats(0).depth_bytes, 2500u);
  // Not enough lower-priority bytes: rank 20 fits only by evicting 4 (rank
  // 500, 1500 B) and it needs 3000 B: the arriving packet is dropped, nothing evicted.
  EnqueueResult big = port.enqueue(ranked(5, 20, 5, 3000), 0);
  EXPECT_FALSE(big.admitted);
  EXPECT_TRUE(big.evicted.empty());
  EXPECT_EQ(port.queue_stats(0).depth_pkts, 2u);
}

TEST(Pfabric, SharedPortBufferEvictsInsideThePfabricQueue) {
  PortConfig pc = port_10g();
  pc.shared_buffer_bytes = 2000;
  EgressPort port(pc, {pfabric_queue()});
  ASSERT_TRUE(port.enqueue(ranked(1, 70, 1), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(2, 90, 2), 0).admitted);
  EnqueueResult r = port.enqueue(ranked(3, 80, 3), 0);
  ASSERT_TRUE(r.admitted);
  ASSERT_EQ(r.evicted.size(), 1u);
  EXPECT_EQ(r.evicted[0].id, 2u);
  EnqueueResult low = port.enqueue(ranked(4, 95, 4), 0);
  EXPECT_EQ(low.drop_reason, DropReason::kPortFull);
}

// Property: against a reference (sort by rank, arrival; flow-earliest rule;
// drop the largest rank), random arrivals and departures give the same order
// and the same victims; a flow's packets always leave in arrival order.
TEST(Pfabric, MatchesReferenceOnRandomTraffic) {
  struct Ref {
    uint64_t id;
    uint32_t rank;
    uint64_t flow;
  };
  std::mt19937_64 g(26);
  const uint64_t limit = 24 * 1000;  // pFabric §5: ~2 BDP, tens of packets
  EgressPort port(port_10g(), {pfabric_queue(limit)});
  std::vector<Ref> ref;
  std::vector<uint64_t> last_sent_of_flow(8, 0);
  uint64_t now = 0, next_id = 1, pushed_out = 0, dropped = 0;
  for (int step = 0; step < 20000; ++step) {
    if (g() % 3 != 0) {  // arrivals outpace departures: the buffer fills
      Ref a{next_id++, static_cast<uint32_t>(g() % 64), g() % 8};
      EnqueueResult r = port.enqueue(ranked(a.id, a.rank, a.flow), now);
      std::vector<uint64_t> want_evicted;
      bool want_admit = ref.size() < 24;
      if (!want_admit) {
        std::size_t v = 0;
        for (std::size_t i = 1; i < ref.size(); ++i)
          if (ref[i].rank >= ref[v].rank) v = i;
        if (ref[v].rank > a.rank) {
          want_evicted.push_back(ref[v].id);
          ref.erase(ref.begin() + static_cast<std::ptrdiff_t>(v));
          want_admit = true;
        }
      }
      ASSERT_EQ(r.admitted, want_admit) << "step " << step;
      std::vector<uint64_t> got_evicted;
      for (const auto &m : r.evicted) got_evicted.push_back(m.id);
      ASSERT_EQ(got_evicted, want_evicted) << "step " << step;
      pushed_out += want_evicted.size();
      if (want_admit) ref.push_back(a); else ++dropped;
    } else {
      DequeueResult d = port.dequeue(now);
      if (d.status == DequeueStatus::kNotReady) {
        now = d.next_eligible_ns;
        d = port.dequeue(now);
      }
      if (ref.empty()) {
        ASSERT_EQ(d.status, DequeueStatus::kEmpty);
        continue;
      }
      ASSERT_EQ(d.status, DequeueStatus::kPacket);
      std::size_t best = 0;
      for (std::size_t i = 1; i < ref.size(); ++i)
        if (ref[i].rank < ref[best].rank) best = i;
      std::size_t pick = best;
      for (std::size_t i = 0; i < best; ++i)
        if (ref[i].flow == ref[best].flow) { pick = i; break; }
      ASSERT_EQ(d.packet.id, ref[pick].id) << "step " << step;
      ASSERT_GT(d.packet.id, last_sent_of_flow[d.packet.flow]) << "flow out of order";
      last_sent_of_flow[d.packet.flow] = d.packet.id;
      ref.erase(ref.begin() + static_cast<std::ptrdiff_t>(pick));
      now = d.tx_end_ns;
    }
  }
  const QueueStats &s = port.queue_stats(0);
  EXPECT_GT(pushed_out, 100u);  // the run exercised both drop paths
  EXPECT_GT(dropped, 100u);
  EXPECT_EQ(s.dropped(DropReason::kPushedOut), pushed_out);
  EXPECT_EQ(s.dropped(DropReason::kQueueFull), dropped);
  EXPECT_EQ(s.depth_pkts, ref.size());
}

// pFabric next to other queues: strict priority between queues still holds and
// the pFabric order applies inside its queue only.
TEST(Pfabric, PerQueueModeBesideFifoQueue) {
  QueueConfig fifo;
  fifo.priority = 1;  // served first
  EgressPort port(port_10g(), {pfabric_queue(), fifo});
  ASSERT_TRUE(port.enqueue(ranked(1, 50, 1), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(2, 5, 2), 0).admitted);
  PacketMeta f = ranked(3, 1, 3);
  f.queue = 1;
  ASSERT_TRUE(port.enqueue(f, 0).admitted);
  f.id = 4;
  f.rank = 0;
  ASSERT_TRUE(port.enqueue(f, 0).admitted);
  uint64_t now = 0;
  EXPECT_EQ(drain(port, now), (std::vector<uint64_t>{3, 4, 2, 1}));
}

TEST(Pfabric, ReconfigureKeepsPacketsAndSwitchesOrder) {
  EgressPort port(port_10g(), {QueueConfig{}});
  ASSERT_TRUE(port.enqueue(ranked(1, 9, 1), 0).admitted);
  ASSERT_TRUE(port.enqueue(ranked(2, 1, 2), 0).admitted);
  port.configure_queue(0, pfabric_queue());
  EXPECT_EQ(port.queue_config(0).discipline, Discipline::kPfabric);
  uint64_t now = 0;
  EXPECT_EQ(drain(port, now), (std::vector<uint64_t>{2, 1}));
  EXPECT_STREQ(to_string(Discipline::kPfabric), "pfabric");
  EXPECT_STREQ(to_string(DropReason::kPushedOut), "pushed_out");
  QueueConfig bad = pfabric_queue();
  bad.discipline = static_cast<Discipline>(7);
  EXPECT_THROW(port.configure_queue(0, bad), ConfigError);
}
