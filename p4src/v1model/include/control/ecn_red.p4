/*
 * Egress AQM: ECN marking above K and colour-aware (selective) dropping of
 * red packets above the red threshold, per (egress port, queue).
 *
 * The queue depth is standard_metadata.enq_qdepth: the number of PACKETS in
 * this packet's (port, priority) queue when it was enqueued, not counting
 * itself.  Thresholds are therefore in packets; the control plane converts
 * the byte thresholds of the config (ceil(bytes / 1538)).
 *
 * BMv2 limitation: egress runs after the queue, so a red packet "dropped"
 * here has already occupied a queue slot; on a hardware switch the colour
 * threshold is applied at admission.  The observable behaviour (red packets
 * above the threshold never leave the switch) is the same.
 */
#ifndef FLEXPASS_ECN_RED_P4_
#define FLEXPASS_ECN_RED_P4_

control EcnRed(inout headers_t hdr,
               inout flexpass_meta_t meta,
               inout standard_metadata_t standard_metadata) {

    @name(".forwarded")
    counter(PORT_QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) forwarded;
    @name(".ecn_marked")
    counter(PORT_QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) ecn_marked;
    @name(".red_dropped")
    counter(PORT_QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) red_dropped;

    /* Thresholds in packets (BMv2 enq_qdepth units).  A packet is marked CE
     * when enq_qdepth > ecn_threshold, and a red packet is dropped when
     * enq_qdepth > red_threshold. */
    @name(".set_thresholds")
    action set_thresholds(bit<19> ecn_threshold, bit<19> red_threshold) {
        meta.ecn_threshold = ecn_threshold;
        meta.red_threshold = red_threshold;
    }

    /* No entry: no AQM on that queue. */
    @name(".no_aqm")
    action no_aqm() {
        meta.ecn_threshold = QDEPTH_NONE;
        meta.red_threshold = QDEPTH_NONE;
    }

    @name(".queue_thresholds")
    table queue_thresholds {
        key = {
            standard_metadata.egress_port : exact @name("egress_port");
            meta.qid                      : exact @name("qid");
        }
        actions = {
            set_thresholds;
            @defaultonly no_aqm;
        }
        const default_action = no_aqm();
        size = 512;
    }

    @name(".set_smac")
    action set_smac(mac_addr_t smac) {
        hdr.ethernet.src_addr = smac;
    }

    /* Source MAC of each egress port (no entry: unchanged). */
    @name(".port_smac")
    table port_smac {
        key = {
            standard_metadata.egress_port : exact @name("egress_port");
        }
        actions = {
            set_smac;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    apply {
        bit<32> idx = port_queue_index(standard_metadata.egress_port, meta.qid);
        queue_thresholds.apply();
        if (meta.color == COLOR_RED &&
            standard_metadata.enq_qdepth > meta.red_threshold) {
            red_dropped.count(idx);
            mark_to_drop(standard_metadata);
        } else {
            if (hdr.ipv4.isValid() &&
                (hdr.ipv4.ecn == ECN_ECT0 || hdr.ipv4.ecn == ECN_ECT1) &&
                standard_metadata.enq_qdepth > meta.ecn_threshold) {
                hdr.ipv4.ecn = ECN_CE;
                ecn_marked.count(idx);
            }
            port_smac.apply();
            forwarded.count(idx);
        }
    }
}

#endif
