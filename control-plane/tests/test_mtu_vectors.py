"""Frame sizes of an MTU and the credit rates they give, against docs/mtu-vectors.json.

The same file is checked by Rust (flexpass-core/tests/mtu_vectors.rs, the agent's and the
model's tests), so the wire crate, the agent, the model, the control plane's Derived values
(the P4 credit meter) and the NIC edge (nic/flexpass_nic.py) derive the credit rate
share·C·84/(84 + max_frame_wire(mtu)) from one definition (docs/protocol.md §9).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flexpass_cp import frames
from flexpass_cp.config import ConfigError, parse_config
from flexpass_cp.config.derive import derived

REPO = Path(__file__).resolve().parents[2]
VECTORS = json.loads((REPO / "docs" / "mtu-vectors.json").read_text())
sys.path.insert(0, str(REPO / "nic"))
from flexpass_nic import NicConfig  # noqa: E402

RATES = VECTORS["credit_rates"]


def _config(link_bps, share, mtu, **credit):
    """One switch, one port of `link_bps`; FlexPass at w_q = share, or naive ExpressPass."""
    profile = "naive" if share == 1.0 else "flexpass"
    return parse_config({
        "credit": {"mtu": mtu, **credit},
        "port_defaults": {"w_q": 0.5 if share == 1.0 else share, "ecn_threshold": "60KB",
                          "red_threshold": "100KB", "buffer": "300KB"},
        "switches": {"s1": {"profile": profile,
                            "ports": {1: {"link_rate": link_bps, "mac": "02:00:00:00:01:01"}}}},
    })


def test_file_metadata():
    assert VECTORS["credit_wire_bytes"] == frames.CREDIT_WIRE == 84
    assert VECTORS["wire_bytes_not_in_frame"] == frames.WIRE_BYTES_NOT_IN_FRAME == 24
    assert (VECTORS["default_mtu"], VECTORS["min_mtu"], VECTORS["max_mtu"]) == \
        (frames.DEFAULT_MTU, frames.MIN_MTU, frames.MAX_MTU)
    assert {1500, 9000} <= {f["mtu"] for f in VECTORS["frames"]}
    assert {1500, 9000} <= {r["mtu"] for r in RATES}


@pytest.mark.parametrize("f", VECTORS["frames"], ids=lambda f: str(f["mtu"]))
def test_frame_sizes(f):
    mtu = f["mtu"]
    assert frames.max_message_for_mtu(mtu) == f["max_message"]
    assert frames.max_payload_for_mtu(mtu) == f["max_payload"]
    assert frames.max_frame_wire(mtu) == f["max_frame_wire"]


@pytest.mark.parametrize("r", RATES, ids=lambda r: f"{r['mtu']}-{r['link_bps']:g}-{r['share']}")
def test_credit_rates_everywhere(r):
    mtu, link, share = r["mtu"], r["link_bps"], r["share"]
    bps, cps = r["credit_queue_bps"], r["credits_per_second"]
    # The shared definition.
    assert frames.credit_queue_bps(link, share, mtu) == pytest.approx(bps, rel=1e-12)
    assert frames.credits_per_second(link, share, mtu) == pytest.approx(cps, rel=1e-12)
    # The P4 control plane: the credit meter's rate.
    d = derived(_config(link, share, mtu), "s1", 1)
    assert d.config.max_frame_bytes == frames.max_frame_wire(mtu)
    assert d.credit_rate_bps == pytest.approx(bps, rel=1e-12)
    assert d.credits_per_second == pytest.approx(cps, rel=1e-12)
    # Every NIC edge and the agent count frame bytes (60 per minimum credit).
    frame = r["credit_limit_frame_bytes_per_s"]
    assert frames.credit_limit_frame_bytes_per_s(link, share, mtu) == pytest.approx(frame, rel=1e-12)
    assert frame == pytest.approx(cps * frames.frame_bytes(frames.CREDIT_WIRE), rel=1e-12)
    # The qdisc edge: its htb credit class (kbit/s of frames).
    nic = NicConfig(dev="eth0", link_mbit=link / 1e6, credit_share=share, mtu=mtu)
    assert nic.credit_kbit() * 1000 / 8 == pytest.approx(frame, rel=1e-12)


def test_config_mtu_and_max_frame_must_agree():
    assert _config(10e9, 0.5, 9000).max_frame_bytes == 9038
    assert _config(10e9, 0.5, 9000, max_frame_bytes=9038).mtu == 9000
    with pytest.raises(ConfigError, match="credit.max_frame_bytes.*9038"):
        _config(10e9, 0.5, 9000, max_frame_bytes=1538)
    with pytest.raises(ConfigError, match="credit.mtu"):
        _config(10e9, 0.5, 9216)
    # A max frame alone (older configs) still stands, and names its MTU.
    cfg = parse_config({"credit": {"max_frame_bytes": 1538},
                        "port_defaults": {"w_q": 0.5, "ecn_threshold": "60KB", "red_threshold": "100KB",
                                          "buffer": "300KB"},
                        "switches": {"s1": {"ports": {1: {"link_rate": "10Gbps", "mac": "02:00:00:00:01:01"}}}}})
    assert (cfg.max_frame_bytes, cfg.mtu) == (1538, 1500)


def test_nic_rejects_an_unsupported_mtu():
    with pytest.raises(ValueError, match="--mtu"):
        from flexpass_nic import commands
        commands(NicConfig(dev="eth0", link_mbit=1000, mtu=100))
