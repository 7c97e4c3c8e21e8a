/*
 * Classifier: DSCP -> (queue, colour, kind), the same table and entries as
 * the v1model program (p4src/v1model/include/control/classifier.p4): the
 * profiles (flexpass, naive, ppt, flashpass) differ only in entries;
 * unassigned DSCP values take the default action (legacy).  Then
 * ecn_color (FlashPass) may turn a packet red by its ECN code point.
 *
 * Tofino: qid goes to ig_tm_md.qid (the ingress queue of the egress port;
 * strict priority, DWRR weights and the credit shaper belong to the traffic
 * manager, tf1.tm.queue.*), and the colour to ig_tm_md.packet_color for the
 * TM's colour drop limits (red dropped at the selective-drop threshold).
 */
#ifndef FLEXPASS_TNA_CLASSIFIER_P4_
#define FLEXPASS_TNA_CLASSIFIER_P4_

control Classifier(in headers_t hdr,
                   inout flexpass_ig_meta_t meta,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    @name(".set_class")
    action set_class(qid_t qid, color_t color, kind_t kind) {
        meta.bridged.qid = qid;
        meta.bridged.color = color;
        meta.bridged.kind = kind;
        ig_tm_md.qid = (QueueId_t)qid;
    }

    @name(".classifier")
    table classifier {
        key = {
            hdr.ipv4.dscp : exact @name("dscp");
        }
        actions = {
            set_class;
        }
        default_action = set_class(0, COLOR_GREEN, KIND_LEGACY);
        size = 64;
    }

    /* Colour by ECN code point, after the DSCP class (FlashPass §III-C: an
     * over-provisioned emulation packet is Not-ECT, an ordinary one ECT(0);
     * the emulation queue's colour drop limit drops the red ones first).
     * Same table, keys and actions as the v1model program; entries for profile
     * flashpass only, the default in every profile. */
    @name(".set_color")
    action set_color(color_t color) {
        meta.bridged.color = color;
    }

    @name(".keep_color")
    action keep_color() {
    }

    @name(".ecn_color")
    table ecn_color {
        key = {
            meta.bridged.qid : exact @name("qid");
            hdr.ipv4.ecn     : exact @name("ecn");
        }
        actions = {
            set_color;
            keep_color;
        }
        default_action = keep_color();
        size = 32;
    }

    apply {
        classifier.apply();
        ecn_color.apply();
        if (meta.bridged.color == COLOR_RED) {
            ig_tm_md.packet_color = TM_COLOR_RED;
        } else {
            ig_tm_md.packet_color = meta.bridged.color;
        }
    }
}

#endif
