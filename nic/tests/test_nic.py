"""The NIC-edge port configuration (pure command generation; no root needed)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from flexpass_nic import NicConfig, commands  # noqa: E402


def by_class(cmds):
    out = {}
    for c in cmds:
        if "classid" in c:
            out[c[c.index("classid") + 1]] = c
    return out


def rate(cmd, key="rate"):
    return int(cmd[cmd.index(key) + 1].removesuffix("kbit"))


def test_credit_class_is_w_q_scaled_and_strict():
    cls = by_class(commands(NicConfig(dev="eth0", link_mbit=10_000, w_q=0.5)))
    # share·C·84/(84+F) counted as htb counts a credit, its 60-byte frame (84 on the wire).
    expected = int(0.5 * 10_000_000 * 60 / (84 + 1538))
    assert rate(cls["1:10"]) == expected == rate(cls["1:10"], "ceil")
    assert cls["1:10"][cls["1:10"].index("prio") + 1] == "0"
    # FlexPass and legacy split the link w_q : 1 − w_q and may borrow up to C.
    assert rate(cls["1:20"]) + expected == pytest.approx(5_000_000, abs=8)
    assert rate(cls["1:30"]) == 5_000_000
    assert rate(cls["1:20"], "ceil") == rate(cls["1:30"], "ceil") == 10_000_000


def test_expresspass_share_and_red_aqm():
    cmds = commands(NicConfig(dev="eth0", link_mbit=1000, credit_share=1.0, aqm="red"))
    assert rate(by_class(cmds)["1:10"]) == int(1_000_000 * 60 / 1622)
    red = [c for c in cmds if "red" in c]
    assert red and "ecn" in red[0] and red[0][red[0].index("min") + 1] == "60000"


def test_dscp_filters_follow_the_plan():
    cmds = commands(NicConfig(dev="eth0", link_mbit=1000))
    filters = {c[c.index("tos") + 1]: c[c.index("flowid") + 1] for c in cmds if "filter" in c}
    assert filters == {hex(46 << 2): "1:10", hex(26 << 2): "1:20", hex(30 << 2): "1:20", hex(24 << 2): "1:20"}


@pytest.mark.parametrize("bad, msg", [
    (dict(link_mbit=0), "link-mbit"),
    (dict(w_q=1.0), "w-q"),
    (dict(k_bytes=200_000), "K <"),
    (dict(aqm="fq"), "aqm"),
    (dict(dscp={"credit": 46, "proactive_data": 46, "reactive_data": 30, "control": 24, "legacy": 0}), "distinct"),
])
def test_bad_config_is_rejected_with_the_field(bad, msg):
    with pytest.raises(ValueError, match=msg):
        commands(NicConfig(dev="eth0", **{"link_mbit": 1000, **bad}))
