"""FlexPass wire protocol for Python: Scapy layers and a strict codec.

docs/protocol.md is the specification; docs/protocol-vectors.json holds the
test vectors shared with the Rust crate ``flexpass-wire``.

Two complementary tools live here:

* Scapy layers for crafting and dissecting packets: :class:`FlexPass` (the
  8-byte common header) followed by one body layer chosen by ``type``
  (:class:`FlexPassCredit`, :class:`FlexPassData`, :class:`FlexPassAck`,
  :class:`FlexPassCreditRequest`, :class:`FlexPassHello`,
  :class:`FlexPassHelloAck`, :class:`FlexPassReset`, :class:`FlexPassEmulation`,
  :class:`FlexPassEmulationCredit`, :class:`FlexPassArbitrationRequest`,
  :class:`FlexPassArbitrationResponse`; CREDIT_STOP has no
  body). Data payload follows :class:`FlexPassData` as ``Raw``. The layers
  are bound to UDP port :data:`FLEXPASS_UDP_PORT` (source or destination);
  use :func:`bind_port` for another port. Scapy dissection is lenient like
  every Scapy layer -- it never rejects input.

* A strict codec that follows the normative decoding algorithm of the
  specification, check for check and in the same order as the Rust decoder:
  :func:`decode` (bytes -> dict), :func:`validate` (raises
  :class:`FlexPassDecodeError` whose ``kind`` is the Rust ``DecodeError``
  kind string) and :func:`encode` (dict -> canonical bytes). The dict form is
  the ``packet`` object of the JSON test vectors.

Example::

    from scapy.all import IP, UDP
    from flexpass_cp.scapy_flexpass import FlexPass, FlexPassCredit, validate
    pkt = IP(dst="10.0.0.2") / UDP() / FlexPass(flow_id=7) / FlexPassCredit(credit_seq=1)
    validate(bytes(pkt[FlexPass]))
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    ConditionalField,
    FieldLenField,
    FlagsField,
    IntField,
    LongField,
    PacketListField,
    ShortField,
    StrField,
    ThreeBytesField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_bottom_up, bind_layers, bind_top_down

from .frames import DEFAULT_MTU, max_payload_for_mtu

__all__ = [
    "VERSION",
    "FLEXPASS_UDP_PORT",
    "DEFAULT_UDP_PORT",
    "ERROR_KINDS",
    "FlexPassDecodeError",
    "FlexPassEncodeError",
    "FlexPass",
    "FlexPassCredit",
    "FlexPassData",
    "FlexPassSackBlock",
    "FlexPassAck",
    "FlexPassCreditRequest",
    "FlexPassHello",
    "FlexPassHelloAck",
    "FlexPassReset",
    "FlexPassEmulation",
    "FlexPassEmulationGrant",
    "FlexPassEmulationCredit",
    "bind_port",
    "decode",
    "validate",
    "encode",
    "to_scapy",
    "from_scapy",
    "ethernet_wire_len",
    "ethernet_wire_len_ip",
]

# ---------------------------------------------------------------------------
# Constants (same names/values as the Rust crate)
# ---------------------------------------------------------------------------

VERSION = 1
DEFAULT_UDP_PORT = 7890
FLEXPASS_UDP_PORT = DEFAULT_UDP_PORT
COMMON_HEADER_LEN = 8
DATA_HEADER_LEN = 28
ACK_BASE_LEN = 32
SACK_BLOCK_LEN = 8
MAX_SACK_BLOCKS = 4
CREDIT_HEADER_LEN = 12
CREDIT_MSG_MIN = 18
CREDIT_MSG_MAX = 26
CREDIT_REQUEST_LEN = 16
CREDIT_STOP_LEN = 8
HELLO_LEN = 20
HELLO_CONN_LEN = 32
COOKIE_LEN = 8
HELLO_ACK_LEN = 12
HELLO_ACK_COOKIE_LEN = 20
RESET_LEN = 12
EMULATION_LEN = 18
EMULATION_CREDIT_BASE_LEN = 12
EMULATION_GRANT_LEN = 8
MAX_EMULATION_GRANTS = 32
ARBITRATION_REQUEST_LEN = 28
ARBITRATION_RESPONSE_LEN = 24
PRIORITY_LEVELS = 8  # PASE queues P0..P7: an ARBITRATION_RESPONSE's queue is below this
MAX_MESSAGE_LEN = 0xFFFF
IPV4_UDP_OVERHEAD = 28
ETHERNET_WIRE_OVERHEAD = 38
MIN_ETHERNET_WIRE = 84
MAX_PAYLOAD_1500 = max_payload_for_mtu(DEFAULT_MTU)  # 1444; other MTUs: flexpass_cp.frames

U32_MAX = 0xFFFFFFFF
U64_MAX = 0xFFFFFFFFFFFFFFFF

# Message types.
T_CREDIT = 0x1
T_PROACTIVE_DATA = 0x2
T_REACTIVE_DATA = 0x3
T_ACK = 0x4
T_CREDIT_REQUEST = 0x5
T_CREDIT_STOP = 0x6
T_HELLO = 0x7
T_HELLO_ACK = 0x8
T_RESET = 0x9
T_EMULATION = 0xA
T_EMULATION_CREDIT = 0xB
T_ARBITRATION_REQUEST = 0xC
T_ARBITRATION_RESPONSE = 0xD

TYPE_NAMES = {
    T_CREDIT: "CREDIT",
    T_PROACTIVE_DATA: "PROACTIVE_DATA",
    T_REACTIVE_DATA: "REACTIVE_DATA",
    T_ACK: "ACK",
    T_CREDIT_REQUEST: "CREDIT_REQUEST",
    T_CREDIT_STOP: "CREDIT_STOP",
    T_HELLO: "HELLO",
    T_HELLO_ACK: "HELLO_ACK",
    T_RESET: "RESET",
    T_EMULATION: "EMULATION",
    T_EMULATION_CREDIT: "EMULATION_CREDIT",
    T_ARBITRATION_REQUEST: "ARBITRATION_REQUEST",
    T_ARBITRATION_RESPONSE: "ARBITRATION_RESPONSE",
}

# Flag bits (one global allocation; which bits are allowed depends on the type).
FLAG_FIN = 0x01
FLAG_ECE = 0x02
FLAG_RETX = 0x04
FLAG_CONN = 0x08
FLAG_COOKIE = 0x10
FLAG_IDLE = 0x20
FLAG_PRIO = 0x40  # DATA: a 4-byte priority (pFabric: remaining size) follows tsval
FLAG_PROBE = 0x80  # REACTIVE_DATA: a probe, the bare 28-byte header (32 with PRIO: pFabric) (protocol.md §6.2)
PROBE_SEQ = 0xFFFFFFFF  # subflow_seq of every probe, ack_seq of its answer
PRIORITY_LEN = 4

ALLOWED_FLAGS = {t: 0 for t in TYPE_NAMES}
ALLOWED_FLAGS[T_PROACTIVE_DATA] = FLAG_FIN | FLAG_RETX | FLAG_PRIO
ALLOWED_FLAGS[T_REACTIVE_DATA] = FLAG_FIN | FLAG_RETX | FLAG_PRIO | FLAG_PROBE
ALLOWED_FLAGS[T_ACK] = FLAG_ECE
ALLOWED_FLAGS[T_HELLO] = FLAG_CONN | FLAG_COOKIE | FLAG_IDLE
ALLOWED_FLAGS[T_HELLO_ACK] = FLAG_COOKIE

SUBFLOWS = {0: "proactive", 1: "reactive"}
TRANSPORTS = {1: "flexpass", 2: "expresspass", 3: "dctcp", 4: "ppt", 5: "flashpass",
              6: "pfabric", 7: "pase"}
HELLO_STATUSES = {0: "accepted", 1: "unsupported_transport", 2: "refused", 3: "retry"}
STATUS_RETRY = 3  # only with flag COOKIE, which only it allows
RESET_REASONS = {0: "unspecified", 1: "unknown_flow", 2: "protocol_violation", 3: "shutdown"}
CONN_ROLES = {1: "open", 2: "reply"}

ERROR_KINDS = (
    "Truncated",
    "UnsupportedVersion",
    "UnknownType",
    "LengthMismatch",
    "InvalidFlags",
    "BadCreditSize",
    "NonZeroCreditSeq",
    "EmptyPayload",
    "SeqOverflow",
    "BadSubflow",
    "TooManySackBlocks",
    "BadSackBlock",
    "NonZeroReserved",
    "UnknownTransport",
    "BadStatus",
    "BadReason",
    "BadConnRole",
    "BadGrantCount",
    "BadQueue",
    "BadRate",
)


def ethernet_wire_len(msg_len: int) -> int:
    """Bytes on an Ethernet wire for a FlexPass message of ``msg_len`` bytes over IPv4/UDP."""
    return ethernet_wire_len_ip(msg_len + IPV4_UDP_OVERHEAD)


def ethernet_wire_len_ip(ip_len: int) -> int:
    """Bytes on an Ethernet wire for an IPv4 packet of ``ip_len`` bytes."""
    return max(ip_len + ETHERNET_WIRE_OVERHEAD, MIN_ETHERNET_WIRE)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class FlexPassDecodeError(ValueError):
    """Invalid FlexPass message. ``kind`` is one of :data:`ERROR_KINDS`."""

    def __init__(self, kind: str, detail: str = "") -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown decode error kind {kind!r}")
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}" if detail else kind)


class FlexPassEncodeError(ValueError):
    """A packet dict that has no valid encoding. ``kind`` mirrors Rust ``EncodeError::kind``
    (BadCreditPadding, NonZeroCreditSeq, EmptyPayload, SeqOverflow, TooLong, BadSackBlock),
    plus ``BadValue`` for malformed dicts (unknown type/enum name, out-of-range integer)."""

    def __init__(self, kind: str, detail: str = "") -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}" if detail else kind)


# ---------------------------------------------------------------------------
# Strict decoder (normative algorithm, docs/protocol.md "Decoding algorithm")
# ---------------------------------------------------------------------------


def _exact_len(n: int, need: int) -> None:
    """Fixed-size bodies: shorter -> Truncated, longer -> LengthMismatch."""
    if n < need:
        raise FlexPassDecodeError("Truncated", f"need {need} bytes, got {n}")
    if n > need:
        raise FlexPassDecodeError("LengthMismatch", f"expected {need} bytes, got {n}")


def decode(buf: bytes) -> Dict[str, Any]:
    """Strictly decode one FlexPass message (the whole UDP payload).

    Returns the ``packet`` dict of the JSON vectors; raises
    :class:`FlexPassDecodeError`. The checks and their order are exactly those
    of the Rust ``Packet::decode``.
    """
    buf = bytes(buf)
    n = len(buf)
    # 1. common header present
    if n < COMMON_HEADER_LEN:
        raise FlexPassDecodeError("Truncated", f"need {COMMON_HEADER_LEN} bytes, got {n}")
    # 2. version
    version = buf[0] >> 4
    if version != VERSION:
        raise FlexPassDecodeError("UnsupportedVersion", f"version {version}")
    # 3. type
    t = buf[0] & 0x0F
    if t not in TYPE_NAMES:
        raise FlexPassDecodeError("UnknownType", f"type {t:#x}")
    # 4. length field == buffer length
    (length,) = struct.unpack_from("!H", buf, 2)
    if length != n:
        raise FlexPassDecodeError("LengthMismatch", f"length field {length}, buffer {n}")
    # 5. flags allowed for the type
    flags = buf[1]
    if flags & ~ALLOWED_FLAGS[t] & 0xFF:
        raise FlexPassDecodeError("InvalidFlags", f"flags {flags:#04x} for {TYPE_NAMES[t]}")
    (flow_id,) = struct.unpack_from("!I", buf, 4)

    # 6. type-specific body
    if t == T_CREDIT:
        if not CREDIT_MSG_MIN <= n <= CREDIT_MSG_MAX:
            raise FlexPassDecodeError("BadCreditSize", f"credit length {n}")
        (credit_seq,) = struct.unpack_from("!I", buf, 8)
        # Padding content is ignored (not part of the decoded value).
        return {"type": "credit", "flow_id": flow_id, "credit_seq": credit_seq,
                "padding": n - CREDIT_HEADER_LEN}

    if t in (T_PROACTIVE_DATA, T_REACTIVE_DATA):
        header = DATA_HEADER_LEN + (PRIORITY_LEN if flags & FLAG_PRIO else 0)
        if n < header:
            raise FlexPassDecodeError("Truncated", f"need {header} bytes, got {n}")
        flow_seq, subflow_seq, credit_seq, tsval = struct.unpack_from("!QIII", buf, 8)
        fin = bool(flags & FLAG_FIN)
        if t == T_REACTIVE_DATA and credit_seq != 0:
            raise FlexPassDecodeError("NonZeroCreditSeq", f"credit_seq {credit_seq}")
        priority = struct.unpack_from("!I", buf, DATA_HEADER_LEN)[0] if flags & FLAG_PRIO else None
        payload = buf[header:]
        if flags & FLAG_PROBE:
            if flags & ~FLAG_PRIO != FLAG_PROBE:
                raise FlexPassDecodeError("InvalidFlags", f"probe flags {flags:#04x}")
            if payload:
                raise FlexPassDecodeError("LengthMismatch", f"probe of {n} bytes, not {header}")
        elif not payload and not fin:
            raise FlexPassDecodeError("EmptyPayload")
        if flow_seq + len(payload) > U64_MAX:
            raise FlexPassDecodeError("SeqOverflow", f"{flow_seq} + {len(payload)}")
        data = {"type": "data", "flow_id": flow_id,
                "subflow": "proactive" if t == T_PROACTIVE_DATA else "reactive",
                "flow_seq": flow_seq, "subflow_seq": subflow_seq, "credit_seq": credit_seq,
                "tsval": tsval, "fin": fin, "retransmission": bool(flags & FLAG_RETX),
                "payload": payload.hex()}
        if priority is not None:
            data["priority"] = priority
        return data

    if t == T_ACK:
        if n < ACK_BASE_LEN:
            raise FlexPassDecodeError("Truncated", f"need {ACK_BASE_LEN} bytes, got {n}")
        subflow = buf[8]
        if subflow not in SUBFLOWS:
            raise FlexPassDecodeError("BadSubflow", f"subflow {subflow}")
        count = buf[9]
        if count > MAX_SACK_BLOCKS:
            raise FlexPassDecodeError("TooManySackBlocks", f"sack_count {count}")
        if buf[10:12] != b"\x00\x00":
            raise FlexPassDecodeError("NonZeroReserved", "ACK reserved")
        _exact_len(n, ACK_BASE_LEN + SACK_BLOCK_LEN * count)
        cum_ack, ack_seq, tsecr, flow_ack = struct.unpack_from("!IIIQ", buf, 12)
        sack: List[List[int]] = []
        for i in range(count):
            start, end = struct.unpack_from("!II", buf, ACK_BASE_LEN + SACK_BLOCK_LEN * i)
            if not (start < end and start > cum_ack):
                raise FlexPassDecodeError(
                    "BadSackBlock", f"block #{i} [{start}, {end}) with cum_ack {cum_ack}")
            sack.append([start, end])
        return {"type": "ack", "flow_id": flow_id, "subflow": SUBFLOWS[subflow],
                "ece": bool(flags & FLAG_ECE), "cum_ack": cum_ack, "ack_seq": ack_seq,
                "tsecr": tsecr, "flow_ack": flow_ack, "sack": sack}

    if t == T_CREDIT_REQUEST:
        _exact_len(n, CREDIT_REQUEST_LEN)
        (pending,) = struct.unpack_from("!Q", buf, 8)
        return {"type": "credit_request", "flow_id": flow_id, "pending_bytes": pending}

    if t == T_CREDIT_STOP:
        _exact_len(n, CREDIT_STOP_LEN)
        return {"type": "credit_stop", "flow_id": flow_id}

    if t == T_HELLO:
        with_conn = bool(flags & FLAG_CONN)
        with_cookie = bool(flags & FLAG_COOKIE)
        base = HELLO_CONN_LEN if with_conn else HELLO_LEN
        _exact_len(n, base + (COOKIE_LEN if with_cookie else 0))
        if buf[8] not in TRANSPORTS:
            raise FlexPassDecodeError("UnknownTransport", f"transport {buf[8]}")
        if buf[9:12] != b"\x00\x00\x00":
            raise FlexPassDecodeError("NonZeroReserved", "HELLO reserved")
        (flow_size,) = struct.unpack_from("!Q", buf, 12)
        hello = {"type": "hello", "flow_id": flow_id, "transport": TRANSPORTS[buf[8]],
                 "flow_size": flow_size}
        if with_conn:
            if buf[28] not in CONN_ROLES:
                raise FlexPassDecodeError("BadConnRole", f"role {buf[28]}")
            if buf[29:32] != b"\x00\x00\x00":
                raise FlexPassDecodeError("NonZeroReserved", "HELLO connection reserved")
            conn_id, src_port, dst_port = struct.unpack_from("!IHH", buf, 20)
            hello["conn"] = {"conn_id": conn_id, "src_port": src_port, "dst_port": dst_port,
                             "role": CONN_ROLES[buf[28]]}
        if with_cookie:
            (hello["cookie"],) = struct.unpack_from("!Q", buf, base)
        if flags & FLAG_IDLE:
            hello["idle"] = True
        return hello

    if t == T_HELLO_ACK:
        with_cookie = bool(flags & FLAG_COOKIE)
        _exact_len(n, HELLO_ACK_COOKIE_LEN if with_cookie else HELLO_ACK_LEN)
        if buf[8] not in TRANSPORTS:
            raise FlexPassDecodeError("UnknownTransport", f"transport {buf[8]}")
        # Status retry and flag COOKIE go together: either without the other is BadStatus.
        if buf[9] not in HELLO_STATUSES or (buf[9] == STATUS_RETRY) != with_cookie:
            raise FlexPassDecodeError("BadStatus", f"status {buf[9]}")
        if buf[10:12] != b"\x00\x00":
            raise FlexPassDecodeError("NonZeroReserved", "HELLO_ACK reserved")
        ack = {"type": "hello_ack", "flow_id": flow_id, "transport": TRANSPORTS[buf[8]],
               "status": HELLO_STATUSES[buf[9]]}
        if with_cookie:
            (ack["cookie"],) = struct.unpack_from("!Q", buf, HELLO_ACK_LEN)
        return ack

    if t == T_EMULATION:
        _exact_len(n, EMULATION_LEN)
        emu_seq, timestamp, hold = struct.unpack_from("!IIH", buf, 8)
        return {"type": "emulation", "flow_id": flow_id, "emu_seq": emu_seq,
                "timestamp": timestamp, "hold": hold}

    if t == T_EMULATION_CREDIT:
        if n < EMULATION_CREDIT_BASE_LEN:
            raise FlexPassDecodeError("Truncated", f"need {EMULATION_CREDIT_BASE_LEN} bytes, got {n}")
        count = buf[8]
        if not 1 <= count <= MAX_EMULATION_GRANTS:
            raise FlexPassDecodeError("BadGrantCount", f"count {count}")
        if buf[9:12] != b"\x00\x00\x00":
            raise FlexPassDecodeError("NonZeroReserved", "EMULATION_CREDIT reserved")
        _exact_len(n, EMULATION_CREDIT_BASE_LEN + EMULATION_GRANT_LEN * count)
        grants = [list(struct.unpack_from("!II", buf, EMULATION_CREDIT_BASE_LEN + EMULATION_GRANT_LEN * i))
                  for i in range(count)]
        return {"type": "emulation_credit", "flow_id": flow_id, "grants": grants}

    if t == T_ARBITRATION_REQUEST:
        _exact_len(n, ARBITRATION_REQUEST_LEN)
        arb_seq, remaining, demand = struct.unpack_from("!IQQ", buf, 8)
        if demand == 0:
            raise FlexPassDecodeError("BadRate", "ARBITRATION_REQUEST demand 0")
        return {"type": "arbitration_request", "flow_id": flow_id, "arb_seq": arb_seq,
                "remaining": remaining, "demand_bps": demand}

    if t == T_ARBITRATION_RESPONSE:
        _exact_len(n, ARBITRATION_RESPONSE_LEN)
        (arb_seq,) = struct.unpack_from("!I", buf, 8)
        if buf[12] >= PRIORITY_LEVELS:
            raise FlexPassDecodeError("BadQueue", f"queue {buf[12]}")
        if buf[13:16] != b"\x00\x00\x00":
            raise FlexPassDecodeError("NonZeroReserved", "ARBITRATION_RESPONSE reserved")
        (rate,) = struct.unpack_from("!Q", buf, 16)
        if rate == 0:
            raise FlexPassDecodeError("BadRate", "ARBITRATION_RESPONSE reference rate 0")
        return {"type": "arbitration_response", "flow_id": flow_id, "arb_seq": arb_seq,
                "queue": buf[12], "reference_rate_bps": rate}

    # T_RESET (the only remaining type)
    _exact_len(n, RESET_LEN)
    if buf[8] not in RESET_REASONS:
        raise FlexPassDecodeError("BadReason", f"reason {buf[8]}")
    if buf[9:12] != b"\x00\x00\x00":
        raise FlexPassDecodeError("NonZeroReserved", "RESET reserved")
    return {"type": "reset", "flow_id": flow_id, "reason": RESET_REASONS[buf[8]]}


def validate(buf: bytes) -> None:
    """Raise :class:`FlexPassDecodeError` unless ``buf`` is a valid FlexPass message."""
    decode(buf)


# ---------------------------------------------------------------------------
# Canonical encoder
# ---------------------------------------------------------------------------


def _reverse(table: Dict[int, str], name: Any, what: str) -> int:
    for code, n in table.items():
        if n == name:
            return code
    raise FlexPassEncodeError("BadValue", f"unknown {what} {name!r}")


def _uint(pkt: Dict[str, Any], key: str, bits: int) -> int:
    v = pkt.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < (1 << bits):
        raise FlexPassEncodeError("BadValue", f"{key}={v!r} is not a u{bits}")
    return v


def encode(pkt: Dict[str, Any]) -> bytes:
    """Canonical encoding of a packet dict (the JSON-vector ``packet`` form).

    Raises :class:`FlexPassEncodeError` for values that have no valid
    encoding, so that ``decode(encode(p)) == p`` for every accepted ``p``.
    """
    kind = pkt.get("type")
    flow_id = _uint(pkt, "flow_id", 32)
    flags = 0
    if kind == "credit":
        t = T_CREDIT
        padding = _uint(pkt, "padding", 8)
        if not CREDIT_MSG_MIN - CREDIT_HEADER_LEN <= padding <= CREDIT_MSG_MAX - CREDIT_HEADER_LEN:
            raise FlexPassEncodeError("BadCreditPadding", f"padding {padding}")
        body = struct.pack("!I", _uint(pkt, "credit_seq", 32)) + bytes(padding)
    elif kind == "data":
        t = _reverse({T_PROACTIVE_DATA: "proactive", T_REACTIVE_DATA: "reactive"},
                     pkt.get("subflow"), "subflow")
        credit_seq = _uint(pkt, "credit_seq", 32)
        payload = bytes.fromhex(pkt.get("payload", ""))
        flow_seq = _uint(pkt, "flow_seq", 64)
        fin = bool(pkt.get("fin", False))
        if t == T_REACTIVE_DATA and credit_seq != 0:
            raise FlexPassEncodeError("NonZeroCreditSeq", f"credit_seq {credit_seq}")
        priority = _uint(pkt, "priority", 32) if "priority" in pkt else None
        probe = (not payload and not fin and t == T_REACTIVE_DATA
                 and not pkt.get("retransmission"))
        if not payload and not fin and not probe:
            raise FlexPassEncodeError("EmptyPayload")
        header = DATA_HEADER_LEN + (PRIORITY_LEN if priority is not None else 0)
        if header + len(payload) > MAX_MESSAGE_LEN:
            raise FlexPassEncodeError("TooLong", f"{header + len(payload)} bytes")
        if flow_seq + len(payload) > U64_MAX:
            raise FlexPassEncodeError("SeqOverflow")
        flags = ((FLAG_FIN if fin else 0) | (FLAG_RETX if pkt.get("retransmission") else 0)
                 | (FLAG_PROBE if probe else 0))
        body = struct.pack("!QIII", flow_seq, _uint(pkt, "subflow_seq", 32), credit_seq,
                           _uint(pkt, "tsval", 32))
        if priority is not None:
            flags |= FLAG_PRIO
            body += struct.pack("!I", priority)
        body += payload
    elif kind == "ack":
        t = T_ACK
        cum_ack = _uint(pkt, "cum_ack", 32)
        sack = list(pkt.get("sack", []))
        if len(sack) > MAX_SACK_BLOCKS:
            raise FlexPassEncodeError("BadValue", f"{len(sack)} SACK blocks (max 4)")
        blocks = b""
        for i, (start, end) in enumerate(sack):
            _uint({"start": start, "end": end}, "start", 32)
            _uint({"start": start, "end": end}, "end", 32)
            if not (start < end and start > cum_ack):
                raise FlexPassEncodeError("BadSackBlock", f"block #{i} [{start}, {end})")
            blocks += struct.pack("!II", start, end)
        flags = FLAG_ECE if pkt.get("ece") else 0
        body = struct.pack(
            "!BBHIIIQ", _reverse(SUBFLOWS, pkt.get("subflow"), "subflow"), len(sack), 0,
            cum_ack, _uint(pkt, "ack_seq", 32), _uint(pkt, "tsecr", 32),
            _uint(pkt, "flow_ack", 64)) + blocks
    elif kind == "credit_request":
        t = T_CREDIT_REQUEST
        body = struct.pack("!Q", _uint(pkt, "pending_bytes", 64))
    elif kind == "credit_stop":
        t = T_CREDIT_STOP
        body = b""
    elif kind == "hello":
        t = T_HELLO
        body = struct.pack("!B3xQ", _reverse(TRANSPORTS, pkt.get("transport"), "transport"),
                           _uint(pkt, "flow_size", 64))
        conn = pkt.get("conn")
        if conn is not None:
            if not isinstance(conn, dict):
                raise FlexPassEncodeError("BadValue", f"conn={conn!r} is not a dict")
            flags = FLAG_CONN
            body += struct.pack("!IHHB3x", _uint(conn, "conn_id", 32), _uint(conn, "src_port", 16),
                                _uint(conn, "dst_port", 16), _reverse(CONN_ROLES, conn.get("role"), "role"))
        if pkt.get("cookie") is not None:
            flags |= FLAG_COOKIE
            body += struct.pack("!Q", _uint(pkt, "cookie", 64))
        idle = pkt.get("idle", False)
        if not isinstance(idle, bool):
            raise FlexPassEncodeError("BadValue", f"idle={idle!r} is not a bool")
        if idle:
            flags |= FLAG_IDLE
    elif kind == "hello_ack":
        t = T_HELLO_ACK
        status = _reverse(HELLO_STATUSES, pkt.get("status"), "status")
        body = struct.pack("!BBH", _reverse(TRANSPORTS, pkt.get("transport"), "transport"), status, 0)
        # A retry carries its cookie (flag COOKIE); no other status has one.
        if (status == STATUS_RETRY) != (pkt.get("cookie") is not None):
            raise FlexPassEncodeError("BadValue", "a cookie goes with status retry, and only with it")
        if status == STATUS_RETRY:
            flags = FLAG_COOKIE
            body += struct.pack("!Q", _uint(pkt, "cookie", 64))
    elif kind == "emulation":
        t = T_EMULATION
        body = struct.pack("!IIH", _uint(pkt, "emu_seq", 32), _uint(pkt, "timestamp", 32),
                           _uint(pkt, "hold", 16))
    elif kind == "emulation_credit":
        t = T_EMULATION_CREDIT
        grants = list(pkt.get("grants", []))
        if not 1 <= len(grants) <= MAX_EMULATION_GRANTS:
            raise FlexPassEncodeError("BadGrantCount", f"{len(grants)} grants (1..=32)")
        body = struct.pack("!B3x", len(grants))
        for seq, ts in grants:
            body += struct.pack("!II", _uint({"emu_seq": seq}, "emu_seq", 32),
                                _uint({"timestamp": ts}, "timestamp", 32))
    elif kind == "arbitration_request":
        t = T_ARBITRATION_REQUEST
        demand = _uint(pkt, "demand_bps", 64)
        if demand == 0:
            raise FlexPassEncodeError("BadRate", "demand 0")
        body = struct.pack("!IQQ", _uint(pkt, "arb_seq", 32), _uint(pkt, "remaining", 64), demand)
    elif kind == "arbitration_response":
        t = T_ARBITRATION_RESPONSE
        queue = _uint(pkt, "queue", 8)
        rate = _uint(pkt, "reference_rate_bps", 64)
        if queue >= PRIORITY_LEVELS:
            raise FlexPassEncodeError("BadQueue", f"queue {queue}")
        if rate == 0:
            raise FlexPassEncodeError("BadRate", "reference rate 0")
        body = struct.pack("!IB3xQ", _uint(pkt, "arb_seq", 32), queue, rate)
    elif kind == "reset":
        t = T_RESET
        body = struct.pack("!B3x", _reverse(RESET_REASONS, pkt.get("reason"), "reason"))
    else:
        raise FlexPassEncodeError("BadValue", f"unknown packet type {kind!r}")
    length = COMMON_HEADER_LEN + len(body)
    return struct.pack("!BBHI", (VERSION << 4) | t, flags, length, flow_id) + body


# ---------------------------------------------------------------------------
# Scapy layers
# ---------------------------------------------------------------------------

_FLAG_NAMES = ["FIN", "ECE", "RETX", "CONN", "COOKIE", "F5", "PRIO", "PROBE"]  # bit 0 first


class _FixedBody(Packet):
    """Body of fixed size: bytes after it are Scapy ``Padding``, not payload."""

    def extract_padding(self, s):
        return b"", s


class FlexPass(Packet):
    """FlexPass common header (8 bytes).

    ``length`` is filled in automatically when left as None. ``type`` is set
    by the body layer stacked on top (CREDIT_STOP has no body: set
    ``type=6``); for reactive data set ``type=3`` explicitly.
    """

    name = "FlexPass"
    fields_desc = [
        BitField("version", VERSION, 4),
        BitEnumField("type", 0, 4, TYPE_NAMES),
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ShortField("length", None),
        IntField("flow_id", 0),
    ]

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        if self.length is None:
            n = len(p) + len(pay)
            p = p[:2] + struct.pack("!H", n & 0xFFFF) + p[4:]
        return p + pay

    def mysummary(self) -> str:
        return self.sprintf("FlexPass %FlexPass.type% flow=%FlexPass.flow_id% len=%FlexPass.length%")


class FlexPassCredit(Packet):
    """CREDIT body: credit_seq, then padding (``pad``; 6..14 bytes, zeros)."""

    name = "FlexPass CREDIT"
    fields_desc = [
        IntField("credit_seq", 0),
        StrField("pad", b"\x00" * (CREDIT_MSG_MIN - CREDIT_HEADER_LEN)),
    ]


def _data_has_priority(p) -> bool:
    """The DATA header has flag PRIO: a 4-byte priority follows tsval (pFabric)."""
    under = p.underlayer
    return under is not None and bool(int(under.flags) & FLAG_PRIO)


class FlexPassData(Packet):
    """PROACTIVE_DATA / REACTIVE_DATA header (with flag PRIO also ``priority``); the
    payload follows as ``Raw``."""

    name = "FlexPass DATA"
    fields_desc = [
        LongField("flow_seq", 0),
        IntField("subflow_seq", 0),
        IntField("credit_seq", 0),
        IntField("tsval", 0),
        ConditionalField(IntField("priority", 0), _data_has_priority),
    ]


class FlexPassSackBlock(_FixedBody):
    """One SACK block [start, end)."""

    name = "FlexPass SACK block"
    fields_desc = [IntField("start", 0), IntField("end", 0)]


class FlexPassAck(_FixedBody):
    """ACK body with up to 4 SACK blocks (``sack_count`` computed when None)."""

    name = "FlexPass ACK"
    fields_desc = [
        ByteEnumField("subflow", 0, SUBFLOWS),
        FieldLenField("sack_count", None, count_of="sack", fmt="B"),
        ShortField("reserved", 0),
        IntField("cum_ack", 0),
        IntField("ack_seq", 0),
        IntField("tsecr", 0),
        LongField("flow_ack", 0),
        PacketListField("sack", [], FlexPassSackBlock, count_from=lambda p: p.sack_count),
    ]


class FlexPassCreditRequest(_FixedBody):
    """CREDIT_REQUEST body."""

    name = "FlexPass CREDIT_REQUEST"
    fields_desc = [LongField("pending_bytes", 0)]


def _hello_has_conn(p) -> bool:
    """The HELLO's header has flag CONN: the 12-byte connection extension follows."""
    under = p.underlayer
    return under is not None and bool(int(under.flags) & FLAG_CONN)


