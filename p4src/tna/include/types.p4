/*
 * TNA glue: metadata, the ingress->egress bridged header and the egress
 * header struct.  Header types come from p4src/shared/header.p4.
 */
#ifndef FLEXPASS_TNA_TYPES_P4_
#define FLEXPASS_TNA_TYPES_P4_

typedef bit<8> evt_t;          /* ingress_events index (EVT_* in define.p4) */
typedef bit<9> pq_index_t;     /* PORT_QUEUE_INDEX: PORT_QUEUE_COUNTER_SIZE cells */

/* Traffic-manager colour of a red packet: the TM reads packet_color in the
 * meter encoding of tofino*_base.p4 (MeterColor_t: GREEN 0, YELLOW 1, RED 3).
 * The classifier keeps the v1model encoding (COLOR_RED = 2) shared with BMv2,
 * so the control plane writes the same entries for every target. */
const bit<2> TM_COLOR_RED = 3;

/* 1024 members = 64 groups of up to ECMP_MAX_GROUP_SIZE next hops. */
#define ECMP_GROUPS (ECMP_SELECTOR_SIZE / ECMP_MAX_GROUP_SIZE)

/* The classifier's decision, carried to egress in front of the Ethernet
 * header (a TNA egress sees only what the ingress deparser emits). */
header flexpass_bridged_t {
    qid_t   qid;       /* ig_tm_md.qid (the queue's index in the config) */
    color_t color;     /* COLOR_GREEN / COLOR_RED (v1model encoding) */
    kind_t  kind;      /* KIND_* */
}

struct flexpass_ig_meta_t {
    flexpass_bridged_t bridged;
    /* L4 ports (0 when the packet has no parsed TCP/UDP header). */
    bit<16> l4_sport;
    bit<16> l4_dport;
    /* Set by the parser's Checksum.verify(): true when the IPv4 header
     * checksum is WRONG (behaviour of the extern, see tna_checksum in the
     * SDE's p4-examples). */
    bool    checksum_err;
    /* Symmetric ECMP: the endpoints in canonical (min, max) order, then one
     * explicit Hash.get() into ecmp_hash, the selector's only key field. */
    bit<32> hash_addr_lo;
    bit<32> hash_addr_hi;
    bit<16> hash_port_lo;
    bit<16> hash_port_hi;
    bit<16> ecmp_hash;
    /* The one ingress_events count of this packet. */
    evt_t   evt;
    bool    count_evt;
    pq_index_t pq_index;
}

struct flexpass_eg_headers_t {
    flexpass_bridged_t bridged;
    ethernet_t         ethernet;
    ipv4_t             ipv4;
}

struct flexpass_eg_meta_t {
    /* From queue_thresholds, in enq_qdepth units (cells). */
    bit<19> ecn_threshold;
    bit<19> red_threshold;
    /* enq_qdepth |-| threshold: non-zero iff the depth exceeds it. */
    bit<19> ecn_excess;
    bit<19> red_excess;
    pq_index_t pq_index;
}

#endif
