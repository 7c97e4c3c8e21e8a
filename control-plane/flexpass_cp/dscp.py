"""DSCP plan and ECN code points (docs/protocol.md, "DSCP plan and queues").

Mirrors ``DscpPlan``/``TrafficClass``/``Ecn``/``tos`` in the Rust crate
``flexpass-wire``.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Optional, Tuple, Union


class TrafficClass(str, enum.Enum):
    """Traffic classes distinguished by DSCP (values are the serde names)."""

    CREDIT = "credit"
    PROACTIVE_DATA = "proactive_data"
    REACTIVE_DATA = "reactive_data"
    CONTROL = "control"
    LEGACY = "legacy"

    @property
    def queue(self) -> int:
        """Switch egress queue: 0 credit, 1 FlexPass data/control, 2 legacy."""
        if self is TrafficClass.CREDIT:
            return 0
        if self is TrafficClass.LEGACY:
            return 2
        return 1

    @property
    def is_red(self) -> bool:
        """True for the class coloured red in Q1 (selectively dropped)."""
        return self is TrafficClass.REACTIVE_DATA


class Ecn(enum.IntEnum):
    """ECN code point, the low two bits of the IPv4 TOS byte (RFC 3168)."""

    NOT_ECT = 0
    ECT1 = 1
    ECT0 = 2
    CE = 3


def tos(dscp: int, ecn: Union[Ecn, int]) -> int:
    """IPv4 TOS byte from a DSCP (low 6 bits used) and an ECN code point."""
    return ((dscp & 0x3F) << 2) | (int(ecn) & 0x3)


def split_tos(tos_byte: int) -> Tuple[int, Ecn]:
    """Split a TOS byte into (DSCP, ECN)."""
    return (tos_byte & 0xFF) >> 2, Ecn(tos_byte & 0x3)


ClassLike = Union[TrafficClass, str]


@dataclass(frozen=True)
class DscpPlan:
    """DSCP value (0..63) for each traffic class.

    Defaults: credit 46 (EF), proactive_data 26 (AF31), reactive_data 30
    (AF33: highest drop precedence of AF3x, i.e. "red"), control 24 (CS3),
    legacy 0 (best effort).
    """

    credit: int = 46
    proactive_data: int = 26
    reactive_data: int = 30
    control: int = 24
    legacy: int = 0

    def dscp(self, cls: ClassLike) -> int:
        """DSCP of a class (a :class:`TrafficClass` or its name)."""
        return int(getattr(self, TrafficClass(cls).value))

    def classify(self, dscp: int) -> Optional[TrafficClass]:
        """Class assigned to a DSCP value, or None if unassigned."""
        for cls in TrafficClass:
            if self.dscp(cls) == dscp:
                return cls
        return None

    def tos(self, cls: ClassLike, ecn: Union[Ecn, int]) -> int:
        """Full TOS byte for a class and ECN code point."""
        return tos(self.dscp(cls), ecn)

    def validate(self) -> None:
        """Raise ValueError unless every value is an int in 0..63 and all are distinct."""
        seen = {}
        for cls in TrafficClass:
            v = getattr(self, cls.value)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 63:
                raise ValueError(f"DSCP for {cls.value} is {v!r}, must be an int in 0..63")
            if v in seen:
                raise ValueError(f"{seen[v]} and {cls.value} share DSCP {v}; values must be distinct")
            seen[v] = cls.value

    def to_dict(self) -> dict:
        """Plain dict (same keys as the Rust serde form)."""
        return asdict(self)