def _has_cookie(p) -> bool:
    """The header has flag COOKIE: an 8-byte cookie ends the HELLO / HELLO_ACK."""
    under = p.underlayer
    return under is not None and bool(int(under.flags) & FLAG_COOKIE)


class FlexPassHello(_FixedBody):
    """HELLO body; with flag CONN in the header also the connection extension (conn_id,
    src_port, dst_port, role, reserved)."""

    name = "FlexPass HELLO"
    fields_desc = [
        ByteEnumField("transport", 1, TRANSPORTS),
        ThreeBytesField("reserved", 0),
        LongField("flow_size", 0),
        ConditionalField(IntField("conn_id", 0), _hello_has_conn),
        ConditionalField(ShortField("src_port", 0), _hello_has_conn),
        ConditionalField(ShortField("dst_port", 0), _hello_has_conn),
        ConditionalField(ByteEnumField("role", 1, CONN_ROLES), _hello_has_conn),
        ConditionalField(ThreeBytesField("conn_reserved", 0), _hello_has_conn),
        ConditionalField(LongField("cookie", 0), _has_cookie),
    ]


class FlexPassHelloAck(_FixedBody):
    """HELLO_ACK body."""

    name = "FlexPass HELLO_ACK"
    fields_desc = [
        ByteEnumField("transport", 1, TRANSPORTS),
        ByteEnumField("status", 0, HELLO_STATUSES),
        ShortField("reserved", 0),
        ConditionalField(LongField("cookie", 0), _has_cookie),
    ]


