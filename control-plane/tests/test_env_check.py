"""flexpass_cp.env_check: the tiers' Python requirements, and how BMv2's Thrift CLI runs."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flexpass_cp import bmv2_queues, env_check


def fake_cli(tmp_path, site=None, shebang="#!/usr/bin/env python3"):
    """A simple_switch_CLI like BMv2's: a Python script that appends its site-packages."""
    site = site or tmp_path / "site-packages"
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text(textwrap.dedent(f"""\
        {shebang}
        import sys
        sys.path.append("{site}")
        import bm_runtime
        import thrift
        print("fake CLI ran with", sys.executable, sys.argv[1:])
        """))
    cli.chmod(0o755)
    return cli, site


def test_bm_runtime_is_found_where_bmv2_installed_it(tmp_path):
    cli, site = fake_cli(tmp_path)
    assert env_check.bmv2_python_dirs(str(cli)) == [site]
    p = env_check.bm_runtime_problem(str(cli))
    assert p and "bm_runtime" in p and str(site) in p and "reinstall BMv2" in p
    (site / "bm_runtime").mkdir(parents=True)
    (site / "bm_runtime" / "__init__.py").write_text("")
    assert env_check.bm_runtime_problem(str(cli)) is None


def test_the_cli_runs_with_this_interpreter(tmp_path):
    # Its shebang's python3 may be another interpreter, without thrift (issue: pyenv).
    cli, _ = fake_cli(tmp_path)
    assert env_check.cli_command(str(cli)) == [sys.executable, str(cli)]
    binary = tmp_path / "native_cli"
    binary.write_bytes(b"\x7fELF....")
    assert env_check.cli_command(str(binary)) == [str(binary)]


def test_missing_modules_are_named_with_the_fix(monkeypatch):
    real = env_check._importable
    monkeypatch.setattr(env_check, "_importable",
                        lambda m: "not installed" if m == "thrift" else real(m))
    probs = env_check._module_problems("bmv2")
    assert len(probs) == 1
    assert "'thrift' missing for " + sys.executable in probs[0]
    assert "pip install './control-plane[bmv2]'" in probs[0] and "make deps" in probs[0]


def test_run_cli_refuses_with_the_reason_before_running(tmp_path, monkeypatch):
    cli, _ = fake_cli(tmp_path)  # no bm_runtime next to it
    with pytest.raises(bmv2_queues.QueueConfigError) as e:
        bmv2_queues.run_cli(["show_ports"], 9090, cli=str(cli))
    assert "simple_switch_CLI cannot run" in str(e.value) and "bm_runtime" in str(e.value)


def test_command_line_reports_and_exits_nonzero(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(env_check.__file__).parents[1]))
    run = lambda *groups: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "flexpass_cp.env_check", *groups],
        capture_output=True, text=True, env=env)
    r = run("nonsense")
    assert r.returncode == 2 and "unknown group 'nonsense'" in r.stderr
    r = run("control-plane")
    # The python tier runs with the control plane's dependencies installed.
    assert r.returncode == 0, r.stdout
