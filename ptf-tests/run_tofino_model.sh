#!/usr/bin/env bash
# Run the FlexPass PTF feature tests on the Tofino model: tofino-model and
# bf_switchd from the installed SDE (open-p4studio or Intel SDE), the program
# of p4src/tna compiled by `make p4-tofino`, configured over BfRt by flexpass-ctl.
#
#   sudo SDE_INSTALL=/path/to/sde/install ptf-tests/run_tofino_model.sh [ptf test names]
#
# 1. checks prerequisites; if one is missing prints "SKIPPED tofino-model: <why>"
#    and exits 0 (root, ip netns, SDE_INSTALL (or SDE/install) with
#    bin/tofino-model and bin/bf_switchd, the SDE's bfrt_grpc Python client,
#    ptf, and build/p4-tofino/tofino or p4c with the Tofino backend to make it);
# 2. creates a private namespace fp-tfm-<pid> with one veth pair per dev_port N
#    of the config: veth<2N> (model side) and veth<2N+1> (PTF side);
# 3. writes ports.json and a bf_switchd .conf with absolute paths to the
#    compiled program into the log directory;
# 4. starts tofino-model and bf_switchd (BfRt gRPC 127.0.0.1:50052, status
#    server 7777: reachable only inside the namespace; --skip-port-add: the
#    config's $PORT entries add the ports);
# 5. flexpass-ctl apply (ports, P4 tables, meters, TM), applies again (must be
#    "no change") and diffs (must be "in sync");
# 6. runs ptf: the timing-independent tests of flexpass_tests.py and the
#    queue-pause variants of tofino_model_tests.py (see that file for what
#    the model does not emulate);
# 7. ALWAYS (trap) kills the processes it started, by PID, and deletes the
#    namespace (which deletes the veths).
#
# Tofino (tf1) only: the suite's port numbers are Tofino's (Tofino2's front
# ports start at dev_port 8).  Environment: SDE_INSTALL / SDE, PYTHON,
# TOFINO_LOG_DIR (default build/ptf-tofino-logs), FLEXPASS_TOFINO_BUILD
# (default build/p4-tofino/tofino).
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
CHIP=tofino
BUILD="${FLEXPASS_TOFINO_BUILD:-$REPO/build/p4-tofino/$CHIP}"
LOGDIR="${TOFINO_LOG_DIR:-$REPO/build/ptf-tofino-logs}"
CONFIG="$REPO/ptf-tests/tofino-model-config.yaml"
NS="fp-tfm-$$"
GRPC_ADDR="127.0.0.1:50052"
STATUS_PORT=7777
MODEL_PID=""
SWITCHD_PID=""
NS_CREATED=0

skip() { echo "SKIPPED tofino-model: $*"; exit 0; }
die() { echo "tofino-model: ERROR: $*" >&2; exit 1; }

stop() {  # stop <pid> <name>: TERM its process group (started by setsid), KILL after 5 s
    local pid=$1
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; }
        wait "$pid" 2>/dev/null
        echo "tofino-model: stopped $2 (pid $pid)"
    fi
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop "$SWITCHD_PID" bf_switchd
    stop "$MODEL_PID" tofino-model
    if [ "$NS_CREATED" = 1 ]; then
        ip netns del "$NS" 2>/dev/null && echo "tofino-model: deleted namespace $NS"
    fi
    exit "$rc"
}

# ---- 1. prerequisites ------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (network namespace and veth pairs); run: sudo -E $0"
command -v ip >/dev/null || skip "iproute2 'ip' not found"
command -v setsid >/dev/null || skip "setsid (util-linux) not found"
if [ -z "${SDE_INSTALL:-}" ] && [ -n "${SDE:-}" ]; then SDE_INSTALL="$SDE/install"; fi
[ -n "${SDE_INSTALL:-}" ] || skip "SDE_INSTALL (or SDE) is not set: the Tofino SDE is not installed (README: Tofino)"
[ -x "$SDE_INSTALL/bin/tofino-model" ] || skip "no $SDE_INSTALL/bin/tofino-model (SDE built without the model)"
[ -x "$SDE_INSTALL/bin/bf_switchd" ] || skip "no $SDE_INSTALL/bin/bf_switchd"
export SDE_INSTALL
export LD_LIBRARY_PATH="$SDE_INSTALL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
command -v ptf >/dev/null || skip "ptf not found: pip install './control-plane[ptf]'"
why=$(PYTHONPATH="$REPO/control-plane" "$PYTHON" -c \
    'from flexpass_cp.bfrt_client import load_bfrt_grpc as l; l()' 2>&1 >/dev/null | tail -n 1)