class FlexPassReset(_FixedBody):
    """RESET body."""

    name = "FlexPass RESET"
    fields_desc = [
        ByteEnumField("reason", 0, RESET_REASONS),
        ThreeBytesField("reserved", 0),
    ]


class FlexPassEmulation(_FixedBody):
    """EMULATION body (FlashPass): emu_seq, timestamp T (ns mod 2^32), hold (10 µs units)."""

    name = "FlexPass EMULATION"
    fields_desc = [IntField("emu_seq", 0), IntField("timestamp", 0), ShortField("hold", 0)]


class FlexPassEmulationGrant(_FixedBody):
    """One EMULATION_CREDIT grant: the echoed emu_seq and timestamp."""

    name = "FlexPass EMULATION grant"
    fields_desc = [IntField("emu_seq", 0), IntField("timestamp", 0)]


class FlexPassEmulationCredit(_FixedBody):
    """EMULATION_CREDIT body (FlashPass): 1..32 grants (``count`` computed when None)."""

    name = "FlexPass EMULATION_CREDIT"
    fields_desc = [
        FieldLenField("count", None, count_of="grants", fmt="B"),
        ThreeBytesField("reserved", 0),
        PacketListField("grants", [], FlexPassEmulationGrant, count_from=lambda p: p.count),
    ]


