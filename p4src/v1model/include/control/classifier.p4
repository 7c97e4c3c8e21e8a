/*
 * Classifier: DSCP -> (queue, colour, kind).  The table is the whole policy:
 * profile flexpass (credit Q0 / FlexPass data+control Q1, reactive data red /
 * legacy Q2), naive (credits + one shared data queue, nothing red), ppt and
 * flashpass differ only in the entries the control plane writes.  DSCP values without an entry take the default action, which the
 * control plane sets to the legacy class (docs/protocol.md §10: "unassigned
 * DSCP values are legacy").
 */
#ifndef FLEXPASS_CLASSIFIER_P4_
#define FLEXPASS_CLASSIFIER_P4_

control Classifier(in headers_t hdr,
                   inout flexpass_meta_t meta,
                   inout standard_metadata_t standard_metadata) {

    /* qid: BMv2 priority queue index (highest index is served first);
     * color: COLOR_GREEN / COLOR_RED; kind: KIND_*. */
    @name(".set_class")
    action set_class(qid_t qid, color_t color, kind_t kind) {
        meta.qid = qid;
        meta.color = color;
        meta.kind = kind;
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

    /* Colour by ECN code point, after the DSCP class: FlashPass (§III-C) marks
     * an over-provisioned emulation packet Not-ECT and an ordinary one ECT(0),
     * and the emulation queue drops the Not-ECT ones first.  Key: the queue the
     * DSCP chose and the ECN field; default: the DSCP's colour stays.  The
     * control plane writes entries for profile flashpass only (and the default
     * in every profile, so that switching profiles removes them). */
    @name(".set_color")
    action set_color(color_t color) {
        meta.color = color;
    }

    @name(".keep_color")
    action keep_color() {
    }

    @name(".ecn_color")
    table ecn_color {
        key = {
            meta.qid      : exact @name("qid");
            hdr.ipv4.ecn  : exact @name("ecn");
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
        standard_metadata.priority = meta.qid;
    }
}

#endif
