"""Checks the Python FlexPass implementation against docs/protocol-vectors.json.

The same JSON file is verified by the Rust crate (host-agent/crates/
flexpass-wire/tests/vectors.rs), so both languages agree byte for byte and
error kind for error kind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.packet import Padding, Raw

from flexpass_cp import scapy_flexpass as fp
from flexpass_cp.dscp import DscpPlan, Ecn, PptPriority, TrafficClass, split_tos, tos
from flexpass_cp.scapy_flexpass import (
    FlexPass,
    FlexPassAck,
    FlexPassCredit,
    FlexPassCreditRequest,
    FlexPassData,
    FlexPassDecodeError,
    FlexPassEncodeError,
    FlexPassHello,
    FlexPassHelloAck,
    FlexPassReset,
    FlexPassSackBlock,
    decode,
    encode,
    validate,
)

REPO_ROOT = Path(__file__).resolve().parents[2]  # tests -> control-plane -> repo
VECTORS_PATH = REPO_ROOT / "docs" / "protocol-vectors.json"
VECTORS = json.loads(VECTORS_PATH.read_text())

VALID = VECTORS["valid"]
NONCANONICAL = VECTORS["valid_noncanonical"]
INVALID = VECTORS["invalid"]

TYPE_CODES = {"credit": 1, "ack": 4, "credit_request": 5, "credit_stop": 6, "hello": 7,
              "hello_ack": 8, "reset": 9, "emulation": 10, "emulation_credit": 11,
              "arbitration_request": 12, "arbitration_response": 13}
TRANSPORT = {"flexpass": 1, "expresspass": 2, "dctcp": 3, "ppt": 4, "flashpass": 5,
             "pfabric": 6, "pase": 7}
STATUS = {"accepted": 0, "unsupported_transport": 1, "refused": 2, "retry": 3}
REASON = {"unspecified": 0, "unknown_flow": 1, "protocol_violation": 2, "shutdown": 3}
SUBFLOW = {"proactive": 0, "reactive": 1}


def _ids(vectors):
    return [v["name"] for v in vectors]


def _type_code(pkt):
    if pkt["type"] == "data":
        return 2 if pkt["subflow"] == "proactive" else 3
    return TYPE_CODES[pkt["type"]]


def _flags(pkt):
    if pkt["type"] == "data":
        return ((0x01 if pkt["fin"] else 0) | (0x04 if pkt["retransmission"] else 0)
                | (0x40 if "priority" in pkt else 0)
                | (0x80 if pkt["subflow"] == "reactive" and not pkt["payload"] and not pkt["fin"]
                   else 0))
    if pkt["type"] == "ack":
        return 0x02 if pkt["ece"] else 0
    if pkt["type"] == "hello":
        return ((0x08 if "conn" in pkt else 0) | (0x10 if "cookie" in pkt else 0)
                | (0x20 if pkt.get("idle") else 0))
    if pkt["type"] == "hello_ack" and "cookie" in pkt:
        return 0x10
    return 0


# ---------------------------------------------------------------------------
# File-level checks
# ---------------------------------------------------------------------------


def test_file_metadata():
    assert VECTORS["spec"] == "docs/protocol.md"
    assert VECTORS["protocol_version"] == fp.VERSION
    assert VECTORS["default_udp_port"] == fp.FLEXPASS_UDP_PORT == 7890
    assert tuple(VECTORS["error_kinds"]) == fp.ERROR_KINDS


def test_coverage():
    assert {v["header"]["type_code"] for v in VALID} == set(range(1, 14))
    assert len(INVALID) >= 15
    assert {v["error"] for v in INVALID} == set(fp.ERROR_KINDS)
    names = _ids(VALID) + _ids(NONCANONICAL) + _ids(INVALID)
    assert len(names) == len(set(names))


# ---------------------------------------------------------------------------
# Valid vectors: strict codec
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("vec", VALID, ids=_ids(VALID))
def test_valid_decode_encode(vec):
    raw = bytes.fromhex(vec["hex"])
    validate(raw)
    assert decode(raw) == vec["packet"]
    assert encode(vec["packet"]) == raw
    assert fp.ethernet_wire_len(len(raw)) == vec["wire_len"]


# ---------------------------------------------------------------------------
# Valid vectors: Scapy dissection and building
# ---------------------------------------------------------------------------


def _check_scapy_fields(p, vec):
    """Compare every field of a dissected Scapy packet with the JSON vector."""
    hdr, pkt = vec["header"], vec["packet"]
    assert p.version == hdr["version"] == 1
    assert p.type == hdr["type_code"] == _type_code(pkt)
    assert int(p.flags) == hdr["flags"] == _flags(pkt)
    assert p.length == hdr["length"] == len(bytes.fromhex(vec["hex"]))
    assert p.flow_id == hdr["flow_id"] == pkt["flow_id"]
    assert Padding not in p, "no trailing bytes expected in a valid message"
    kind = pkt["type"]
    if kind == "credit":
        b = p[FlexPassCredit]
        assert b.credit_seq == pkt["credit_seq"]
        assert len(b.pad) == pkt["padding"]
        assert b.pad == bytes(pkt["padding"])
    elif kind == "data":
        b = p[FlexPassData]
        assert (b.flow_seq, b.subflow_seq, b.credit_seq, b.tsval) == (
            pkt["flow_seq"], pkt["subflow_seq"], pkt["credit_seq"], pkt["tsval"])
        assert bool(p.flags.FIN) == pkt["fin"]
        assert bool(p.flags.RETX) == pkt["retransmission"]
        assert bool(p.flags.PRIO) == ("priority" in pkt)
        if "priority" in pkt:
            assert b.priority == pkt["priority"]
        payload = bytes(b.payload)
        assert payload == bytes.fromhex(pkt["payload"])
        if payload:
            assert isinstance(b.payload, Raw)
    elif kind == "ack":
        b = p[FlexPassAck]
        assert b.subflow == SUBFLOW[pkt["subflow"]]
        assert bool(p.flags.ECE) == pkt["ece"]
        assert b.sack_count == len(pkt["sack"])
        assert b.reserved == 0
        assert (b.cum_ack, b.ack_seq, b.tsecr, b.flow_ack) == (
            pkt["cum_ack"], pkt["ack_seq"], pkt["tsecr"], pkt["flow_ack"])
        assert [[s.start, s.end] for s in b.sack] == pkt["sack"]
    elif kind == "credit_request":
        assert p[FlexPassCreditRequest].pending_bytes == pkt["pending_bytes"]
    elif kind == "credit_stop":
        assert len(p.payload) == 0
    elif kind == "hello":
        b = p[FlexPassHello]
        assert b.transport == TRANSPORT[pkt["transport"]]
        assert b.reserved == 0
        assert b.flow_size == pkt["flow_size"]
        conn = pkt.get("conn")
        if conn is None:
            assert b.getfieldval("conn_id") is None or not int(p.flags) & 0x08
        else:
            assert (b.conn_id, b.src_port, b.dst_port) == (conn["conn_id"], conn["src_port"], conn["dst_port"])
            assert b.role == {"open": 1, "reply": 2}[conn["role"]]
            assert b.conn_reserved == 0
        if "cookie" in pkt:
            assert b.cookie == pkt["cookie"]
        else:
            assert b.getfieldval("cookie") is None or not int(p.flags) & 0x10
    elif kind == "hello_ack":
        b = p[FlexPassHelloAck]
        assert b.transport == TRANSPORT[pkt["transport"]]
        assert b.status == STATUS[pkt["status"]]
        assert b.reserved == 0
        assert ("cookie" in pkt) == (pkt["status"] == "retry")
        if "cookie" in pkt:
            assert b.cookie == pkt["cookie"]
    elif kind == "emulation":
        b = p[fp.FlexPassEmulation]
        assert (b.emu_seq, b.timestamp, b.hold) == (pkt["emu_seq"], pkt["timestamp"], pkt["hold"])
    elif kind == "emulation_credit":
        b = p[fp.FlexPassEmulationCredit]
        assert b.count == len(pkt["grants"]) and b.reserved == 0
        assert [[g.emu_seq, g.timestamp] for g in b.grants] == pkt["grants"]
    elif kind == "arbitration_request":
        b = p[fp.FlexPassArbitrationRequest]
        assert (b.arb_seq, b.remaining, b.demand_bps) == (
            pkt["arb_seq"], pkt["remaining"], pkt["demand_bps"])
    elif kind == "arbitration_response":
        b = p[fp.FlexPassArbitrationResponse]
        assert (b.arb_seq, b.queue, b.reserved, b.reference_rate_bps) == (
            pkt["arb_seq"], pkt["queue"], 0, pkt["reference_rate_bps"])
    elif kind == "reset":
        b = p[FlexPassReset]
        assert b.reason == REASON[pkt["reason"]]
        assert b.reserved == 0
    else:
        pytest.fail(f"unknown type {kind}")


def _build_scapy(pkt):
    """Build a Scapy packet from the JSON fields by hand (length left to Scapy)."""
    hdr = FlexPass(type=_type_code(pkt), flags=_flags(pkt), flow_id=pkt["flow_id"])
    kind = pkt["type"]
    if kind == "credit":
        return hdr / FlexPassCredit(credit_seq=pkt["credit_seq"], pad=b"\x00" * pkt["padding"])
    if kind == "data":
        p = hdr / FlexPassData(flow_seq=pkt["flow_seq"], subflow_seq=pkt["subflow_seq"],
                               credit_seq=pkt["credit_seq"], tsval=pkt["tsval"],
                               priority=pkt.get("priority", 0))
        payload = bytes.fromhex(pkt["payload"])
        return p / Raw(payload) if payload else p
    if kind == "ack":
        return hdr / FlexPassAck(
            subflow=SUBFLOW[pkt["subflow"]], cum_ack=pkt["cum_ack"], ack_seq=pkt["ack_seq"],
            tsecr=pkt["tsecr"], flow_ack=pkt["flow_ack"],
            sack=[FlexPassSackBlock(start=s, end=e) for s, e in pkt["sack"]])
    if kind == "credit_request":
        return hdr / FlexPassCreditRequest(pending_bytes=pkt["pending_bytes"])
    if kind == "credit_stop":
        return hdr
    if kind == "hello":
        conn = pkt.get("conn")
        extra = {} if conn is None else {"conn_id": conn["conn_id"], "src_port": conn["src_port"],
                                         "dst_port": conn["dst_port"],
                                         "role": {"open": 1, "reply": 2}[conn["role"]]}
        if "cookie" in pkt:
            extra["cookie"] = pkt["cookie"]
        return hdr / FlexPassHello(transport=TRANSPORT[pkt["transport"]],
                                   flow_size=pkt["flow_size"], **extra)
    if kind == "hello_ack":
        extra = {"cookie": pkt["cookie"]} if "cookie" in pkt else {}
        return hdr / FlexPassHelloAck(transport=TRANSPORT[pkt["transport"]],
                                      status=STATUS[pkt["status"]], **extra)
    if kind == "emulation":
        return hdr / fp.FlexPassEmulation(emu_seq=pkt["emu_seq"], timestamp=pkt["timestamp"],
                                          hold=pkt["hold"])
    if kind == "emulation_credit":
        return hdr / fp.FlexPassEmulationCredit(
            grants=[fp.FlexPassEmulationGrant(emu_seq=q, timestamp=t) for q, t in pkt["grants"]])
    if kind == "arbitration_request":
        return hdr / fp.FlexPassArbitrationRequest(
            arb_seq=pkt["arb_seq"], remaining=pkt["remaining"], demand_bps=pkt["demand_bps"])
    if kind == "arbitration_response":
        return hdr / fp.FlexPassArbitrationResponse(
            arb_seq=pkt["arb_seq"], queue=pkt["queue"], reference_rate_bps=pkt["reference_rate_bps"])
    return hdr / FlexPassReset(reason=REASON[pkt["reason"]])


@pytest.mark.parametrize("vec", VALID, ids=_ids(VALID))
def test_valid_scapy_dissect(vec):
    raw = bytes.fromhex(vec["hex"])
    p = FlexPass(raw)
    _check_scapy_fields(p, vec)
    assert bytes(p) == raw


@pytest.mark.parametrize("vec", VALID, ids=_ids(VALID))
def test_valid_scapy_build(vec):
    raw = bytes.fromhex(vec["hex"])
    assert bytes(_build_scapy(vec["packet"])) == raw
    assert bytes(fp.to_scapy(vec["packet"])) == raw


@pytest.mark.parametrize("vec", VALID, ids=_ids(VALID))
def test_valid_over_ip_udp(vec):
    raw = bytes.fromhex(vec["hex"])
    frame = IP(dst="10.0.0.2") / UDP(sport=40000, dport=fp.FLEXPASS_UDP_PORT) / Raw(raw)
    p = IP(bytes(frame))
    assert FlexPass in p
    _check_scapy_fields(p[FlexPass], vec)
    assert fp.from_scapy(p) == vec["packet"]
    # Bound on the source port too (replies).
    q = IP(bytes(IP() / UDP(sport=fp.FLEXPASS_UDP_PORT, dport=40000) / Raw(raw)))
    assert FlexPass in q
    # IP total length = message + 28; Ethernet wire size per the spec formula.
    assert p.len == len(raw) + fp.IPV4_UDP_OVERHEAD
    assert fp.ethernet_wire_len_ip(p.len) == vec["wire_len"]


def test_udp_build_sets_ports_and_custom_port():
    p = IP() / UDP() / FlexPass(flow_id=1) / FlexPassCredit(credit_seq=2)
    q = IP(bytes(p))
    assert q[UDP].dport == q[UDP].sport == fp.FLEXPASS_UDP_PORT
    assert q[FlexPassCredit].credit_seq == 2
    validate(bytes(q[FlexPass]))
    try:
        fp.bind_port(9999)
        r = IP(bytes(IP() / UDP(sport=1234, dport=9999) / Raw(bytes(p[FlexPass]))))
        assert FlexPassCredit in r
    finally:
        fp.bind_port(fp.FLEXPASS_UDP_PORT)  # restore the build-time default ports
    assert IP(bytes(IP() / UDP() / FlexPass(type=6)))[UDP].dport == fp.FLEXPASS_UDP_PORT


def test_reactive_data_needs_explicit_type():
    proactive = FlexPass(flow_id=1) / FlexPassData(flow_seq=0) / Raw(b"x")
    reactive = FlexPass(type=3, flow_id=1) / FlexPassData(flow_seq=0) / Raw(b"x")
    assert decode(bytes(proactive))["subflow"] == "proactive"
    assert decode(bytes(reactive))["subflow"] == "reactive"


# ---------------------------------------------------------------------------
# Non-canonical (credit padding content) and invalid vectors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("vec", NONCANONICAL, ids=_ids(NONCANONICAL))
def test_noncanonical(vec):
    raw = bytes.fromhex(vec["hex"])
    canonical = bytes.fromhex(vec["canonical_hex"])
    assert raw != canonical
    assert decode(raw) == vec["packet"]
    assert vec["packet"]["type"] == "credit"
    assert encode(decode(raw)) == canonical


@pytest.mark.parametrize("vec", INVALID, ids=_ids(INVALID))
def test_invalid_rejected_with_same_kind(vec):
    raw = bytes.fromhex(vec["hex"])
    with pytest.raises(FlexPassDecodeError) as exc:
        validate(raw)
    assert exc.value.kind == vec["error"]
    # Scapy dissection below UDP stays lenient: garbage must not raise.
    IP(bytes(IP() / UDP(dport=fp.FLEXPASS_UDP_PORT) / Raw(raw)))


def _mutation_values(orig):
    vals = {0x00, 0xFF, 0x01, 0x02, 0x05, 0x09, 0x0A, 0x10, 0x1F, 0x7F, 0x80,
            (orig + 1) & 0xFF, (orig - 1) & 0xFF}
    vals.update(orig ^ (1 << bit) for bit in range(8))
    vals.discard(orig)
    return sorted(vals)


def _check_canonical(buf):
    try:
        pkt = decode(buf)
    except FlexPassDecodeError:
        return False
    re = encode(pkt)
    if pkt["type"] == "credit":
        assert len(re) == len(buf) and re[:12] == buf[:12] and not any(re[12:])
    else:
        assert re == buf
    return True


def test_mutations_never_crash_and_stay_canonical():
    """Same mutation set as the Rust test: only FlexPassDecodeError may escape."""
    accepted = 0
    for vec in VALID:
        raw = bytes.fromhex(vec["hex"])
        for pos in range(len(raw)):
            for val in _mutation_values(raw[pos]):
                m = bytearray(raw)
                m[pos] = val
                accepted += _check_canonical(bytes(m))
        for cut in range(len(raw)):
            with pytest.raises(FlexPassDecodeError) as exc:
                validate(raw[:cut])
            assert exc.value.kind == ("Truncated" if cut < 8 else "LengthMismatch")
    assert accepted > 1000


def test_encode_rejects_invalid_values():
    base = {"type": "data", "flow_id": 1, "subflow": "reactive", "flow_seq": 0,
            "subflow_seq": 0, "credit_seq": 1, "tsval": 0, "fin": False,
            "retransmission": False, "payload": "00"}
    with pytest.raises(FlexPassEncodeError) as exc:
        encode(base)
    assert exc.value.kind == "NonZeroCreditSeq"
    with pytest.raises(FlexPassEncodeError) as exc:
        encode({**base, "subflow": "proactive", "payload": ""})
    assert exc.value.kind == "EmptyPayload"
    with pytest.raises(FlexPassEncodeError) as exc:
        encode({**base, "credit_seq": 0, "payload": "", "retransmission": True})
    assert exc.value.kind == "EmptyPayload"
    # An empty REACTIVE_DATA with nothing else set is a PASE probe: flag PROBE, 28 bytes.
    probe = encode({**base, "credit_seq": 0, "payload": "", "subflow_seq": 0xFFFFFFFF})
    assert len(probe) == 28 and probe[1] == 0x80
    with pytest.raises(FlexPassEncodeError) as exc:
        encode({"type": "credit", "flow_id": 1, "credit_seq": 0, "padding": 15})
    assert exc.value.kind == "BadCreditPadding"
    with pytest.raises(FlexPassEncodeError) as exc:
        encode({"type": "ack", "flow_id": 1, "subflow": "proactive", "ece": False,
                "cum_ack": 5, "ack_seq": 0, "tsecr": 0, "flow_ack": 0, "sack": [[5, 6]]})
    assert exc.value.kind == "BadSackBlock"


# ---------------------------------------------------------------------------
# DSCP plan
# ---------------------------------------------------------------------------


def test_dscp_plan_defaults():
    plan = DscpPlan()
    plan.validate()
    assert plan.to_dict() == {"credit": 46, "proactive_data": 26, "reactive_data": 30,
                              "control": 24, "legacy": 0,
                              "priority": [32, 33, 34, 35, 36, 37, 38, 39]}
    for cls in TrafficClass:
        assert plan.classify(plan.dscp(cls)) is cls
    for p in range(8):
        assert plan.classify(32 + p) == PptPriority(p)
        assert plan.dscp(PptPriority(p)) == 32 + p
        assert PptPriority(p).queue == p and PptPriority(p).is_lcp == (p >= 4)
    assert plan.classify(63) is None
    assert plan.dscp("reactive_data") == 30
    assert plan.tos(TrafficClass.CREDIT, Ecn.NOT_ECT) == 0xB8
    assert tos(26, Ecn.ECT0) == 0x6A
    assert split_tos(0x6B) == (26, Ecn.CE)
    assert [c.queue for c in TrafficClass] == [0, 1, 1, 1, 2]
    assert TrafficClass.REACTIVE_DATA.is_red


@pytest.mark.parametrize("bad", [
    {"legacy": 64}, {"credit": -1}, {"control": 46}, {"reactive_data": 26}, {"legacy": 1.5},
    {"legacy": True}, {"priority": (32, 33, 34, 35, 36, 37, 38)},
    {"priority": (0, 33, 34, 35, 36, 37, 38, 39)}, {"priority": (32, 33, 34, 35, 36, 37, 38, 64)},
])
def test_dscp_plan_validation(bad):
    with pytest.raises(ValueError):
        DscpPlan(**bad).validate()
