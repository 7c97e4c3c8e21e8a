"""``flexpass-ctl run``: the resident controller of a FlexPass fabric.

One process holds P4Runtime mastership of every (P4Runtime) switch in a config
and keeps each switch equal to what the config and the link state
(:mod:`flexpass_cp.links`) say it should hold:

* **Link changes.**  When ``flexpass-ctl link-down`` / ``link-up`` changes the
  link state file (or the config changes), every switch is reconciled at once
  (checked every ``interval``, 20 ms by default): the affected ECMP groups are
  MODIFYed on every switch, routes that lost every next hop are withdrawn, and
  nothing else is written — computed from what each switch held after its last
  reconcile, without reading it back first (its stream never broke).
* **A switch that restarts** (its stream breaks) is reconnected as soon as its
  P4Runtime server is back; it runs no pipeline then, so the pipeline is pushed,
  every entity inserted and its queue / traffic-manager settings applied.
* **Divergence.**  Every ``resync`` seconds each switch is read back and
  repaired (an entry deleted by hand comes back).
* **Mastership.**  Arbitration with ``election_id``; a restarted controller gets
  mastership back with the same id as soon as the switch dropped the old stream
  (at once when the old process is gone); ``takeover`` bids above a live primary.
  When a controller with a higher id becomes primary (an operator's
  ``flexpass-ctl apply --election-id 2``), this one stays connected as a backup,
  writes nothing, and reconciles when the switch says it is primary again.
  Switches keep every entry while no controller is connected (P4Runtime: state
  belongs to the device), so a restart costs no writes: the first reconcile
  reads back and finds nothing to do.

* **Failure detection** (``monitor``, ``flexpass-ctl run --detect probe``): a
  :class:`~flexpass_cp.linkprobe.LinkMonitor` probes every link between two
  switches in its own thread; a link it finds dead (or alive again) is recorded
  in the link state file exactly as ``flexpass-ctl link-down`` (``link-up``)
  would, so the same ECMP-group change follows (next-hop order kept, both
  directions symmetric) and ``link-up`` by hand stays possible.

Events are reported as dicts (``flexpass-ctl run`` prints one JSON line each,
with ``t``: Unix time) — ``start``, ``primary``, ``backup``, ``unreachable``, ``lost``,
``detected`` (link, state, silence), ``links``, ``reconciled`` (reason, pipeline pushed, writes by operation,
duration), ``error``, ``stop``.

The switch connection (``connect``) and the queue settings (``apply_queues``)
are injectable, so the logic is tested without a switch.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import links as links_mod
from .backends import backend_for
from .config import Config, ConfigError
from .config.entries import switch_entries
from .config.topology import describe_link, down_links
from .entities import plan_updates


@dataclass
class Session:
    name: str
    client: object = None
    reason: Optional[str] = "start"  # pending reconcile and why (None: in sync)
    last_sync: float = 0.0
    last_error: Optional[str] = None
    next_attempt: float = 0.0
    reconciles: int = 0
    backup: bool = False
    queues_pending: bool = False  # set when the pipeline was pushed, until the settings are applied
    pushed_unreported: bool = False
    unreported: list = field(default_factory=list)
    first_reason: Optional[str] = None
    synced: Optional[list] = None  # what the switch held after the last reconcile


def _stat(path: Path):
    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size, st.st_ino)
    except FileNotFoundError:
        return None


@dataclass
class Controller:
    config_path: Path
    p4info: Path
    bmv2_json: Path
    links: Optional[Path] = None
    switches: Optional[Sequence[str]] = None
    election_id: Tuple[int, int] = (0, 1)
    takeover: bool = False
    resync_s: float = 5.0
    connect_timeout_s: float = 0.5
    rpc_timeout_s: float = 5.0
    retry_s: float = 0.1
    queues: bool = True
    connect: Optional[Callable] = None
    apply_queues: Optional[Callable] = None
    emit: Callable[[dict], None] = print
    clock: Callable[[], float] = time.monotonic
    sessions: Dict[str, Session] = field(default_factory=dict)
    monitor: Optional[object] = None  # a linkprobe.LinkMonitor: failure detection

    def __post_init__(self):
        self.config_path = Path(self.config_path)
        self.links_path = links_mod.state_path(self.config_path, self.links)
        self._stamp = None
        self.cfg: Optional[Config] = None
        self.desired: Dict[str, list] = {}
        self._reload(first=True)
        names = list(self.switches) if self.switches else sorted(
            n for n in self.cfg.switches if backend_for(self.cfg, n).resident)
        for n in names:
            # unknown names are a ConfigError now, not later
            if not backend_for(self.cfg, n).resident:
                raise ConfigError(f"switches.{n}.target", "flexpass-ctl run drives P4Runtime switches "
                                                          "(BMv2, flexpass_switch); Tofino: flexpass-ctl apply")
            self.sessions[n] = Session(n)
        self.emit({"event": "start", "switches": names, "election_id": self.election_id[1],
                   "down_links": down_links(self.cfg), "links_file": str(self.links_path)})

    # -- config and link state ---------------------------------------------------

    def _reload(self, first: bool = False) -> bool:
        stamp = (_stat(self.config_path), _stat(self.links_path))
        if stamp == self._stamp:
            return False
        try:
            cfg = links_mod.load(self.config_path, self.links)
        except ConfigError as e:
            if first:
                raise
            self.emit({"event": "error", "error": f"config or link state rejected, keeping the last one: {e}"})
            self._stamp = stamp
            return False
        self._stamp = stamp
        old = self.desired
        self.cfg = cfg
        self.desired = {n: switch_entries(cfg, n) for n in cfg.switches if backend_for(cfg, n).resident}
        if not first:
            self.emit({"event": "links", "down_links": down_links(cfg)})
        return old != self.desired

    def poll_links(self) -> List[dict]:
        """One round of failure detection: links the monitor found dead or alive again
        are recorded in the link state file (as link-down / link-up would); the next
        tick applies them."""
        if self.monitor is None:
            return []
        out = []
        for ch in self.monitor.poll(self.clock()):
            a, b = ch["link"]
            spec = f"{a[0]}:{a[1]}"
            try:
                changed, ends, now_down = links_mod.set_link(self.config_path, spec, ch["down"], self.links)
            except ConfigError as e:
                self.emit({"event": "error", "error": f"detected {spec} {'down' if ch['down'] else 'up'}: {e}"})
                continue
            ev = {"event": "detected", "link": describe_link(self.cfg, ends), "state": "down" if ch["down"] else "up",
                  "recorded": changed, "down_links": now_down}
            if "silent_s" in ch:
                ev.update(silent_ms=round(ch["silent_s"] * 1e3, 1), directions=ch["directions"])
            self.emit(ev)
            out.append(ev)
        return out

    def _monitor_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.poll_links()
            except Exception as e:  # noqa: BLE001 (keep detecting; say why)
                self.emit({"event": "error", "error": f"failure detection: {e}"})
            stop.wait(self.monitor.interval_s)

    # -- switches ------------------------------------------------------------------

    def _connect(self, name: str):
        if self.connect is not None:
            return self.connect(self.cfg.switch(name), self)
        return backend_for(self.cfg, name).session(self.election_id, self.connect_timeout_s,
                                                   self.rpc_timeout_s, self.takeover)

    def _apply_queues(self, name: str) -> Optional[int]:
        if not self.queues:
            return None
        if self.apply_queues is not None:
            return self.apply_queues(self.cfg, name)
        return backend_for(self.cfg, name).apply_queues()

    def _drop(self, s: Session) -> None:
        if s.client is not None:
            try:
                s.client.close()
            except Exception:  # noqa: BLE001 (already broken)
                pass
        s.client = None

    def _ensure_session(self, s: Session, now: float) -> bool:
        if s.client is not None and s.client.alive:
            if s.client.is_primary:
                if s.backup:  # told we are primary again (the higher controller left)
                    s.backup = False
                    self.emit({"event": "primary", "switch": s.name, "election_id": s.client.election_id[1],
                               "took_over": False, "regained": True})
                    s.reason = s.reason or "primary regained"
                return True
            # Another controller with a higher election id is primary: stay connected as a
            # backup (P4Runtime tells us when we are primary again); write nothing.
            if not s.backup:
                s.backup = True
                pid = s.client.primary_election_id
                self.emit({"event": "backup", "switch": s.name,
                           "primary_election_id": None if pid is None else pid[1]})
            return False
        if s.client is not None:
            self.emit({"event": "lost", "switch": s.name, "error": "stream ended (switch restarted or gone)"})
            s.synced = None
            self._drop(s)
            s.backup = False
            s.reason = "reconnect"
        if now < s.next_attempt:
            return False
        s.next_attempt = now + self.retry_s
        try:
            s.client = self._connect(s.name)
        except Exception as e:  # noqa: BLE001 (P4RuntimeError, NotPrimary, transport)
            msg = str(e)
            if msg != s.last_error:
                self.emit({"event": "unreachable", "switch": s.name, "error": msg})
            s.last_error = msg
            return False
        s.last_error = None
        eid = getattr(s.client, "election_id", self.election_id)
        self.emit({"event": "primary", "switch": s.name, "election_id": eid[1] if eid[0] == 0 else list(eid),
                   "took_over": tuple(eid) != tuple(self.election_id)})
        s.reason = s.reason or "reconnect"
        return True

    def reconcile(self, s: Session, reason: str) -> Optional[dict]:
        t0 = time.monotonic()
        queues = None
        desired = self.desired[s.name]
        try:
            if reason == "links" and s.synced is not None and not s.queues_pending:
                # Fast path for a link change: the switch held `s.synced` at the last
                # reconcile and its stream never broke (same process, same pipeline), so
                # the difference is written without reading it back first (the periodic
                # resync reads; a write that fails drops the session: full reconcile).
                updates = plan_updates(desired, s.synced)
                s.client.write(updates)
            else:
                if s.client.set_pipeline(self.p4info, self.bmv2_json):
                    # A fresh (restarted) switch: its queue / TM settings are gone too.
                    s.queues_pending = s.pushed_unreported = True
                updates = s.client.apply(desired)
            s.unreported.extend(updates)
            if s.queues_pending and self.queues:  # after the entries: forwarding first
                queues = self._apply_queues(s.name)
            s.queues_pending = False
        except Exception as e:  # noqa: BLE001
            self.emit({"event": "error", "switch": s.name, "reason": reason, "error": str(e)})
            s.synced = None
            self._drop(s)
            s.reason = s.first_reason or reason
            s.first_reason = s.reason
            return None
        # Writes of an attempt that failed half-way count with the one that finished.
        updates, s.unreported = s.unreported, []
        counts: Dict[str, int] = {}
        for u in updates:
            counts[u.op] = counts.get(u.op, 0) + 1
        ev = {"event": "reconciled", "switch": s.name, "reason": reason, "pipeline_pushed": s.pushed_unreported,
              "writes": len(updates), "updates": counts, "queues": queues,
              "ms": round((time.monotonic() - t0) * 1e3, 1),
              "changes": [u.describe() for u in updates][:50]}
        self.emit(ev)
        s.reason, s.first_reason, s.pushed_unreported, s.last_sync = None, None, False, self.clock()
        s.synced = desired
        s.reconciles += 1
        return ev

    def tick(self) -> None:
        """One pass: pick up link/config changes, reconnect lost switches,
        reconcile what needs it."""
        if self._reload():
            for s in self.sessions.values():
                s.reason = s.reason or "links"
        now = self.clock()
        for s in self.sessions.values():
            if not self._ensure_session(s, now):
                continue
            reason = s.reason or ("resync" if now - s.last_sync >= self.resync_s else None)
            if reason:
                self.reconcile(s, reason)

    def in_sync(self) -> bool:
        return all(s.client is not None and s.reason is None for s in self.sessions.values())

    def run(self, interval_s: float = 0.02, stop: Optional[threading.Event] = None,
            once_within_s: Optional[float] = None) -> bool:
        """Tick every `interval_s` until `stop` is set; with `once_within_s`, until
        every switch is in sync (True) or that many seconds passed (False)."""
        stop = stop or threading.Event()
        deadline = None if once_within_s is None else time.monotonic() + once_within_s
        # Detection in its own thread: a reconcile (tens to hundreds of ms) must not
        # delay the probes.
        mon_stop = threading.Event()
        mon = None
        if self.monitor is not None and once_within_s is None:
            mon = threading.Thread(target=self._monitor_loop, args=(mon_stop,), daemon=True, name="link-probes")
            mon.start()
        try:
            while not stop.is_set():
                self.tick()
                if deadline is not None and (self.in_sync() or time.monotonic() > deadline):
                    return self.in_sync()
                stop.wait(interval_s)
            return self.in_sync()
        finally:
            mon_stop.set()
            if mon is not None:
                mon.join(2)
            self.close()

    def close(self) -> None:
        for s in self.sessions.values():
            self._drop(s)
        if self.monitor is not None:
            self.monitor.close()
        self.emit({"event": "stop"})
