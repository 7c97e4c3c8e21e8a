/*
 * pFabric (Alizadeh et al., SIGCOMM'13 §4.1): the rank and flow key that
 * flexpass_switch's traffic manager reads from the metadata (fields
 * pfabric_rank, pfabric_flow) to order a queue configured with discipline
 * "pfabric" (docs/tm-api.md): smallest rank first, then the earliest packet of
 * that packet's flow; the largest rank is dropped when the buffer is full.
 *
 * Rank: the `priority` of a data packet with flag PRIO (transport pfabric: its
 * flow's remaining size, docs/protocol.md §6.2); other FlexPass messages
 * (ACKs, HELLO, ...) 0, served first as in the model; data without PRIO and
 * non-FlexPass traffic 2^32 - 1, last.  Flow: a CRC32 of the flow identity
 * (docs/protocol.md §2: sender, receiver, flow_id; other traffic: the 5-tuple).
 * Queues in discipline fifo ignore both.
 */
#ifndef FLEXPASS_PFABRIC_P4_
#define FLEXPASS_PFABRIC_P4_

control PfabricRank(in headers_t hdr, inout flexpass_meta_t meta) {
    apply {
        if (hdr.prio.isValid()) {
            meta.pfabric_rank = hdr.prio.priority;
        } else if (hdr.flexpass.isValid() &&
                   hdr.flexpass.msg_type != FLEXPASS_TYPE_PRO_DATA &&
                   hdr.flexpass.msg_type != FLEXPASS_TYPE_REA_DATA) {
            meta.pfabric_rank = PFABRIC_RANK_CONTROL;
        } else {
            meta.pfabric_rank = PFABRIC_RANK_UNRANKED;
        }
        if (hdr.flexpass.isValid()) {
            hash(meta.pfabric_flow, HashAlgorithm.crc32, 32w0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.flexpass.flow_id }, 32w0xffffffff);
        } else {
            hash(meta.pfabric_flow, HashAlgorithm.crc32, 32w0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                   meta.l4_sport, meta.l4_dport }, 32w0xffffffff);
        }
    }
}

#endif
