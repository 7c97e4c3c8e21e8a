/*
 * FlexPass switch pipeline for v1model / BMv2 simple_switch(_grpc).
 *
 * Ingress: parse -> classify by DSCP (queue, colour, kind), pFabric rank and
 * flow key for flexpass_switch's TM -> route (LPM,
 * symmetric-hash ECMP, TTL) -> meter credits per egress port.
 * Egress: ECN marking above K, selective dropping of red packets above the
 * red threshold, per-port/queue counters, source MAC rewrite.
 *
 * Build:  p4c-bm2-ss --p4runtime-files build/p4/flexpass.p4info.txtpb \
 *             -o build/p4/flexpass.json p4src/v1model/flexpass.p4
 * See p4src/README.md for the tables and the BMv2 behaviour they rely on.
 */
#include <core.p4>
#include <v1model.p4>

#include "../shared/define.p4"
#include "../shared/header.p4"
#include "include/metadata.p4"
#include "include/parser.p4"
#include "include/checksum.p4"
#include "include/control/counters.p4"
#include "include/control/classifier.p4"
#include "include/control/forwarding.p4"
#include "include/control/credit_meter.p4"
#include "include/control/ecn_red.p4"
#include "include/control/pfabric.p4"

control FlexPassIngress(inout headers_t hdr,
                        inout flexpass_meta_t meta,
                        inout standard_metadata_t standard_metadata) {

    @name(".ingress_events")
    counter(EVT_COUNT, CounterType.packets) ingress_events;

    Classifier()  classifier_ctl;
    Forwarding()  forwarding_ctl;
    CreditMeter() credit_meter_ctl;
    PfabricRank() pfabric_rank_ctl;

    action drop(bit<32> evt) {
        ingress_events.count(evt);
        mark_to_drop(standard_metadata);
    }

    apply {
        if (standard_metadata.parser_error != error.NoError) {
            ingress_events.count(EVT_PARSER_ERROR);
        }
        if (hdr.flexpass.isValid()) {
            ingress_events.count(EVT_FLEXPASS_SEEN);
        }
        if (!hdr.ipv4.isValid() || hdr.ipv4.version != 4) {
            drop(EVT_NOT_IPV4);
        } else if (hdr.ipv4.ihl != 5) {
            drop(EVT_IPV4_OPTIONS);
        } else if (standard_metadata.checksum_error == 1) {
            drop(EVT_BAD_CHECKSUM);
        } else if (hdr.ipv4.ttl <= 1) {
            drop(EVT_TTL_EXPIRED);
        } else {
            classifier_ctl.apply(hdr, meta, standard_metadata);
            pfabric_rank_ctl.apply(hdr, meta);
            bool routed;
            forwarding_ctl.apply(hdr, meta, standard_metadata, routed);
            if (!routed) {
                drop(EVT_NO_ROUTE);
            } else {
                credit_meter_ctl.apply(meta, standard_metadata);
            }
        }
    }
}

control FlexPassEgress(inout headers_t hdr,
                       inout flexpass_meta_t meta,
                       inout standard_metadata_t standard_metadata) {
    EcnRed() ecn_red_ctl;

    apply {
        ecn_red_ctl.apply(hdr, meta, standard_metadata);
    }
}

V1Switch(FlexPassParser(),
         FlexPassVerifyChecksum(),
         FlexPassIngress(),
         FlexPassEgress(),
         FlexPassComputeChecksum(),
         FlexPassDeparser()) main;
