// FlexPass switch traffic manager (TM) core.
//
// A deterministic model of one egress port of a Tomahawk/Tofino-class switch:
// up to 8 queues, strict priority between priority levels, DWRR between the
// queues of one level, an optional token-bucket shaper per queue (shaped-out
// queues are skipped, so the scheduler stays work-conserving), per-queue and
// shared port buffer limits, color-aware admission (red/yellow thresholds) and
// an ECN threshold report, all behind a link that serializes one packet at a
// time at its line rate.  A queue is FIFO, or pFabric's priority queue
// (Discipline::kPfabric: smallest rank first, largest rank dropped when full).
//
// Units, everywhere in this API:
//   * time      : nanoseconds (uint64_t), always passed in by the caller; the
//                 library never reads a clock, so results are deterministic;
//   * rates     : bits per second;
//   * sizes     : bytes (1 kB = 1000 B in comments and docs).
//
// Byte accounting.  PacketMeta::bytes is the size charged to the buffers
// (queue depth, buffer limits, color thresholds, ECN threshold).  The link,
// the shapers and DWRR charge the *wire* size, bytes + PortConfig::
// wire_overhead_bytes (e.g. 20 B of preamble + inter-frame gap, plus 4 B of
// FCS when the caller's lengths exclude it).  With the default overhead of 0,
// PacketMeta::bytes is the wire size.
//
// Not thread-safe: the caller serializes access to one EgressPort.
#ifndef FLEXPASS_TM_H_
#define FLEXPASS_TM_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace flexpass {
namespace tm {

// "No limit" for byte limits and thresholds.
inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();
inline constexpr std::size_t kMaxQueues = 8;
// Accepted range of link and shaper rates (keeps the fixed-point arithmetic
// exact and in range): 1 bit/s .. 10 Tbit/s.
inline constexpr uint64_t kMaxRateBps = 10'000'000'000'000ULL;
// Largest accepted shaper burst and packet size.
inline constexpr uint64_t kMaxBurstBytes = 1'000'000'000ULL;
inline constexpr uint32_t kMaxPacketBytes = 1u << 20;

enum class Color : uint8_t { kGreen = 0, kYellow = 1, kRed = 2 };

enum class DropReason : uint8_t {
  kNone = 0,
  kQueueFull,  // the queue's buffer limit would be exceeded
  kPortFull,   // the port's shared buffer limit would be exceeded
  kRed,        // red packet at or above the red threshold
  kYellow,     // yellow packet at or above the yellow threshold
  kInvalid,    // queue id >= num_queues(), or a zero-byte/oversized packet
  kPushedOut,  // pFabric: a queued packet evicted to admit a higher-priority one
};
inline constexpr std::size_t kNumDropReasons = 7;

// Order of service inside one queue.
enum class Discipline : uint8_t {
  kFifo = 0,
  // pFabric (Alizadeh et al., SIGCOMM'13 §4.1, "Switch design"):
  //   dequeue: find the packet of highest priority (smallest PacketMeta::rank,
  //     the earliest arrival among equal ranks), then send the EARLIEST queued
  //     packet of that packet's flow (PacketMeta::flow), so a flow's packets
  //     leave in order and a flow is never behind itself;
  //   admission: when the packet does not fit (queue or port buffer), the
  //     packets of lowest priority (largest rank, the latest arrival among
  //     equals) with a rank strictly larger than the arriving one are evicted
  //     (DropReason::kPushedOut, returned in EnqueueResult::evicted) until it
  //     fits; if they cannot make room, the arriving packet is the lowest and
  //     is dropped (kQueueFull / kPortFull).
  // Both are a linear scan of the queue: pFabric's queues are ~2 BDP, tens of
  // packets (§5: 36 kB per port at 10 Gbit/s), so O(n) per packet is bounded.
  kPfabric = 1,
};

const char *to_string(Color c);
const char *to_string(DropReason r);
const char *to_string(Discipline d);

// Thrown for any invalid configuration (the object is left unchanged).
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct ShaperConfig {
  uint64_t rate_bps = 0;     // > 0
  uint64_t burst_bytes = 0;  // bucket depth in wire bytes, > 0
};

struct QueueConfig {
  // Strict priority level: every queue of a higher level is served before any
  // queue of a lower level (unless it is empty or shaped out).
  uint8_t priority = 0;
  // DWRR weight among the queues of the same level; > 0 and finite.  The byte
  // quantum is PortConfig::dwrr_quantum_bytes * weight / (largest weight in
  // the level), rounded, at least 1 byte.
  double weight = 1.0;
  // Optional token-bucket shaper (maximum rate of this queue).
  std::optional<ShaperConfig> shaper;
  // Admission, all on queue depth in bytes *before* the arriving packet.
  uint64_t buffer_bytes = kUnlimited;      // any color: drop if depth+bytes > limit
  uint64_t red_threshold = kUnlimited;     // red: drop if depth >= threshold
  uint64_t yellow_threshold = kUnlimited;  // yellow: drop if depth >= threshold
  // If true, the red (yellow) threshold is compared with the bytes of red
  // (yellow) packets in the queue instead of the whole queue depth (the
  // "queue length of packets in each color" reading of FlexPass §4.1).
  bool per_color_depth = false;
  // ECN: an admitted ECN-capable packet is reported for marking if the queue
  // depth before it exceeds ecn_threshold (depth > K).
  uint64_t ecn_threshold = kUnlimited;
  // Service order inside the queue (FIFO, or pFabric's; see Discipline).
  Discipline discipline = Discipline::kFifo;
};

struct PortConfig {
  uint64_t link_rate_bps = 0;                  // > 0, <= kMaxRateBps
  uint64_t shared_buffer_bytes = kUnlimited;   // across all queues of the port
  uint32_t wire_overhead_bytes = 0;            // added to PacketMeta::bytes on the wire
  // DWRR quantum of the largest weight of a level, in wire bytes.  Should be
  // at least one maximum frame so the heaviest queue sends >= 1 packet/round.
  uint32_t dwrr_quantum_bytes = 1538;
};

struct PacketMeta {
  uint64_t id = 0;      // opaque handle for the caller (e.g. its packet buffer)
  uint32_t bytes = 0;   // buffer-accounting size, > 0
  uint8_t queue = 0;    // egress queue id
  Color color = Color::kGreen;
  bool ect = false;     // ECN-capable transport
  // pFabric queues only (ignored by FIFO queues): the packet's priority,
  // smaller first (pFabric: its flow's remaining size), and its flow (a key;
  // equal keys = one flow).
  uint32_t rank = 0;
  uint64_t flow = 0;
};

struct EnqueueResult {
  bool admitted = false;
  DropReason drop_reason = DropReason::kNone;
  uint64_t depth_bytes_before = 0;  // queue depth when the packet arrived
  uint64_t depth_pkts_before = 0;
  bool ecn_mark = false;            // admitted && ect && depth_bytes_before > K
  // pFabric: queued packets evicted to admit this one (DropReason::kPushedOut);
  // the caller frees them.  Empty for FIFO queues.
  std::vector<PacketMeta> evicted;
};

enum class DequeueStatus : uint8_t {
  kPacket,    // a packet starts transmission now (see DequeueResult)
  kNotReady,  // packets are queued, but the link is busy or every non-empty
              // queue is shaped out: call again at next_eligible_ns
  kEmpty,     // nothing queued
};

struct DequeueResult {
  DequeueStatus status = DequeueStatus::kEmpty;
  // kPacket:
  PacketMeta packet;
  uint8_t queue = 0;
  uint64_t depth_bytes_before = 0;  // queue depth including this packet
  uint64_t depth_pkts_before = 0;
  uint64_t depth_bytes_after = 0;   // queue depth after it left
  uint64_t depth_pkts_after = 0;
  uint64_t enqueue_ns = 0;          // when it was enqueued (sojourn = tx_start - enqueue)
  uint64_t tx_start_ns = 0;         // = now_ns of the dequeue call
  uint64_t tx_end_ns = 0;           // end of serialization (ceil); link free then
  // kNotReady:
  uint64_t next_eligible_ns = 0;
};

struct QueueStats {
  uint64_t depth_bytes = 0;
  uint64_t depth_pkts = 0;
  uint64_t max_depth_bytes = 0;  // watermarks since construction / clear_watermarks()
  uint64_t max_depth_pkts = 0;
  uint64_t enqueued_pkts = 0;
  uint64_t enqueued_bytes = 0;
  uint64_t dequeued_pkts = 0;
  uint64_t dequeued_bytes = 0;   // bytes sent (PacketMeta::bytes)
  uint64_t dequeued_wire_bytes = 0;
  uint64_t ecn_marked_pkts = 0;  // reported ecn_mark = true
  std::array<uint64_t, kNumDropReasons> dropped_pkts{};   // indexed by DropReason
  std::array<uint64_t, kNumDropReasons> dropped_bytes{};
  std::array<uint64_t, 3> depth_bytes_by_color{};         // indexed by Color