class FlexPassArbitrationRequest(_FixedBody):
    """ARBITRATION_REQUEST body (PASE): request number, remaining bytes, demand (bit/s)."""

    name = "FlexPass ARBITRATION_REQUEST"
    fields_desc = [IntField("arb_seq", 0), LongField("remaining", 0), LongField("demand_bps", 0)]


class FlexPassArbitrationResponse(_FixedBody):
    """ARBITRATION_RESPONSE body (PASE): echoed request number, queue, reference rate (bit/s)."""

    name = "FlexPass ARBITRATION_RESPONSE"
    fields_desc = [IntField("arb_seq", 0), ByteField("queue", 0), ThreeBytesField("reserved", 0),
                   LongField("reference_rate_bps", 0)]


bind_layers(FlexPass, FlexPassCredit, type=T_CREDIT)
# Both data types dissect to FlexPassData; building FlexPass()/FlexPassData()
# defaults to PROACTIVE_DATA (bind_layers is last for type 2).
bind_bottom_up(FlexPass, FlexPassData, type=T_REACTIVE_DATA)
bind_layers(FlexPass, FlexPassData, type=T_PROACTIVE_DATA)
bind_layers(FlexPass, FlexPassAck, type=T_ACK)
bind_layers(FlexPass, FlexPassCreditRequest, type=T_CREDIT_REQUEST)
bind_layers(FlexPass, FlexPassHello, type=T_HELLO)
bind_layers(FlexPass, FlexPassHelloAck, type=T_HELLO_ACK)
bind_layers(FlexPass, FlexPassReset, type=T_RESET)
bind_layers(FlexPass, FlexPassEmulation, type=T_EMULATION)
bind_layers(FlexPass, FlexPassEmulationCredit, type=T_EMULATION_CREDIT)
bind_layers(FlexPass, FlexPassArbitrationRequest, type=T_ARBITRATION_REQUEST)
bind_layers(FlexPass, FlexPassArbitrationResponse, type=T_ARBITRATION_RESPONSE)


