/* FlexPass v1model pipeline: user metadata (carried from ingress to egress). */
#ifndef FLEXPASS_METADATA_P4_
#define FLEXPASS_METADATA_P4_

#include "../../shared/header.p4"

struct flexpass_meta_t {
    /* Set by the classifier table. */
    qid_t   qid;        /* egress queue = BMv2 priority index */
    color_t color;      /* GREEN / RED (selective dropping) */
    kind_t  kind;       /* KIND_* */
    /* L4 ports (0 when the packet has no parsed TCP/UDP header). */
    bit<16> l4_sport;
    bit<16> l4_dport;
    /* Symmetric ECMP hash input: the (address, port) endpoints in a canonical
     * order, so A->B and B->A produce the same selector key. */
    bit<32> hash_addr_lo;
    bit<32> hash_addr_hi;
    bit<16> hash_port_lo;
    bit<16> hash_port_hi;
    /* Egress: per (port, queue) thresholds in packets (BMv2 enq_qdepth units). */
    bit<19> ecn_threshold;
    bit<19> red_threshold;
    /* pFabric (PfabricRank): read by flexpass_switch's TM, used by queues in
     * discipline pfabric only (switch-target/README.md "pFabric"). */
    bit<32> pfabric_rank;   /* smaller first: the PRIO field, else 0 / 2^32-1 */
    bit<32> pfabric_flow;   /* flow key: hash of (src, dst, flow_id or L4 ports) */
}

#endif
