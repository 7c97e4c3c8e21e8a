/*
 * FlexPass switch pipeline for Tofino (TNA) and Tofino2 (T2NA): one program,
 * the architecture picked by the compiler's __TARGET_TOFINO__.
 *
 * Same features and control-plane names as p4src/v1model/flexpass.p4
 * (classifier, routing + ecmp_selector, credit_meter, queue_thresholds,
 * port_smac, the counters), so flexpass_cp derives both targets' entries
 * from one config.  What differs on Tofino (p4src/README.md, "Tofino"):
 *   - the classifier writes ig_tm_md.qid and ig_tm_md.packet_color: the
 *     traffic manager does strict priority, DWRR, credit shaping and the
 *     selective (colour) drop of red packets at admission (tf1.tm.* tables);
 *   - the ECMP selector is keyed by a symmetric hash computed explicitly
 *     (@symmetric on the selector's own Hash is silently ignored);
 *   - qdepth > K is a saturating subtract (enq_qdepth is in 80-byte cells
 *     on Tofino, 176-byte cells on Tofino2);
 *   - ingress_events counts one event per packet (a counter runs once per
 *     packet on Tofino): the drop reason, else parser error, else FlexPass.
 *
 * Build:  make p4-tofino
 *   p4c --target tofino  --arch tna  -o build/p4-tofino/tofino  p4src/tna/flexpass.p4
 *   p4c --target tofino2 --arch t2na -o build/p4-tofino/tofino2 p4src/tna/flexpass.p4
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#include "../shared/define.p4"
#include "../shared/header.p4"
#include "include/types.p4"
#include "include/parser.p4"
#include "include/control/classifier.p4"
#include "include/control/forwarding.p4"
#include "include/control/credit_meter.p4"
#include "include/control/ecn_red.p4"

control FlexPassIngress(inout headers_t hdr,
                        inout flexpass_ig_meta_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* EVT_* of define.p4; one count per packet (see the header comment). */
    @name(".ingress_events")
    Counter<bit<32>, evt_t>(EVT_COUNT, CounterType_t.PACKETS) ingress_events;

    Classifier()  classifier_ctl;
    Forwarding()  forwarding_ctl;
    CreditMeter() credit_meter_ctl;

    action note(evt_t evt) {
        meta.evt = evt;
        meta.count_evt = true;
    }

    action drop(evt_t evt) {
        note(evt);
        ig_dprsr_md.drop_ctl = 1;
    }

    apply {
        meta.bridged.setValid();
        meta.count_evt = false;
        /* Informational events first; a drop reason below overrides them. */
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) {
            note(EVT_PARSER_ERROR);
        } else if (hdr.flexpass.isValid()) {
            note(EVT_FLEXPASS_SEEN);
        }
        if (!hdr.ipv4.isValid() || hdr.ipv4.version != 4) {
            drop(EVT_NOT_IPV4);
        } else if (hdr.ipv4.ihl != 5) {
            drop(EVT_IPV4_OPTIONS);
        } else if (meta.checksum_err) {
            drop(EVT_BAD_CHECKSUM);
        } else if (hdr.ipv4.ttl <= 1) {
            drop(EVT_TTL_EXPIRED);
        } else {
            classifier_ctl.apply(hdr, meta, ig_tm_md);
            bool routed;
            forwarding_ctl.apply(hdr, meta, ig_tm_md, routed);
            if (!routed) {
                drop(EVT_NO_ROUTE);
            } else {
                credit_meter_ctl.apply(meta, ig_tm_md, ig_dprsr_md);
            }
        }
        if (meta.count_evt) {
            ingress_events.count(meta.evt);
        }
    }
}

control FlexPassEgress(inout flexpass_eg_headers_t hdr,
                       inout flexpass_eg_meta_t meta,
                       in egress_intrinsic_metadata_t eg_intr_md,
                       in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                       inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                       inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    EcnRed() ecn_red_ctl;

    apply {
        ecn_red_ctl.apply(hdr, meta, eg_intr_md, eg_dprsr_md);
    }
}

Pipeline(FlexPassIngressParser(),
         FlexPassIngress(),
         FlexPassIngressDeparser(),
         FlexPassEgressParser(),
         FlexPassEgress(),
         FlexPassEgressDeparser()) pipe;

Switch(pipe) main;
