/*
 * Credit rate limiter (ExpressPass §3.1, FlexPass §4.1): a byte meter per
 * egress port, configured over BfRt to w_q·C·84/(84 + max frame) with a
 * burst of two credits, in the bytes the meter counts (the frame with its
 * FCS, without preamble and IFG).  Credits that are not GREEN are dropped and
 * counted in credit_dropped[PORT_QUEUE_INDEX(port, qid)].  The traffic
 * manager also shapes the credit queue to the same rate
 * (tf1.tm.queue.sched_shaping); the meter polices what enters it.
 *
 * Meter and counters are per pipe; the index is the port within the pipe
 * (the config's dev_ports 0..MAX_PORTS-1, i.e. pipe 0).
 */
#ifndef FLEXPASS_TNA_CREDIT_METER_P4_
#define FLEXPASS_TNA_CREDIT_METER_P4_

control CreditMeter(inout flexpass_ig_meta_t meta,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    @name(".credit_meter")
    Meter<bit<6>>(MAX_PORTS, MeterType_t.BYTES) credit_meter;

    @name(".credit_dropped")
    Counter<bit<32>, pq_index_t>(PORT_QUEUE_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) credit_dropped;

    apply {
        if (meta.bridged.kind == KIND_CREDIT) {
            bit<8> color = credit_meter.execute(ig_tm_md.ucast_egress_port[5:0]);
            if (color != (bit<8>)MeterColor_t.GREEN) {
                meta.pq_index = PORT_QUEUE_INDEX(ig_tm_md.ucast_egress_port, meta.bridged.qid);
                credit_dropped.count(meta.pq_index);
                ig_dprsr_md.drop_ctl = 1;
            }
        }
    }
}

#endif
