/*
 * FlexPass switch pipeline: constants shared by the v1model (BMv2) program and
 * the TNA (Tofino) program.  Wire format: docs/protocol.md.  The control
 * plane's copy: control-plane/flexpass_cp/p4_program.py (checked by
 * control-plane/tests/test_p4_names.py).
 */
#ifndef FLEXPASS_DEFINE_P4_
#define FLEXPASS_DEFINE_P4_

/* ---- Ethernet / IPv4 ---------------------------------------------------- */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_TCP   = 6;
const bit<8>  IP_PROTO_UDP   = 17;

/* ECN code points (RFC 3168), low two bits of the IPv4 TOS byte. */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_ECT1    = 1;
const bit<2> ECN_ECT0    = 2;
const bit<2> ECN_CE      = 3;

/* ---- FlexPass (docs/protocol.md §2-§4) ---------------------------------- */
/* UDP port, matched as source OR destination port.  Every host in a
 * deployment uses the same value; override at compile time with
 * -DFLEXPASS_UDP_PORT=<port> (p4c-bm2-ss passes -D to the preprocessor). */
#ifndef FLEXPASS_UDP_PORT
#define FLEXPASS_UDP_PORT 7890
#endif
const bit<16> FLEXPASS_PORT = FLEXPASS_UDP_PORT;

const bit<4> FLEXPASS_VERSION        = 1;
const bit<4> FLEXPASS_TYPE_CREDIT    = 0x1;
const bit<4> FLEXPASS_TYPE_PRO_DATA  = 0x2;
const bit<4> FLEXPASS_TYPE_REA_DATA  = 0x3;
/* Flag PRIO (docs/protocol.md §5): a 4-byte `priority` follows the data header. */
const bit<8> FLEXPASS_FLAG_PRIO      = 0x40;
/* pFabric rank (docs/protocol.md §10): packets without a priority.  Control
 * messages go first (an ACK holds its flow back), data without PRIO and
 * non-FlexPass traffic last. */
const bit<32> PFABRIC_RANK_CONTROL   = 0;
const bit<32> PFABRIC_RANK_UNRANKED  = 0xFFFFFFFF;

/*
 * DSCP plan defaults (docs/protocol.md §10).  DOCUMENTATION ONLY: the
 * pipeline never tests these values; classification is done by the
 * `classifier` table, whose entries the control plane derives from the DSCP
 * plan in its YAML config.
 *   credit 46 (EF), proactive_data 26 (AF31), reactive_data 30 (AF33),
 *   control 24 (CS3), legacy 0 (BE).
 */

/* ---- Traffic kind (classifier action parameter, metadata) -------------- */
typedef bit<3> kind_t;
const kind_t KIND_LEGACY    = 0;
const kind_t KIND_CREDIT    = 1;
const kind_t KIND_PROACTIVE = 2;
const kind_t KIND_REACTIVE  = 3;
const kind_t KIND_CONTROL   = 4;

/* ---- Colour used for selective (colour-aware) dropping ----------------- */
/* Packet colour, in the v1model meter encoding (0 green, 1 yellow, 2 red) so a
 * traffic manager with colour-aware admission reads it as-is (switch-target). */
typedef bit<2> color_t;
const color_t COLOR_GREEN  = 0;
const color_t COLOR_YELLOW = 1;
const color_t COLOR_RED    = 2;

/* ---- Sizes ------------------------------------------------------------- */
/* Queue id = the BMv2 priority queue index (standard_metadata.priority).
 * BMv2 serves the HIGHEST index first (see p4src/README.md). */
typedef bit<3> qid_t;
#define QUEUES_PER_PORT 8
/* Data-plane ports 0..MAX_PORTS-1 are supported (meter and counter arrays
 * are indexed by port; the control plane rejects larger port numbers). */
#define MAX_PORTS 64
#define PORT_QUEUE_COUNTER_SIZE 512   /* MAX_PORTS * QUEUES_PER_PORT */
/* Cell of (port, queue) in the per-queue counters: port * QUEUES_PER_PORT + qid,
 * a bit<9> (port[5:0]: ports 0..MAX_PORTS-1). */
#define PORT_QUEUE_INDEX(port, qid) ((port)[5:0] ++ (qid))
#define ECMP_SELECTOR_SIZE 1024
#define ECMP_MAX_GROUP_SIZE 16

/* "No threshold": above any enq_qdepth (bit<19>). */
const bit<19> QDEPTH_NONE = 0x7FFFF;

/* Ingress event counter indices (counter `ingress_events`). */
#define EVT_PARSER_ERROR   0   /* malformed/truncated header; packet still forwarded */
#define EVT_NOT_IPV4       1   /* dropped: no (version 4) IPv4 header */
#define EVT_BAD_CHECKSUM   2   /* dropped: IPv4 header checksum wrong */
#define EVT_TTL_EXPIRED    3   /* dropped: TTL <= 1 */
#define EVT_NO_ROUTE       4   /* dropped: routing table miss */
#define EVT_FLEXPASS_SEEN  5   /* FlexPass common header parsed */
#define EVT_IPV4_OPTIONS   6   /* dropped: IPv4 with options (IHL != 5) is not supported */
#define EVT_COUNT          8

#endif  /* FLEXPASS_DEFINE_P4_ */
