"""The netns tests' session: a SIGTERM (a `timeout` around pytest, CI cancelling a job) ends
the run like Ctrl-C, so every fixture's teardown still stops the processes it started and
deletes the namespaces and veths it made (the default SIGTERM ends Python at once and left
namespaces behind)."""

import signal


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    signal.signal(signal.SIGTERM, _interrupt)
