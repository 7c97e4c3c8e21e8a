/*
 * IPv4 forwarding: LPM routing to a next hop or to an ECMP group (action
 * selector), TTL decrement.  The control plane creates one action-profile
 * member per next hop (ecmp_profile), in next-hop address order, and the ECMP
 * groups (ecmp_selector) from those members.
 *
 * Symmetric ECMP (ExpressPass SIGCOMM'17 §3.1: credits and data of a flow
 * take the same path): the two addresses and the two L4 ports are put in
 * canonical (min, max) order, hashed ONCE with an explicit Hash.get() into
 * meta.ecmp_hash, and the selector is keyed by that field only.  A flow and
 * its reverse therefore present the same selector key.  (bf-p4c silently
 * ignores @symmetric on the Hash an ActionSelector owns; the explicit hash
 * makes the symmetry independent of that.)
 */
#ifndef FLEXPASS_TNA_FORWARDING_P4_
#define FLEXPASS_TNA_FORWARDING_P4_

control Forwarding(inout headers_t hdr,
                   inout flexpass_ig_meta_t meta,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md,
                   out bool routed) {

    Hash<bit<16>>(HashAlgorithm_t.CRC16) ecmp_hash;
    /* The selector's own hash only sees meta.ecmp_hash (already symmetric). */
    Hash<bit<16>>(HashAlgorithm_t.CRC16) selector_hash;

    @name(".ecmp_profile")
    ActionProfile(ECMP_SELECTOR_SIZE) ecmp_profile;
    @name(".ecmp_selector")
    ActionSelector(ecmp_profile, selector_hash, SelectorMode_t.FAIR,
                   ECMP_MAX_GROUP_SIZE, ECMP_GROUPS) ecmp_selector;

    @name(".set_nexthop")
    action set_nexthop(PortId_t port, mac_addr_t dmac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".routing")
    table routing {
        key = {
            hdr.ipv4.dst_addr : lpm @name("dst_addr");
            meta.ecmp_hash    : selector;
        }
        actions = {
            set_nexthop;
        }
        implementation = ecmp_selector;
        size = 1024;
    }

    apply {
        routed = false;
        meta.hash_addr_lo = min(hdr.ipv4.src_addr, hdr.ipv4.dst_addr);
        meta.hash_addr_hi = max(hdr.ipv4.src_addr, hdr.ipv4.dst_addr);
        meta.hash_port_lo = min(meta.l4_sport, meta.l4_dport);
        meta.hash_port_hi = max(meta.l4_sport, meta.l4_dport);
        meta.ecmp_hash = ecmp_hash.get({ meta.hash_addr_lo, meta.hash_addr_hi,
                                         meta.hash_port_lo, meta.hash_port_hi,
                                         hdr.ipv4.protocol });
        if (routing.apply().hit) {
            routed = true;
        }
    }
}

#endif
