/*
 * FlexPass switch pipeline: header types shared by the v1model and TNA
 * programs.  FlexPass wire format: docs/protocol.md §3, §6.1, §6.2.
 */
#ifndef FLEXPASS_HEADER_P4_
#define FLEXPASS_HEADER_P4_

#include "define.p4"

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_t {
    bit<16> sport;
    bit<16> dport;
    bit<16> len;
    bit<16> checksum;
}

/* TCP without options (the options stay in the payload). */
header tcp_t {
    bit<16> sport;
    bit<16> dport;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

/* FlexPass common header: 8 bytes, every message (docs/protocol.md §3). */
header flexpass_t {
    bit<4>  version;
    bit<4>  msg_type;
    bit<8>  flags;
    bit<16> length;     /* whole message length = UDP length - 8 */
    bit<32> flow_id;
}

/* CREDIT body (type 0x1): credit_seq, then 6..14 bytes of padding which the
 * switch leaves in the payload (docs/protocol.md §6.1). */
header flexpass_credit_t {
    bit<32> credit_seq;
}

/* PROACTIVE_DATA / REACTIVE_DATA body (types 0x2, 0x3; docs/protocol.md §6.2),
 * parsed by the v1model program only when flag PRIO is set, for pFabric's
 * priority; the payload stays in the packet. */
header flexpass_data_t {
    bit<64> flow_seq;
    bit<32> subflow_seq;
    bit<32> credit_seq;
    bit<32> tsval;
}

/* With flag PRIO: the packet's priority, smaller first (pFabric: the flow's
 * remaining size in bytes). */
header flexpass_prio_t {
    bit<32> priority;
}

struct headers_t {
    ethernet_t        ethernet;
    ipv4_t            ipv4;
    udp_t             udp;
    tcp_t             tcp;
    flexpass_t        flexpass;
    flexpass_credit_t credit;
    flexpass_data_t   data;   /* v1model: only with flag PRIO */
    flexpass_prio_t   prio;
}

#endif  /* FLEXPASS_HEADER_P4_ */
