/*
 * Classifier: DSCP -> (queue, colour, kind), the same table and entries as
 * the v1model program (p4src/v1model/include/control/classifier.p4): the
 * FlexPass 3-queue profile and the naive ExpressPass profile differ only in
 * entries; unassigned DSCP values take the default action (legacy).
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

    apply {
        classifier.apply();
        if (meta.bridged.color == COLOR_RED) {
            ig_tm_md.packet_color = TM_COLOR_RED;
        } else {
            ig_tm_md.packet_color = meta.bridged.color;
        }
    }
}

#endif
