/*
 * TNA parsers and deparsers.
 *
 * Ingress: Ethernet -> IPv4 -> TCP, or UDP -> FlexPass common header when
 * either UDP port is FLEXPASS_PORT -> credit body (same states as the
 * v1model parser).  The IPv4 header checksum is verified here.  A header
 * that does not fit in the packet ends parsing with a parser error; because
 * ingress reads ig_prsr_md.parser_err, the packet still reaches ingress,
 * which counts it and forwards it on its IPv4 header (as on BMv2).
 *
 * Egress: the bridged header, Ethernet and IPv4 only (egress rewrites the
 * source MAC and the ECN bits); everything after IPv4 stays payload.  The
 * egress deparser recomputes the IPv4 checksum, which so covers the TTL
 * decrement (ingress) and the CE mark (egress).
 */
#ifndef FLEXPASS_TNA_PARSER_P4_
#define FLEXPASS_TNA_PARSER_P4_

parser FlexPassIngressParser(packet_in pkt,
                             out headers_t hdr,
                             out flexpass_ig_meta_t meta,
                             out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);   /* no resubmit: port metadata follows */
        meta.l4_sport = 0;
        meta.l4_dport = 0;
        meta.checksum_err = false;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        meta.checksum_err = ipv4_checksum.verify();
        /* L4 only for option-less, unfragmented (or first-fragment) IPv4. */
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.frag_offset,
                          hdr.ipv4.protocol) {
            (4, 5, 0, IP_PROTO_UDP): parse_udp;
            (4, 5, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.l4_sport = hdr.tcp.sport;
        meta.l4_dport = hdr.tcp.dport;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_sport = hdr.udp.sport;
        meta.l4_dport = hdr.udp.dport;
        transition select(hdr.udp.dport, hdr.udp.sport) {
            (FLEXPASS_PORT, _): parse_flexpass;
            (_, FLEXPASS_PORT): parse_flexpass;
            default: accept;
        }
    }

    state parse_flexpass {
        pkt.extract(hdr.flexpass);
        transition select(hdr.flexpass.version, hdr.flexpass.msg_type) {
            (FLEXPASS_VERSION, FLEXPASS_TYPE_CREDIT): parse_credit;
            default: accept;
        }
    }

    state parse_credit {
        pkt.extract(hdr.credit);
        transition accept;
    }
}

control FlexPassIngressDeparser(packet_out pkt,
                                inout headers_t hdr,
                                in flexpass_ig_meta_t meta,
                                in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        pkt.emit(meta.bridged);
        pkt.emit(hdr);
    }
}

parser FlexPassEgressParser(packet_in pkt,
                            out flexpass_eg_headers_t hdr,
                            out flexpass_eg_meta_t meta,
                            out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridged);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control FlexPassEgressDeparser(packet_out pkt,
                               inout flexpass_eg_headers_t hdr,
                               in flexpass_eg_meta_t meta,
                               in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        /* The bridged header is not emitted: it ends here. */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

#endif