[ -z "$why" ] || skip "$why"
if [ ! -f "$BUILD/bfrt.json" ] || [ -n "$(find "$REPO/p4src" -name '*.p4' -newer "$BUILD/bfrt.json" -print -quit)" ]; then
    P4C="${P4C:-$SDE_INSTALL/bin/p4c}"
    "$P4C" --help-targets 2>/dev/null | grep -qx tofino-tna \
        || skip "$BUILD is missing or stale and $P4C has no Tofino backend (make p4-tofino)"
    make -C "$REPO" --no-print-directory p4-tofino P4C="$P4C" || die "make p4-tofino failed"
fi
BIN=$(ls "$BUILD"/pipe/tofino*.bin 2>/dev/null | head -n 1)
[ -f "$BUILD/pipe/context.json" ] && [ -n "$BIN" ] || die "$BUILD has no pipe/context.json or pipe/tofino.bin"

# Dev ports of the config (port numbers are dev_ports).
PORTS=$(PYTHONPATH="$REPO/control-plane" "$PYTHON" -c \
    "from flexpass_cp.config import load_config as l; print(*sorted(l('$CONFIG').switch('s1').ports))") \
    || die "cannot read $CONFIG"

# ---- 2./3. namespace, veths, ports.json, conf ------------------------------------
mkdir -p "$LOGDIR"
trap cleanup EXIT INT TERM
ip netns add "$NS" 2>/dev/null || skip "cannot create network namespace (ip netns add failed: no CAP_SYS_ADMIN or no netns support)"
NS_CREATED=1
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up || die "cannot bring up lo in $NS"
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
PTF_IFS=()
for p in $PORTS; do
    a="veth$((2 * p))"; b="veth$((2 * p + 1))"
    nsx ip link add "$a" type veth peer name "$b" || die "cannot create veth $a/$b"
    for i in "$a" "$b"; do
        nsx ip link set "$i" mtu 10240 up
        if command -v ethtool >/dev/null; then
            for off in rx tx sg tso gso gro lro rxvlan txvlan; do nsx ethtool -K "$i" "$off" off >/dev/null 2>&1 || true; done
        fi
    done
    PTF_IFS+=(--interface "$p@$b")
done
"$PYTHON" - "$LOGDIR" "$BUILD" "$BIN" "$CHIP" $PORTS <<'EOF' || die "cannot write ports.json / conf"
import json, os, sys
logdir, build, binary, chip, ports = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
json.dump({"PortToVeth": [{"device_port": int(p), "veth1": 2 * int(p), "veth2": 2 * int(p) + 1}
                          for p in ports]}, open(os.path.join(logdir, "ports.json"), "w"), indent=1)
build = os.path.abspath(build)
conf = {"chip_list": [{"chip_family": chip, "instance": 0,
                       "pcie_sysfs_prefix": "/sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0",
                       "sds_fw_path": "share/tofino_sds_fw/avago/firmware"}],
        "p4_devices": [{"device-id": 0, "agent0": "lib/libpltfm_mgr.so", "p4_programs": [{
            "program-name": "flexpass", "bfrt-config": os.path.join(build, "bfrt.json"),
            "p4_pipelines": [{"p4_pipeline_name": "pipe", "context": os.path.join(build, "pipe", "context.json"),
                              "config": os.path.abspath(binary), "pipe_scope": [0, 1, 2, 3],
                              "path": build}]}]}]}
json.dump(conf, open(os.path.join(logdir, "flexpass.conf"), "w"), indent=1)
EOF

# ---- 4. model + bf_switchd ------------------------------------------------------------
echo "tofino-model: starting tofino-model and bf_switchd in $NS (logs: $LOGDIR)"
# setsid: each process leads its own process group, which stop() ends as a whole;
# `ip netns exec` and `env` exec, so $! is the process itself.
setsid ip netns exec "$NS" "$SDE_INSTALL/bin/tofino-model" --chip-type 2 -d 1 -f "$LOGDIR/ports.json" \
    --p4-target-config "$LOGDIR/flexpass.conf" --install-dir "$SDE_INSTALL" --log-dir "$LOGDIR" \
    >"$LOGDIR/model.stdout" 2>&1 &