  uint64_t dropped(DropReason r) const { return dropped_pkts[static_cast<std::size_t>(r)]; }
  uint64_t total_dropped_pkts() const;
};

struct PortStats {
  uint64_t buffered_bytes = 0;      // all queues
  uint64_t buffered_pkts = 0;
  uint64_t max_buffered_bytes = 0;  // watermark
  uint64_t tx_pkts = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_wire_bytes = 0;
  uint64_t invalid_drops = 0;       // DropReason::kInvalid (not charged to a queue)
};

// Returns an empty string if valid, else a description of the first problem.
std::string validate(const PortConfig &cfg);
std::string validate(const QueueConfig &cfg);

class EgressPort {
 public:
  // queues.size() is the number of queues, 1..kMaxQueues.  Throws ConfigError.
  EgressPort(const PortConfig &port, const std::vector<QueueConfig> &queues);

  EnqueueResult enqueue(const PacketMeta &pkt, uint64_t now_ns);
  DequeueResult dequeue(uint64_t now_ns);

  // Runtime reconfiguration (throw ConfigError and change nothing if invalid).
  // Queued packets are kept even if a new limit is below the current depth;
  // the new limits apply to later arrivals.  A queue keeps its DWRR deficit
  // unless it moves to another priority level.  A changed shaper keeps its
  // tokens (clipped to the new burst); a newly enabled shaper starts full.
  // now_ns: time of the change (tokens earned until then accrue at the old
  // rate); the default 0 means "the latest time seen".
  void configure_queue(std::size_t queue, const QueueConfig &cfg, uint64_t now_ns = 0);
  // The packet in flight keeps its finish time; later packets use the new rate.
  void set_link_rate(uint64_t rate_bps);
  void set_shared_buffer(uint64_t bytes);
  void set_wire_overhead(uint32_t bytes);
  void set_dwrr_quantum(uint32_t bytes);

