"""flexpass-ctl behaviour that needs no switch: show, exit codes, messages."""

from pathlib import Path

import pytest

from flexpass_cp import cli

REPO = Path(__file__).resolve().parents[2]
DUMBBELL = str(REPO / "control-plane" / "configs" / "dumbbell.yaml")


def test_show_prints_derived_values_and_entries(capsys):
    assert cli.main(["show", "--config", DUMBBELL, "--switch", "s1"]) == 0
    out = capsys.readouterr().out
    assert "258.9 Mbit/s" in out  # 0.5 * 10G * 84/1622
    assert "classifier[dscp=46] -> set_class(qid=7, color=0, kind=1)" in out
    assert "set_queue_depth 8 1 7" in out


def test_config_error_exit_1(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("switches: {s1: {ports: {1: {link_rate: 0, mac: '02:00:00:00:00:01'}}}}\n"
                 "port_defaults: {w_q: 0.5, ecn_threshold: 1000, red_threshold: 2000}\n")
    assert cli.main(["show", "--config", str(p), "--switch", "s1"]) == 1
    err = capsys.readouterr().err
    assert "config error: switches.s1.ports.1.link_rate: must be > 0" in err


def test_unknown_switch_exit_1(capsys):
    assert cli.main(["show", "--config", DUMBBELL, "--switch", "s7"]) == 1
    assert "no switch named 's7'" in capsys.readouterr().err


def test_unreachable_switch_exit_2(tmp_path, capsys):
    pytest.importorskip("flexpass_cp.p4runtime_client")
    p4info = tmp_path / "p.txtpb"
    p4info.write_text("")
    js = tmp_path / "p.json"
    js.write_text("{}")
    rc = cli.main(["diff", "--config", DUMBBELL, "--switch", "s1", "--grpc-addr", "127.0.0.1:1",
                   "--timeout", "0.5", "--p4info", str(p4info), "--bmv2-json", str(js)])
    assert rc == 2
    assert "switch not reachable" in capsys.readouterr().err


def test_missing_build_exit_2(tmp_path, capsys):
    rc = cli.main(["apply", "--config", DUMBBELL, "--switch", "s1",
                   "--p4info", str(tmp_path / "none.txtpb"), "--bmv2-json", str(tmp_path / "none.json")])
    assert rc == 2
    assert "make p4" in capsys.readouterr().err


def test_every_target_has_one_backend():
    from flexpass_cp.backends import BACKENDS
    from flexpass_cp.config.targets import TARGETS

    assert set(BACKENDS) == set(TARGETS)