def bind_port(port: int) -> None:
    """Dissect UDP datagrams from or to ``port`` as FlexPass, and make
    ``UDP()/FlexPass()`` default to source and destination port ``port``."""
    bind_bottom_up(UDP, FlexPass, dport=port)
    bind_bottom_up(UDP, FlexPass, sport=port)
    bind_top_down(UDP, FlexPass, sport=port, dport=port)


bind_port(FLEXPASS_UDP_PORT)


def to_scapy(pkt: Dict[str, Any]) -> Packet:
    """Scapy packet (FlexPass / body [/ Raw]) for a packet dict; ``bytes()`` of
    the result equals :func:`encode` of the dict."""
    from scapy.packet import Raw

    raw = encode(pkt)  # validates and gives us the header values
    hdr = FlexPass(type=raw[0] & 0x0F, flags=raw[1], flow_id=pkt["flow_id"])
    kind = pkt["type"]
    if kind == "credit":
        return hdr / FlexPassCredit(credit_seq=pkt["credit_seq"], pad=bytes(pkt["padding"]))
    if kind == "data":
        body = hdr / FlexPassData(flow_seq=pkt["flow_seq"], subflow_seq=pkt["subflow_seq"],
                                  credit_seq=pkt["credit_seq"], tsval=pkt["tsval"],
                                  priority=pkt.get("priority", 0))
        payload = bytes.fromhex(pkt["payload"])
        return body / Raw(load=payload) if payload else body
    if kind == "ack":
        return hdr / FlexPassAck(
            subflow=_reverse(SUBFLOWS, pkt["subflow"], "subflow"), cum_ack=pkt["cum_ack"],
            ack_seq=pkt["ack_seq"], tsecr=pkt["tsecr"], flow_ack=pkt["flow_ack"],
            sack=[FlexPassSackBlock(start=s, end=e) for s, e in pkt["sack"]])
    if kind == "credit_request":
        return hdr / FlexPassCreditRequest(pending_bytes=pkt["pending_bytes"])
    if kind == "credit_stop":
        return hdr
    if kind == "hello":
        conn = pkt.get("conn")
        extra = {} if conn is None else {
            "conn_id": conn["conn_id"], "src_port": conn["src_port"], "dst_port": conn["dst_port"],
            "role": _reverse(CONN_ROLES, conn["role"], "role")}
        if pkt.get("cookie") is not None:
            extra["cookie"] = pkt["cookie"]
        return hdr / FlexPassHello(transport=_reverse(TRANSPORTS, pkt["transport"], "transport"),
                                   flow_size=pkt["flow_size"], **extra)
    if kind == "hello_ack":
        extra = {} if pkt.get("cookie") is None else {"cookie": pkt["cookie"]}
        return hdr / FlexPassHelloAck(
            transport=_reverse(TRANSPORTS, pkt["transport"], "transport"),
            status=_reverse(HELLO_STATUSES, pkt["status"], "status"), **extra)
    if kind == "emulation":
        return hdr / FlexPassEmulation(emu_seq=pkt["emu_seq"], timestamp=pkt["timestamp"],
                                       hold=pkt["hold"])
    if kind == "emulation_credit":
        return hdr / FlexPassEmulationCredit(
            grants=[FlexPassEmulationGrant(emu_seq=q, timestamp=t) for q, t in pkt["grants"]])
    if kind == "arbitration_request":
        return hdr / FlexPassArbitrationRequest(arb_seq=pkt["arb_seq"], remaining=pkt["remaining"],
                                                demand_bps=pkt["demand_bps"])
    if kind == "arbitration_response":
        return hdr / FlexPassArbitrationResponse(arb_seq=pkt["arb_seq"], queue=pkt["queue"],
                                                 reference_rate_bps=pkt["reference_rate_bps"])
    return hdr / FlexPassReset(reason=_reverse(RESET_REASONS, pkt["reason"], "reason"))


def from_scapy(p: Packet) -> Optional[Dict[str, Any]]:
    """Strictly decode the FlexPass layer of a Scapy packet (None if absent)."""
    if FlexPass not in p:
        return None
    return decode(bytes(p[FlexPass]))