  std::size_t num_queues() const { return queues_.size(); }
  const PortConfig &port_config() const { return port_; }
  const QueueConfig &queue_config(std::size_t queue) const;
  // DWRR quantum currently derived for a queue, in wire bytes.
  uint64_t dwrr_quantum(std::size_t queue) const;
  const QueueStats &queue_stats(std::size_t queue) const;
  const PortStats &port_stats() const { return stats_; }
  // True while a packet is being serialized at now_ns.
  bool busy(uint64_t now_ns) const;
  void clear_watermarks();

 private:
  struct Entry {
    PacketMeta meta;
    uint64_t enqueue_ns;
  };
  struct Queue {
    QueueConfig cfg;
    std::deque<Entry> fifo;
    QueueStats stats;
    uint64_t quantum = 0;   // DWRR quantum, wire bytes
    uint64_t deficit = 0;   // DWRR deficit, wire bytes
    int64_t tokens = 0;     // shaper tokens, bits * 1e9 (may dip below 0, see tm.cpp)
    uint64_t last_refill_ns = 0;
    std::size_t head = 0;   // index of the next packet in fifo (set by dequeue)
  };
  struct Level {
    uint8_t priority = 0;
    std::vector<std::size_t> members;  // queue ids, ascending
    std::size_t pos = 0;               // DWRR pointer into members
    bool in_service = false;           // members[pos] already got its quantum
  };

