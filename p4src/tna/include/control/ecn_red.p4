/*
 * Egress: ECN marking above K, per (egress port, queue), the source MAC of
 * the port and the per-queue counters (same names as v1model).
 *
 * eg_intr_md.enq_qdepth is the queue depth at enqueue in cells (80 bytes on
 * Tofino, 176 on Tofino2); the control plane writes K in cells.  Tofino's
 * gateways cannot compare a header field with a table result, so
 * "qdepth > threshold" is computed as a saturating subtract (|-|) in an
 * action, non-zero exactly when the depth exceeds the threshold.
 *
 * Selective dropping of red packets is the traffic manager's job on Tofino
 * (queue colour drop limit, tf1.tm.queue.color, at admission: a red packet
 * above the threshold never takes buffer).  The egress red check of the
 * v1model program is kept with the same table and action, and the control
 * plane leaves its threshold at "none" on Tofino, so red_dropped counts
 * only egress drops (TM drops are in tf1.tm.counter.queue).
 */
#ifndef FLEXPASS_TNA_ECN_RED_P4_
#define FLEXPASS_TNA_ECN_RED_P4_

control EcnRed(inout flexpass_eg_headers_t hdr,
               inout flexpass_eg_meta_t meta,
               in egress_intrinsic_metadata_t eg_intr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

    @name(".forwarded")
    Counter<bit<32>, pq_index_t>(PORT_QUEUE_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) forwarded;
    @name(".ecn_marked")
    Counter<bit<32>, pq_index_t>(PORT_QUEUE_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) ecn_marked;
    @name(".red_dropped")
    Counter<bit<32>, pq_index_t>(PORT_QUEUE_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) red_dropped;

    /* Thresholds in enq_qdepth units (cells). */
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

    /* The saturating subtracts run in an action of their own (an ALU writing
     * PHV, operands from PHV: an ALU cannot subtract action data).  Written
     * in apply{}, the compiler folds them into the gateway conditions below,
     * which a gateway cannot evaluate ("condition expression too complex"). */
    action excess() {
        meta.ecn_excess = eg_intr_md.enq_qdepth |-| meta.ecn_threshold;
        meta.red_excess = eg_intr_md.enq_qdepth |-| meta.red_threshold;
    }

    @hidden
    table queue_excess {
        actions = { excess; }
        const default_action = excess();
        size = 1;
    }

    @name(".queue_thresholds")
    table queue_thresholds {
        key = {
            eg_intr_md.egress_port : exact @name("egress_port");
            hdr.bridged.qid        : exact @name("qid");
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
            eg_intr_md.egress_port : exact @name("egress_port");
        }
        actions = {
            set_smac;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    apply {
        meta.pq_index = PORT_QUEUE_INDEX(eg_intr_md.egress_port, hdr.bridged.qid);
        queue_thresholds.apply();
        queue_excess.apply();
        if (hdr.bridged.color == COLOR_RED && meta.red_excess != 0) {
            red_dropped.count(meta.pq_index);
            eg_dprsr_md.drop_ctl = 1;
        } else {
            if (hdr.ipv4.isValid() &&
                (hdr.ipv4.ecn == ECN_ECT0 || hdr.ipv4.ecn == ECN_ECT1) &&
                meta.ecn_excess != 0) {
                hdr.ipv4.ecn = ECN_CE;
                ecn_marked.count(meta.pq_index);
            }
            port_smac.apply();
            forwarded.count(meta.pq_index);
        }
    }
}

#endif
