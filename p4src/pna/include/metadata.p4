/* FlexPass NIC edge (PNA): user metadata, sizes and the NIC's event ids. */
#ifndef FLEXPASS_NIC_METADATA_P4_
#define FLEXPASS_NIC_METADATA_P4_

#include "../../shared/header.p4"

struct flexpass_nic_meta_t {
    /* Set by the classifier table (same action as the switch's). */
    qid_t   qid;        /* NIC queue: written to ostd.class_of_service */
    color_t color;      /* GREEN / RED (unscheduled/reactive data is red) */
    kind_t  kind;       /* KIND_* */
    bit<6>  dscp;       /* classifier key: ipv4.dscp */
}

/* Per-flow credit registers: FLOW_SLOTS cells indexed by flow_slot(src, dst,
 * flow_id) (include/control/credit_meter.p4).  Two flows may share a slot: the agent reads
 * `flow_credit_id` to see whose count a slot holds (the last credit's flow). */

#define FLOW_SLOTS     4096

/* Counters are Register arrays counted by COUNT() on both targets: p4c-bm2-pna
 * (p4c 1.2.5, this build) stops with a compiler bug on any PNA Counter
 * ("width_bits() on type with unknown size: PNA_CounterType_t": its midend
 * leaves the counter-type enum unconverted).  One mechanism for both targets,
 * read by the agent/control plane as registers (64-bit cells, never reset by
 * the data plane). */
#define COUNT(reg, idx, n) reg.write((idx), reg.read(idx) + (n))
typedef bit<64> count_t;

/* Per-class counters `class_packets` / `class_bytes`: cell kind ++ colour (5 bits). */
#define CLASS_COUNTER_SIZE 32
#define CLASS_INDEX(kind, color) ((bit<32>)((kind) ++ (color)))

/* NIC event counter `nic_events`: the switch's EVT_* ids (define.p4) that
 * apply at the NIC (0 parser error, 1 not IPv4 (passed as legacy here), 5 FlexPass seen), plus the
 * NIC's own.  Unlike the switch, the NIC drops a packet with a parser error:
 * it is about to enter the network. */
#define EVT_BAD_FLEXPASS   7   /* dropped: FlexPass version, length or CREDIT body wrong */
#define EVT_NO_PORT        8   /* dropped: no entry for the input port in `nic_port` */
#define NIC_EVT_COUNT      16

/* The shortest CREDIT message (docs/protocol.md: 8-byte header, credit_seq, padding). */
#define CREDIT_MSG_MIN     18
/* FlashPass's EMULATION message type (docs/protocol.md §6.9). */
#define FLEXPASS_TYPE_EMULATION 0xA

#endif