  uint64_t wire_bytes(const PacketMeta &m) const { return uint64_t{m.bytes} + port_.wire_overhead_bytes; }
  uint64_t clamp_time(uint64_t now_ns);
  void rebuild_levels();
  void refill(Queue &q, uint64_t now_ns);
  bool shaper_ok(const Queue &q) const;
  uint64_t shaper_ready_ns(const Queue &q, uint64_t now_ns) const;
  std::size_t select_in_level(Level &lv, uint32_t eligible_mask);
  void drop(Queue *q, const PacketMeta &pkt, DropReason r, EnqueueResult &res);
  // pFabric admission: makes room for pkt in q by evicting lower priorities,
  // or returns the reason it is dropped (kNone: it fits now).
  DropReason pfabric_make_room(Queue &q, const PacketMeta &pkt, EnqueueResult &res);
  // Index in q.fifo of the packet the queue sends next (0 for FIFO).
  static std::size_t pfabric_next(const Queue &q);
  const Entry &head(const Queue &q) const { return q.fifo[q.head]; }

  PortConfig port_;
  std::vector<Queue> queues_;
  std::vector<Level> levels_;  // descending priority
  PortStats stats_;
  uint64_t last_now_ns_ = 0;
  // Link busy until busy_ns_ + busy_frac_ / link_rate_bps (exact).
  uint64_t busy_ns_ = 0;
  uint64_t busy_frac_ = 0;
};

// ---------------------------------------------------------------------------
// FlexPass port profile (FlexPass EuroSys'23 §4.1, ExpressPass SIGCOMM'17 §3.1).
//
//   Q0 credits  : priority 1, shaped to w_q·C·credit/(credit+max_frame), burst
//                 2 credits, buffer 8 credits;
//   Q1 FlexPass : priority 0, DWRR weight w_q, ECN K, red threshold;
//   Q2 legacy   : priority 0, DWRR weight 1 - w_q, optional ECN K.
struct FlexPassParams {
  uint64_t link_rate_bps = 10'000'000'000ULL;
  double w_q = 0.5;                         // 0 < w_q < 1
  uint32_t credit_wire_bytes = 84;          // minimum Ethernet frame on the wire
  uint32_t max_frame_wire_bytes = 1538;     // data frame one credit allows
  uint32_t wire_overhead_bytes = 0;         // as PortConfig::wire_overhead_bytes
  uint32_t credit_burst_credits = 2;
  uint32_t credit_buffer_credits = 8;
  uint64_t flexpass_ecn_threshold = 60'000;
  uint64_t flexpass_red_threshold = 100'000;
  uint64_t legacy_ecn_threshold = kUnlimited;
  uint64_t data_buffer_bytes = 300'000;     // per data queue (Q1, Q2)
  uint64_t shared_buffer_bytes = kUnlimited;
};

inline constexpr std::size_t kCreditQueue = 0;
inline constexpr std::size_t kFlexPassQueue = 1;
inline constexpr std::size_t kLegacyQueue = 2;

// Credit shaper rate: round(w_q · C · credit / (credit + max_frame)).
uint64_t flexpass_credit_rate_bps(const FlexPassParams &p);
PortConfig flexpass_port_config(const FlexPassParams &p);
std::vector<QueueConfig> flexpass_queue_configs(const FlexPassParams &p);  // throws ConfigError

}  // namespace tm
}  // namespace flexpass

#endif  // FLEXPASS_TM_H_
