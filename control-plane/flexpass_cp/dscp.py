"""DSCP plan and ECN code points (docs/protocol.md, "DSCP plan and queues").

Mirrors ``DscpPlan``/``TrafficClass``/``Ecn``/``tos`` in the Rust crate
``flexpass-wire``: the five FlexPass classes, and PPT's eight priorities P0..P7
(``PptPriority``, Rust ``TrafficClass::Priority(p)``; SIGCOMM'24 §4.2: P0-P3
carry the high-priority loop, P4-P7 the low-priority loop).
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


#: PPT priority levels (P0 highest).
PRIORITY_LEVELS = 8
#: Default DSCP of P0..P7: 32 + p (``0b100ppp``).
DEFAULT_PRIORITY_DSCP: Tuple[int, ...] = tuple(32 + p for p in range(PRIORITY_LEVELS))


@dataclass(frozen=True)
class PptPriority:
    """PPT priority class Pp (0 = highest); a PPT switch serves queue p."""

    level: int

    def __post_init__(self) -> None:
        if isinstance(self.level, bool) or not isinstance(self.level, int) \
                or not 0 <= self.level < PRIORITY_LEVELS:
            raise ValueError(f"PPT priority must be an int in 0..{PRIORITY_LEVELS - 1}, got {self.level!r}")

    @property
    def queue(self) -> int:
        return self.level

    @property
    def is_lcp(self) -> bool:
        """P4..P7: the low-priority loop's half."""
        return self.level >= PRIORITY_LEVELS // 2

    @property
    def is_red(self) -> bool:
        return False

    @property
    def value(self) -> str:
        return f"priority{self.level}"


#: The eight PPT priority classes, P0 first.
PRIORITIES: Tuple[PptPriority, ...] = tuple(PptPriority(p) for p in range(PRIORITY_LEVELS))

ClassLike = Union[TrafficClass, str, PptPriority]


@dataclass(frozen=True)
class DscpPlan:
    """DSCP value (0..63) for each traffic class.

    Defaults: credit 46 (EF), proactive_data 26 (AF31), reactive_data 30
    (AF33: highest drop precedence of AF3x, i.e. "red"), control 24 (CS3),
    legacy 0 (best effort); PPT priorities P0..P7 32..39.
    """

    credit: int = 46
    proactive_data: int = 26
    reactive_data: int = 30
    control: int = 24
    legacy: int = 0
    priority: Tuple[int, ...] = DEFAULT_PRIORITY_DSCP

    def dscp(self, cls: ClassLike) -> int:
        """DSCP of a class (a :class:`TrafficClass`, its name, or a :class:`PptPriority`)."""
        if isinstance(cls, PptPriority):
            return int(self.priority[cls.level])
        return int(getattr(self, TrafficClass(cls).value))

    def classify(self, dscp: int) -> Optional[Union[TrafficClass, PptPriority]]:
        """Class assigned to a DSCP value, or None if unassigned."""
        for cls in all_classes():
            if self.dscp(cls) == dscp:
                return cls
        return None

    def tos(self, cls: ClassLike, ecn: Union[Ecn, int]) -> int:
        """Full TOS byte for a class and ECN code point."""
        return tos(self.dscp(cls), ecn)

    def validate(self) -> None:
        """Raise ValueError unless every value is an int in 0..63 and all thirteen (five
        classes, eight PPT priorities) are distinct."""
        if not isinstance(self.priority, (tuple, list)) or len(self.priority) != PRIORITY_LEVELS:
            raise ValueError(f"priority must list {PRIORITY_LEVELS} DSCPs (P0..P7), got {self.priority!r}")
        seen = {}
        for cls in all_classes():
            v = self.priority[cls.level] if isinstance(cls, PptPriority) else getattr(self, cls.value)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 63:
                raise ValueError(f"DSCP for {cls.value} is {v!r}, must be an int in 0..63")
            if v in seen:
                raise ValueError(f"{seen[v]} and {cls.value} share DSCP {v}; values must be distinct")
            seen[v] = cls.value

    def to_dict(self) -> dict:
        """Plain dict (same keys as the Rust serde form)."""
        d = asdict(self)
        d["priority"] = list(self.priority)
        return d


def all_classes() -> Tuple[Union[TrafficClass, PptPriority], ...]:
    """Every class a DSCP plan assigns: the five FlexPass classes, then P0..P7."""
    return tuple(TrafficClass) + PRIORITIES
