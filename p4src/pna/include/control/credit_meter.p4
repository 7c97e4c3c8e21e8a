/*
 * Credit rate limiter at the NIC edge (ExpressPass §3.1, FlexPass §4.1/§4.3):
 * one byte meter per output port, configured by the control plane to the
 * switch's rate, w_q * C * 84/(84 + F) with a burst of credit_meter_burst_packets
 * credits (B + 1 for credit batches of B), in the bytes the meter counts
 * (control-plane/flexpass_cp/config/derive.py: meter_cir_bytes_per_s,
 * meter_burst_bytes; the one place the rate is computed).  A credit the meter
 * does not colour GREEN is dropped and counted in `credit_dropped`; a credit
 * that passes is counted per flow in the `flow_credits` registers.
 *
 * DPDK's meter needs the packet length: its pna.p4 has dpdk_execute() for
 * that, BMv2's meter counts the frame itself.  The length given is the frame
 * without FCS (IPv4 total length + 14), what BMv2 counts.
 * Invariant on DPDK: CIR = PIR and CBS = PBS (the control plane writes them
 * so).  p4c-dpdk numbers the PNA colours RED 0, GREEN 1, YELLOW 2, while
 * DPDK's rte_color is GREEN 0, YELLOW 1, RED 2.  The .spec therefore meters
 * colour-aware with input 1 (DPDK yellow: the peak bucket only) and tests
 * output == 1: "GREEN" here is DPDK yellow, that is, within PIR.
 */
#ifndef FLEXPASS_NIC_CREDIT_METER_P4_
#define FLEXPASS_NIC_CREDIT_METER_P4_

/* Flow slot of the per-flow registers: x = src ^ dst ^ flow_id folded to
 * 12 bits, x[11:0] ^ x[23:12] ^ x[31:24].  A plain fold, not
 * the Hash extern: the PNA include both backends read offers no algorithm
 * both implement, and the agent recomputes the slot of its flows. */
bit<32> flow_slot(in bit<32> src, in bit<32> dst, in bit<32> flow_id) {
    bit<32> x = src ^ dst ^ flow_id;
    /* = x[11:0] ^ x[23:12] ^ x[31:24] in 32-bit arithmetic (p4c-dpdk
     * miscompiles the XOR of bit slices). */
    return (x ^ (x >> 12) ^ (x >> 24)) & (FLOW_SLOTS - 1);
}

control NicCreditMeter(in headers_t hdr,
                       inout flexpass_nic_meta_t meta,
                       in PortIdUint_t out_port,
                       out bool dropped) {

    @name(".credit_meter")
    Meter<bit<32>>(MAX_PORTS, PNA_MeterType_t.BYTES) credit_meter;

    /* Credits dropped per PORT_QUEUE_INDEX(port, qid), as the switch's counter. */
    @name(".credit_dropped")
    Register<count_t, bit<32>>(PORT_QUEUE_COUNTER_SIZE) credit_dropped;

    /* Credits passed per flow slot, and the flow id of the last credit counted
     * in the slot (the agent's check for a shared slot). */
    @name(".flow_credits")
    Register<bit<32>, bit<32>>(FLOW_SLOTS) flow_credits;
    @name(".flow_credit_id")
    Register<bit<32>, bit<32>>(FLOW_SLOTS) flow_credit_id;

    apply {
        dropped = false;
        /* FlashPass's EMULATION packets share the credit DSCP, but the agent's emulation
         * queue limits them (its 2-packet selective drop): one limiter, not two on
         * different clocks (docs/smartnic.md).  The header is well-formed here (bad
         * FlexPass was dropped before). */
        bool emulation = false;
        if (hdr.flexpass.isValid()) {
            if (hdr.flexpass.msg_type == FLEXPASS_TYPE_EMULATION) {
                emulation = true;
            }
        }
        if (meta.kind == KIND_CREDIT && !emulation) {
            bit<32> port = (bit<32>)out_port[5:0];
#ifdef FLEXPASS_PNA_DPDK
            PNA_MeterColor_t color = credit_meter.dpdk_execute(port,
                (bit<32>)hdr.ipv4.total_len + 14);
#else
            PNA_MeterColor_t color = credit_meter.execute(port);
#endif
            if (color != PNA_MeterColor_t.GREEN) {
                COUNT(credit_dropped, (bit<32>)PORT_QUEUE_INDEX(out_port, meta.qid), 1);
                dropped = true;
            } else if (hdr.flexpass.isValid()) {
                bit<32> slot = flow_slot(hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                         hdr.flexpass.flow_id);
                COUNT(flow_credits, slot, 1);
                flow_credit_id.write(slot, hdr.flexpass.flow_id);
            }
        }
    }
}

#endif
