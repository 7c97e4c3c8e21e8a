/*
 * IPv4 forwarding: TTL check, LPM routing to a next hop or to an ECMP group
 * (action selector), TTL decrement.
 *
 * Symmetric ECMP: the selector hashes the flow's two (address, L4 port)
 * endpoints in a canonical order (lower address first; ports break the tie
 * when the addresses are equal) plus the IP protocol, so a flow A->B and its
 * reverse B->A hash to the same value.  With deterministic member order
 * (the control plane sorts members by next hop) both directions therefore
 * take the same link, as ExpressPass requires (SIGCOMM'17 §3.1).
 */
#ifndef FLEXPASS_FORWARDING_P4_
#define FLEXPASS_FORWARDING_P4_

control Forwarding(inout headers_t hdr,
                   inout flexpass_meta_t meta,
                   inout standard_metadata_t standard_metadata,
                   out bool routed) {

    @name(".ecmp_selector")
    @max_group_size(ECMP_MAX_GROUP_SIZE)
    action_selector(HashAlgorithm.crc16, ECMP_SELECTOR_SIZE, 16) ecmp_selector;

    /* One action-profile member per next hop; ECMP groups are selector
     * groups of those members. */
    @name(".set_nexthop")
    action set_nexthop(bit<9> port, mac_addr_t dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".routing")
    table routing {
        key = {
            hdr.ipv4.dst_addr : lpm @name("dst_addr");
            meta.hash_addr_lo : selector;
            meta.hash_addr_hi : selector;
            meta.hash_port_lo : selector;
            meta.hash_port_hi : selector;
            hdr.ipv4.protocol : selector;
        }
        actions = {
            set_nexthop;
        }
        implementation = ecmp_selector;
        size = 1024;
    }

    apply {
        routed = false;
        /* Canonical endpoint order for the symmetric hash. */
        if (hdr.ipv4.src_addr < hdr.ipv4.dst_addr ||
            (hdr.ipv4.src_addr == hdr.ipv4.dst_addr &&
             meta.l4_sport <= meta.l4_dport)) {
            meta.hash_addr_lo = hdr.ipv4.src_addr;
            meta.hash_port_lo = meta.l4_sport;
            meta.hash_addr_hi = hdr.ipv4.dst_addr;
            meta.hash_port_hi = meta.l4_dport;
        } else {
            meta.hash_addr_lo = hdr.ipv4.dst_addr;
            meta.hash_port_lo = meta.l4_dport;
            meta.hash_addr_hi = hdr.ipv4.src_addr;
            meta.hash_port_hi = meta.l4_sport;
        }
        if (routing.apply().hit) {
            routed = true;
        }
    }
}

#endif
