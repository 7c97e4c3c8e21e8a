/*
 * Credit rate limiter (ExpressPass §3.1, FlexPass §4.1): one byte meter per
 * egress port, configured by the control plane (P4Runtime MeterConfig) to
 * w_q * C * 84 / (84 + 1538) bits/s with a burst of two credits, converted to
 * the bytes BMv2 counts (see p4src/README.md).  Credits whose colour is not
 * GREEN are dropped and counted in `credit_dropped`.  An unconfigured meter
 * cell returns GREEN in BMv2, i.e. a port without a config is not limited.
 */
#ifndef FLEXPASS_CREDIT_METER_P4_
#define FLEXPASS_CREDIT_METER_P4_

control CreditMeter(inout flexpass_meta_t meta,
                    inout standard_metadata_t standard_metadata) {

    @name(".credit_meter")
    meter(MAX_PORTS, MeterType.bytes) credit_meter;

    @name(".credit_dropped")
    counter(PORT_QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) credit_dropped;

    apply {
        if (meta.kind == KIND_CREDIT) {
            bit<2> color;
            credit_meter.execute_meter<bit<2>>((bit<32>)standard_metadata.egress_spec, color);
            if (color != V1MODEL_METER_COLOR_GREEN) {
                credit_dropped.count(port_queue_index(standard_metadata.egress_spec, meta.qid));
                mark_to_drop(standard_metadata);
            }
        }
    }
}

#endif
