"""--tm-qdepth-units packets, on its own switch (a separate module, so the
bytes-mode switch of test_switch.py is stopped first)."""

from test_switch import REPO, TM_PORT, TmClient, _ce_marks_in_burst, start_switch, stop_switch


def test_enq_qdepth_in_packets():
    """Only packets with more than 3 packets ahead (6, 7, 8 of the burst) are
    marked; in bytes mode it is packets 3..8 (test_enq_qdepth_in_bytes)."""
    proc = start_switch(REPO / "build/switch-target/integration-logs/packets", "--tm-qdepth-units", "packets")
    try:
        with TmClient("127.0.0.1", TM_PORT) as c:
            assert _ce_marks_in_burst(c, 8) == 3
    finally:
        stop_switch(proc)
