/*
 * Counter indexing shared by the ingress and egress controls.
 *
 * Per (egress port, queue) counters are indirect `counter` arrays of
 * PORT_QUEUE_COUNTER_SIZE = MAX_PORTS * QUEUES_PER_PORT cells, type
 * packets_and_bytes, index PORT_QUEUE_INDEX(port, qid) (define.p4):
 *   forwarded      (egress)  packets that left the egress pipeline
 *   ecn_marked     (egress)  ECT(0)/ECT(1) packets re-marked CE
 *   red_dropped    (egress)  red packets dropped above the red threshold
 *   credit_dropped (ingress) credits dropped by the credit meter
 * and `ingress_events` (EVT_COUNT cells, see define.p4).
 */
#ifndef FLEXPASS_COUNTERS_P4_
#define FLEXPASS_COUNTERS_P4_

bit<32> port_queue_index(in bit<9> port, in qid_t qid) {
    return (bit<32>)PORT_QUEUE_INDEX(port, qid);
}

#endif
