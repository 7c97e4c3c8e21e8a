"""p4src/tna/report_resources.py reads p4c's Tofino reports (shapes from
p4c backends/tofino/compiler_interfaces/schemas: resources_schema.py,
metrics_schema.py; table_summary.log from bf-p4c mau/table_summary.cpp)."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("report_resources", REPO / "p4src" / "tna" / "report_resources.py")
rr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rr)


def test_report_from_compiler_outputs(tmp_path):
    logs = tmp_path / "pipe" / "logs"
    logs.mkdir(parents=True)
    (logs / "table_summary.log").write_text("...\nNumber of stages in table allocation: 3\n"
                                            "  Number of stages for ingress table allocation: 3\n")
    (logs / "metrics.json").write_text(json.dumps({"mau": {"srams": 21, "tcams": 4, "map_rams": 6,
                                                            "logical_tables": 11}}))
    stage = lambda n, s, t: {"stage_number": n,  # noqa: E731
                             "rams": {"srams": [{"row": 0, "column": i, "usages": [{}]} for i in range(s)]},
                             "tcams": {"tcams": [{"row": i, "column": 0, "usages": [{}]} for i in range(t)]},
                             "logical_tables": {"tables": []}}
    (logs / "resources.json").write_text(json.dumps({"resources": {"mau": {"nStages": 12, "mau_stages": [
        stage(0, 8, 2), stage(1, 9, 2), stage(2, 4, 0), stage(3, 0, 0)]}}}))
    out = rr.report(tmp_path)
    assert "Number of stages in table allocation: 3" in out
    assert "SRAMs 21, TCAMs 4" in out
    assert "3 stages used; SRAMs 21, TCAMs 4" in out


def test_report_without_outputs(tmp_path):
    (tmp_path / "bfrt.json").write_text("{}")
    assert "no resource report" in rr.report(tmp_path) and "bfrt.json" in rr.report(tmp_path)
