/*
 * IPv4 header checksum.  Verification sets standard_metadata.checksum_error
 * (ingress drops such packets); the update runs after egress so that the TTL
 * decrement (ingress) and the ECN CE mark (egress) are both covered.
 * The UDP/TCP checksums do not cover the TOS byte or the TTL, so they stay
 * valid.
 */
#ifndef FLEXPASS_CHECKSUM_P4_
#define FLEXPASS_CHECKSUM_P4_

control FlexPassVerifyChecksum(inout headers_t hdr, inout flexpass_meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control FlexPassComputeChecksum(inout headers_t hdr, inout flexpass_meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif
