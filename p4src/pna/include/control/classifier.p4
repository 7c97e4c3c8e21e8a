/*
 * NIC classifier: DSCP -> (queue, colour, kind), the switch's table
 * (p4src/v1model/include/control/classifier.p4) with the same P4Runtime
 * names, so the control plane writes the same entries from the same DSCP
 * plan: credit, FlexPass data (proactive green, reactive = unscheduled red),
 * control, and legacy for every DSCP without an entry (the default action).
 */
#ifndef FLEXPASS_NIC_CLASSIFIER_P4_
#define FLEXPASS_NIC_CLASSIFIER_P4_

control NicClassifier(in headers_t hdr,
                      inout flexpass_nic_meta_t meta) {

    @name(".set_class")
    action set_class(qid_t qid, color_t color, kind_t kind) {
        meta.qid = qid;
        meta.color = color;
        meta.kind = kind;
    }

    @name(".classifier")
    table classifier {
        key = {
            /* A metadata copy made by the parser: p4c-dpdk's context.json
             * generator crashes on the header field (or a copy made here). */
            meta.dscp : exact @name("dscp");
        }
        actions = {
            set_class;
        }
        default_action = set_class(0, COLOR_GREEN, KIND_LEGACY);
        size = 64;
    }

    apply {
        classifier.apply();
    }
}

#endif
