"""Profile pfabric (Alizadeh et al., SIGCOMM'13 §4.1; docs/protocol.md §10) on flexpass_switch:
every class in one queue whose TM discipline is "pfabric" (docs/tm-api.md), the port's
buffer its limit, no ECN; the targets without a pFabric queue refuse the profile."""

import copy

import pytest

from flexpass_cp.config import ConfigError, load_config, parse_config
from flexpass_cp.config.entries import switch_entries
from flexpass_cp.config.queues import tm_settings
from flexpass_cp.entities import TableEntry
from flexpass_cp.p4_program import T_CLASSIFIER, T_QUEUE_THRESHOLDS

from test_config import base
from test_tm_client import FakeTm, _tm_config


def pfabric_raw(target="flexpass_switch"):
    raw = copy.deepcopy(base())
    raw["switches"]["s1"]["profile"] = "pfabric"
    raw["switches"]["s1"]["target"] = target
    raw["port_defaults"] = {"buffer": "36KB", "legacy_ecn_threshold": "65KB"}  # pFabric §5: ~2 BDP
    return raw


def _entries(cfg, table):
    return [e for e in switch_entries(cfg, "s1") if isinstance(e, TableEntry) and e.table == table]


def test_every_class_goes_to_the_one_pfabric_queue():
    cfg = parse_config(pfabric_raw())
    lq = cfg.bmv2_priority["legacy"]
    cls = _entries(cfg, T_CLASSIFIER)
    assert {e.params["qid"] for e in cls} == {lq}  # every DSCP and the default
    assert {e.params["color"] for e in cls} == {0}
    # pFabric marks nothing: no ECN threshold entry, even with legacy_ecn_threshold set.
    assert _entries(cfg, T_QUEUE_THRESHOLDS) == []


def test_tm_settings_one_pfabric_queue_with_the_ports_buffer():
    cfg = parse_config(pfabric_raw())
    ports = tm_settings(cfg, "s1")
    assert [p.port for p in ports] == [1, 2, 3, 4]
    for p in ports:
        (q,) = p.queues
        assert (q.queue, q.discipline, q.buffer_bytes) == (cfg.bmv2_priority["legacy"], "pfabric", 36_000)
        assert q.ecn_threshold is None and q.red_threshold is None and q.shaper_rate_bps is None


@pytest.mark.parametrize("target", ["simple_switch", "tofino"])
def test_targets_without_a_pfabric_queue_refuse_the_profile(target):
    with pytest.raises(ConfigError) as e:
        parse_config(pfabric_raw(target))
    assert str(e.value).startswith(
        f"switches.s1.profile: profile 'pfabric' needs target flexpass_switch")
    assert target in str(e.value)


def test_apply_writes_the_discipline(tmp_path):
    from flexpass_cp.backends.flexpass_switch import apply_tm_settings

    fake = FakeTm({"set_port": {"ok": True, "config": {}}, "set_queue": {"ok": True, "config": {}}})
    path = _tm_config(tmp_path, fake.port)
    text = open(path).read().replace("tm_port:", "profile: pfabric\n    tm_port:")
    open(path, "w").write(text)
    apply_tm_settings(load_config(path), "s1", "127.0.0.1", fake.port)
    _, *queues = fake.requests
    assert [(q["queue"], q["discipline"], q["buffer_bytes"]) for q in queues] == [(6, "pfabric", 30_000)]
    # The other profiles send no discipline: set_queue replaces the whole queue config, so
    # the queue a pfabric profile left behind is FIFO again (the switch's default).
    fake = FakeTm({"set_port": {"ok": True, "config": {}}, "set_queue": {"ok": True, "config": {}}})
    apply_tm_settings(load_config(_tm_config(tmp_path, fake.port)), "s1", "127.0.0.1", fake.port)
    assert len(fake.requests) == 4 and all("discipline" not in q for q in fake.requests[1:])
