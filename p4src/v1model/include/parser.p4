/*
 * Parser and deparser: Ethernet -> IPv4 -> UDP (-> FlexPass when either UDP
 * port is FLEXPASS_PORT -> credit body for CREDIT messages, data header and
 * priority for data with flag PRIO) / TCP.
 *
 * Malformed packets: a header that does not fit in the packet makes the
 * extract fail with error.PacketTooShort.  In v1model/BMv2 the packet still
 * reaches ingress with standard_metadata.parser_error set and the failing
 * header invalid; ingress counts it (EVT_PARSER_ERROR) and forwards the packet
 * on its IPv4 header like any other: the switch classifies by DSCP only and
 * leaves FlexPass validation to the end hosts.
 */
#ifndef FLEXPASS_PARSER_P4_
#define FLEXPASS_PARSER_P4_

parser FlexPassParser(packet_in packet,
                      out headers_t hdr,
                      inout flexpass_meta_t meta,
                      inout standard_metadata_t standard_metadata) {
    state start {
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* L4 only for option-less, unfragmented (or first-fragment) IPv4. */
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.frag_offset,
                          hdr.ipv4.protocol) {
            (4, 5, 0, IP_PROTO_UDP): parse_udp;
            (4, 5, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_sport = hdr.tcp.sport;
        meta.l4_dport = hdr.tcp.dport;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_sport = hdr.udp.sport;
        meta.l4_dport = hdr.udp.dport;
        transition select(hdr.udp.dport, hdr.udp.sport) {
            (FLEXPASS_PORT, _): parse_flexpass;
            (_, FLEXPASS_PORT): parse_flexpass;
            default: accept;
        }
    }

    state parse_flexpass {
        packet.extract(hdr.flexpass);
        transition select(hdr.flexpass.version, hdr.flexpass.msg_type,
                          hdr.flexpass.flags & FLEXPASS_FLAG_PRIO) {
            (FLEXPASS_VERSION, FLEXPASS_TYPE_CREDIT, _): parse_credit;
            (FLEXPASS_VERSION, FLEXPASS_TYPE_PRO_DATA, FLEXPASS_FLAG_PRIO): parse_prio;
            (FLEXPASS_VERSION, FLEXPASS_TYPE_REA_DATA, FLEXPASS_FLAG_PRIO): parse_prio;
            default: accept;
        }
    }

    /* Data with flag PRIO: its priority is pFabric's rank (PfabricRank). */
    state parse_prio {
        packet.extract(hdr.data);
        packet.extract(hdr.prio);
        transition accept;
    }

    state parse_credit {
        packet.extract(hdr.credit);
        transition accept;
    }
}

control FlexPassDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.flexpass);
        packet.emit(hdr.credit);
        packet.emit(hdr.data);
        packet.emit(hdr.prio);
    }
}

#endif
