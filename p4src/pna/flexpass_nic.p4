/*
 * FlexPass NIC edge for the Portable NIC Architecture (PNA): the edge
 * functions of FlexPass §4.3 ("the NIC as an edge switch") where packets
 * already pass, sharing p4src/shared with the switch programs.
 *
 *   parse -> drop truncated packets and forged FlexPass -> classify by DSCP (queue,
 *   colour, kind; counted per class) -> output port -> police credits
 *   (meter per port at the switch's credit rate, per-flow credit registers).
 *
 * PNA has no timers a program can arm: credit pacing stays in the agent; the
 * NIC only polices (p4src/README.md, "NIC edge (PNA)").
 *
 * Build (Makefile: make p4-nic):
 *   p4c-bm2-pna --p4runtime-files flexpass_nic.p4info.txtpb -o flexpass_nic.json p4src/pna/flexpass_nic.p4
 *   p4c-dpdk --arch pna -DFLEXPASS_PNA_DPDK -o flexpass_nic.spec p4src/pna/flexpass_nic.p4
 */
#include <core.p4>
/* Each backend's own pna.p4: DPDK's adds the meter's dpdk_execute(); BMv2's
 * (p4c-bm2-pna defines __TARGET_BMV2__) has the metadata pna_nic fills in
 * (istd.recirculated) and a package without the pre control.  The program
 * uses only what all three have (istd.input_port, istd.parser_error). */
#if defined(FLEXPASS_PNA_DPDK)
#include <dpdk/pna.p4>
#define PNA_DEPARSER_HDR in
#elif defined(__TARGET_BMV2__)
#include <bmv2/pna.p4>
#define PNA_NO_PRE_CONTROL
#define PNA_DEPARSER_HDR inout
#else
#include <pna.p4>
#define PNA_DEPARSER_HDR in
#endif

#include "../shared/define.p4"
#include "../shared/header.p4"
#include "include/metadata.p4"
#include "include/parser.p4"
#include "include/control/classifier.p4"
#include "include/control/credit_meter.p4"

#ifndef PNA_NO_PRE_CONTROL
control FlexPassNicPre(in headers_t hdr,
                       inout flexpass_nic_meta_t meta,
                       in pna_pre_input_metadata_t istd,
                       inout pna_pre_output_metadata_t ostd) {
    apply { }
}
#endif

control FlexPassNicMain(inout headers_t hdr,
                        inout flexpass_nic_meta_t meta,
                        in pna_main_input_metadata_t istd,
                        inout pna_main_output_metadata_t ostd) {

    /* Indexed by the switch's EVT_* ids plus the NIC's (include/metadata.p4). */
    @name(".nic_events")
    Register<count_t, bit<32>>(NIC_EVT_COUNT) nic_events;

    /* Packets and IPv4 bytes per (kind, colour) that left the NIC: CLASS_INDEX. */
    @name(".class_packets")
    Register<count_t, bit<32>>(CLASS_COUNTER_SIZE) class_packets;
    @name(".class_bytes")
    Register<count_t, bit<32>>(CLASS_COUNTER_SIZE) class_bytes;

    NicClassifier()  classifier_ctl;
    NicCreditMeter() credit_meter_ctl;

    PortIdUint_t out_port = 0;
    bool has_port = false;

    /* Host <-> network: the port a packet leaves by, per input port. */
    @name(".send_to")
    action send_to(PortId_t port) {
        send_to_port(port);
        out_port = (PortIdUint_t)port;
        has_port = true;
    }

    @name(".no_port")
    action no_port() {
        has_port = false;
    }

    @name(".nic_port")
    table nic_port {
        key = {
            istd.input_port : exact @name("input_port");
        }
        actions = {
            send_to;
            no_port;
        }
        default_action = no_port();
        size = MAX_PORTS;
    }

    action drop(bit<32> evt) {
        COUNT(nic_events, evt, 1);
        drop_packet();
    }

    apply {
        /* Invariant: every packet that leaves the NIC parsed without error,
         * and a FlexPass packet has a header of the version we speak whose length matches UDP's, and a
         * CREDIT has its body.  (One test per `if`: p4c-dpdk cannot unroll
         * the compound condition.) */
        bool bad_flexpass = false;
        if (hdr.flexpass.isValid()) {
            COUNT(nic_events, EVT_FLEXPASS_SEEN, 1);
            if (hdr.flexpass.version != FLEXPASS_VERSION) {
                bad_flexpass = true;
            }
            if (hdr.flexpass.length != hdr.udp.len - 8) {
                bad_flexpass = true;
            }
            if (hdr.flexpass.msg_type == FLEXPASS_TYPE_CREDIT) {
                if (!hdr.credit.isValid()) {
                    bad_flexpass = true;
                }
                /* DPDK SWX's extract does not check the packet's length (no
                 * parser error there): a CREDIT shorter than its body is caught
                 * by its own length, which the check above ties to UDP's. */
                if (hdr.flexpass.length < CREDIT_MSG_MIN) {
                    bad_flexpass = true;
                }
            }
        }
        bool ipv4 = false;
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.version == 4) {
                ipv4 = true;
            }
        }
        if (istd.parser_error != error.NoError) {
            drop(EVT_PARSER_ERROR);    /* a truncated header of any kind */
        } else if (bad_flexpass) {
            drop(EVT_BAD_FLEXPASS);
        } else {
            /* Not IPv4 (ARP, IPv6): counted, and passed as legacy at class of
             * service 0 (a host's NIC must not cut ARP, unlike the L3 switch). */
            count_t ip_bytes = 0;
            if (ipv4) {
                classifier_ctl.apply(hdr, meta);
                ip_bytes = (count_t)hdr.ipv4.total_len;
            } else {
                COUNT(nic_events, EVT_NOT_IPV4, 1);
                meta.qid = 0;
                meta.color = COLOR_GREEN;
                meta.kind = KIND_LEGACY;
            }
            nic_port.apply();
            if (!has_port) {
                drop(EVT_NO_PORT);
            } else {
                bool credit_drop;
                credit_meter_ctl.apply(hdr, meta, out_port, credit_drop);
                if (credit_drop) {
                    drop_packet();
                } else {
                    COUNT(class_packets, CLASS_INDEX(meta.kind, meta.color), 1);
                    COUNT(class_bytes, CLASS_INDEX(meta.kind, meta.color), ip_bytes);
                    ostd.class_of_service = (ClassOfService_t)(ClassOfServiceUint_t)meta.qid;
                }
            }
        }
    }
}

PNA_NIC(FlexPassNicParser(),
#ifndef PNA_NO_PRE_CONTROL
        FlexPassNicPre(),
#endif
        FlexPassNicMain(),
        FlexPassNicDeparser()) main;
