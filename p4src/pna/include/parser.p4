/*
 * NIC parser and deparser: the switch's header stack (p4src/v1model/include/
 * parser.p4) in PNA form: Ethernet -> IPv4 -> UDP (-> FlexPass when either
 * UDP port is FLEXPASS_PORT -> the credit body for version-1 CREDITs) / TCP.
 * Unlike the switch, the NIC is where packets enter the network, so a header
 * that does not fit (parser error) is dropped by the main control
 * (EVT_PARSER_ERROR) rather than forwarded.
 */
#ifndef FLEXPASS_NIC_PARSER_P4_
#define FLEXPASS_NIC_PARSER_P4_

parser FlexPassNicParser(packet_in packet,
                         out headers_t hdr,
                         inout flexpass_nic_meta_t meta,
                         in pna_main_parser_input_metadata_t istd) {
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
        meta.dscp = hdr.ipv4.dscp;    /* the classifier's key */
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
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dport, hdr.udp.sport) {
            (FLEXPASS_PORT, _): parse_flexpass;
            (_, FLEXPASS_PORT): parse_flexpass;
            default: accept;
        }
    }

    state parse_flexpass {
        packet.extract(hdr.flexpass);
        transition select(hdr.flexpass.version, hdr.flexpass.msg_type) {
            (FLEXPASS_VERSION, FLEXPASS_TYPE_CREDIT): parse_credit;
            default: accept;
        }
    }

    state parse_credit {
        packet.extract(hdr.credit);
        transition accept;
    }
}

control FlexPassNicDeparser(packet_out packet,
                            PNA_DEPARSER_HDR headers_t hdr,
                            in flexpass_nic_meta_t meta,
                            in pna_main_output_metadata_t ostd) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.flexpass);
        packet.emit(hdr.credit);
    }
}

#endif