MODEL_PID=$!
sleep 2
kill -0 "$MODEL_PID" 2>/dev/null || { tail -n 20 "$LOGDIR/model.stdout" >&2; die "tofino-model exited at start"; }
setsid ip netns exec "$NS" env SDE="${SDE:-}" SDE_INSTALL="$SDE_INSTALL" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
    "$SDE_INSTALL/bin/bf_switchd" --install-dir "$SDE_INSTALL" --conf-file "$LOGDIR/flexpass.conf" \
    --init-mode cold --background --skip-port-add --status-port "$STATUS_PORT" --bfrt-grpc-port "${GRPC_ADDR##*:}" \
    >"$LOGDIR/switchd.stdout" 2>&1 &
SWITCHD_PID=$!
ready=0
for _ in $(seq 1 240); do   # bf_switchd on the model can take a minute
    kill -0 "$SWITCHD_PID" 2>/dev/null || { tail -n 20 "$LOGDIR/switchd.stdout" >&2; die "bf_switchd exited at start"; }
    kill -0 "$MODEL_PID" 2>/dev/null || { tail -n 20 "$LOGDIR/model.stdout" >&2; die "tofino-model exited"; }
    if nsx "$PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', ${GRPC_ADDR##*:}), 0.5); socket.create_connection(('127.0.0.1', $STATUS_PORT), 0.5)" 2>/dev/null; then
        ready=1; break
    fi
    sleep 0.5
done
[ "$ready" = 1 ] || die "bf_switchd did not open BfRt $GRPC_ADDR / status $STATUS_PORT within 120 s"

# ---- 5. control plane -----------------------------------------------------------------
CTL=(env PYTHONPATH="$REPO/control-plane" "$PYTHON" -m flexpass_cp.cli)
CTL_ARGS=(--config "$CONFIG" --switch s1 --grpc-addr "$GRPC_ADDR" --tofino-build "$BUILD" --timeout 30)
echo "tofino-model: flexpass-ctl apply"
nsx "${CTL[@]}" apply "${CTL_ARGS[@]}" >"$LOGDIR/apply.log" 2>&1 || { cat "$LOGDIR/apply.log" >&2; die "flexpass-ctl apply failed"; }
tail -n 2 "$LOGDIR/apply.log"
nsx "${CTL[@]}" apply "${CTL_ARGS[@]}" >"$LOGDIR/apply2.log" 2>&1 || { cat "$LOGDIR/apply2.log" >&2; die "second flexpass-ctl apply failed"; }
grep -q "no change" "$LOGDIR/apply2.log" || { cat "$LOGDIR/apply2.log" >&2; die "second apply was not a no-op"; }
nsx "${CTL[@]}" diff "${CTL_ARGS[@]}" >"$LOGDIR/diff.log" 2>&1 || { cat "$LOGDIR/diff.log" >&2; die "flexpass-ctl diff failed"; }
grep -q "in sync" "$LOGDIR/diff.log" || { cat "$LOGDIR/diff.log" >&2; die "diff after apply is not empty"; }
echo "tofino-model: apply is idempotent (second apply: no change; diff: in sync)"

# ---- 6. ptf -----------------------------------------------------------------------------
TESTS=("$@")
if [ ${#TESTS[@]} -eq 0 ]; then
    TESTS=(flexpass_tests.Classification flexpass_tests.SymmetricEcmp flexpass_tests.LegacyUntouched
           flexpass_tests.MalformedAndTtl tofino_model_tests.CreditMeterModel
           tofino_model_tests.EcnMarkingModel tofino_model_tests.SelectiveDropModel)
fi
TEST_PARAMS="grpc_addr='$GRPC_ADDR';p4_name='flexpass';config='$CONFIG';repo='$REPO'"
echo "tofino-model: running ptf (log dir $LOGDIR)"
nsx env PYTHONPATH="$REPO/control-plane" SDE_INSTALL="$SDE_INSTALL" ptf --test-dir "$REPO/ptf-tests" \
    "${PTF_IFS[@]}" --test-params "$TEST_PARAMS" --log-dir "$LOGDIR" "${TESTS[@]}"
rc=$?
echo "tofino-model: counters after the run:"
nsx "${CTL[@]}" counters "${CTL_ARGS[@]}" || true
for p in "$SWITCHD_PID:bf_switchd" "$MODEL_PID:tofino-model"; do
    kill -0 "${p%%:*}" 2>/dev/null || { echo "tofino-model: ERROR: ${p#*:} is no longer running (crashed?)" >&2; rc=1; }
done
exit $rc
