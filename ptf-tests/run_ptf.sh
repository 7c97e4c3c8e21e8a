#!/usr/bin/env bash
# Run the FlexPass PTF suite against BMv2 simple_switch_grpc.
#
#   sudo ptf-tests/run_ptf.sh [ptf test names, e.g. flexpass_tests.CreditMeter]
#
# 1. checks prerequisites; if one is missing prints "SKIPPED ptf: <why>" and
#    exits 0 (root, ip netns, simple_switch_grpc, simple_switch_CLI, ptf,
#    p4runtime/grpc python modules, and either build/p4/flexpass.{json,p4info.txtpb}
#    or p4c-bm2-ss to build them);
# 2. builds the P4 program if build/p4 is missing or older than p4src/;
# 3. creates a private network namespace fp-ptf-<pid> with veth pairs
#    fp-s<N> (switch side) <-> fp-h<N> (PTF side), N = 1..6, offloads off;
# 4. starts simple_switch_grpc inside it (--priority-queues 8, gRPC on
#    127.0.0.1:9559, thrift 9090: reachable only inside the namespace);
# 5. applies ptf-tests/ptf-config.yaml with flexpass-ctl, applies it again
#    and checks that `flexpass-ctl diff` reports the switch in sync;
# 6. runs ptf;
# 7. ALWAYS (trap) kills the switch it started, by PID, and deletes the
#    namespace (which deletes the veths).
#
# Environment: FLEXPASS_P4_BUILD (default build/p4), PTF_LOG_DIR (default
# build/ptf-logs), PYTHON (default python3).
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FLEXPASS_P4_BUILD:-$REPO/build/p4}"
LOGDIR="${PTF_LOG_DIR:-$REPO/build/ptf-logs}"
PYTHON="${PYTHON:-python3}"
CONFIG="$REPO/ptf-tests/ptf-config.yaml"
NPORTS=6
NS="fp-ptf-$$"
GRPC_ADDR="127.0.0.1:9559"
THRIFT_PORT=9090
SW_PID=""
NS_CREATED=0

skip() { echo "SKIPPED ptf: $*"; exit 0; }
die() { echo "ptf: ERROR: $*" >&2; exit 1; }

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then
        kill -TERM "$SW_PID" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$SW_PID" 2>/dev/null && kill -KILL "$SW_PID" 2>/dev/null
        wait "$SW_PID" 2>/dev/null
        echo "ptf: stopped simple_switch_grpc (pid $SW_PID)"
    fi
    if [ "$NS_CREATED" = 1 ]; then
        ip netns del "$NS" 2>/dev/null && echo "ptf: deleted namespace $NS"
    fi
    exit "$rc"
}

# ---- 1. prerequisites ------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (network namespace and veth pairs); run: sudo $0"
command -v ip >/dev/null || skip "iproute2 'ip' not found"
command -v simple_switch_grpc >/dev/null || skip "simple_switch_grpc not found in PATH (install BMv2 with P4Runtime: README, P4 toolchain)"
command -v simple_switch_CLI >/dev/null || skip "simple_switch_CLI not found in PATH (BMv2 thrift CLI)"
# Every Python module the control plane, BMv2's Thrift CLI and PTF need, in $PYTHON.
missing=$(PYTHONPATH="$REPO/control-plane" "$PYTHON" -m flexpass_cp.env_check control-plane bmv2 ptf 2>&1) \
    || skip "$(echo "$missing" | paste -sd ';' | sed 's/;/; /g')"
# PTF's runner from the same interpreter (a `ptf` of another Python in PATH would not see
# the modules checked above).
PTF_BIN="$("$PYTHON" -c 'import os, sys; print(os.path.join(os.path.dirname(sys.executable), "ptf"))')"
[ -x "$PTF_BIN" ] || PTF_BIN="$(command -v ptf)" || skip "the ptf runner is not installed next to $PYTHON: $PYTHON -m pip install './control-plane[ptf]'"

# ---- 2. P4 build -------------------------------------------------------------
JSON="$BUILD/flexpass.json"
P4INFO="$BUILD/flexpass.p4info.txtpb"
stale=0
if [ ! -f "$JSON" ] || [ ! -f "$P4INFO" ]; then
    stale=1
elif [ -n "$(find "$REPO/p4src" -name '*.p4' -newer "$JSON" -print -quit)" ]; then
    stale=1
fi
if [ "$stale" = 1 ]; then
    command -v p4c-bm2-ss >/dev/null || skip "p4c-bm2-ss not found and $JSON is missing or stale (install p4c, then: make p4)"
    mkdir -p "$BUILD"
    echo "ptf: building P4 -> $BUILD"
    p4c-bm2-ss --p4runtime-files "$P4INFO" -o "$JSON" "$REPO/p4src/v1model/flexpass.p4" \
        || die "P4 compilation failed"
fi

# ---- 3. namespace + veths ------------------------------------------------------
trap cleanup EXIT INT TERM
ip netns add "$NS" 2>/dev/null || skip "cannot create network namespace (ip netns add failed: no CAP_SYS_ADMIN or no netns support)"
NS_CREATED=1
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up || die "cannot bring up lo in $NS"
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
SW_IFS=()
PTF_IFS=()
for p in $(seq 1 $NPORTS); do
    nsx ip link add "fp-s$p" type veth peer name "fp-h$p" || die "cannot create veth fp-s$p/fp-h$p"
    for i in "fp-s$p" "fp-h$p"; do
        nsx ip link set "$i" mtu 9000 up
        nsx sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1" >/dev/null 2>&1 || true
        if command -v ethtool >/dev/null; then
            for off in rx tx sg tso gso gro lro rxvlan txvlan; do
                nsx ethtool -K "$i" "$off" off >/dev/null 2>&1 || true
            done
        fi
    done
    SW_IFS+=(-i "$p@fp-s$p")
    PTF_IFS+=(--interface "$p@fp-h$p")
done
command -v ethtool >/dev/null || echo "ptf: warning: ethtool not found; veth offloads left on"

# ---- 4. switch -------------------------------------------------------------------
mkdir -p "$LOGDIR"
echo "ptf: starting simple_switch_grpc in $NS (log: $LOGDIR/switch.log)"
ip netns exec "$NS" simple_switch_grpc --device-id 0 "${SW_IFS[@]}" \
    --thrift-port "$THRIFT_PORT" --log-file "$LOGDIR/switch" --log-flush --no-p4 \
    -- --grpc-server-addr "$GRPC_ADDR" --priority-queues 8 \
    >"$LOGDIR/switch.stdout" 2>&1 &
SW_PID=$!
ready=0
for _ in $(seq 1 100); do
    kill -0 "$SW_PID" 2>/dev/null || { cat "$LOGDIR/switch.stdout" >&2; die "simple_switch_grpc exited at start"; }
    if nsx "$PYTHON" -c "import socket,sys; socket.create_connection(('127.0.0.1', ${GRPC_ADDR##*:}), 0.2); socket.create_connection(('127.0.0.1', $THRIFT_PORT), 0.2)" 2>/dev/null; then
        ready=1; break
    fi
    sleep 0.2
done
[ "$ready" = 1 ] || die "simple_switch_grpc did not open $GRPC_ADDR / thrift $THRIFT_PORT within 20 s"

# ---- 5. control plane --------------------------------------------------------------
CTL=(env PYTHONPATH="$REPO/control-plane" "$PYTHON" -m flexpass_cp.cli)
CTL_ARGS=(--config "$CONFIG" --switch s1 --grpc-addr "$GRPC_ADDR" --p4info "$P4INFO" --bmv2-json "$JSON")
echo "ptf: flexpass-ctl apply"
nsx "${CTL[@]}" apply "${CTL_ARGS[@]}" --thrift-port "$THRIFT_PORT" >"$LOGDIR/apply.log" 2>&1 \
    || { cat "$LOGDIR/apply.log" >&2; die "flexpass-ctl apply failed"; }
tail -n 3 "$LOGDIR/apply.log"
nsx "${CTL[@]}" apply "${CTL_ARGS[@]}" --thrift-port "$THRIFT_PORT" >"$LOGDIR/apply2.log" 2>&1 \
    || { cat "$LOGDIR/apply2.log" >&2; die "second flexpass-ctl apply failed"; }
grep -q "no change" "$LOGDIR/apply2.log" || { cat "$LOGDIR/apply2.log" >&2; die "second apply was not a no-op"; }
nsx "${CTL[@]}" diff "${CTL_ARGS[@]}" >"$LOGDIR/diff.log" 2>&1 || { cat "$LOGDIR/diff.log" >&2; die "flexpass-ctl diff failed"; }
grep -q "in sync" "$LOGDIR/diff.log" || { cat "$LOGDIR/diff.log" >&2; die "diff after apply is not empty"; }
echo "ptf: apply is idempotent (second apply: no change; diff: in sync)"

# ---- 6. ptf ------------------------------------------------------------------------
TEST_PARAMS="grpc_addr='$GRPC_ADDR';p4info='$P4INFO';config='$CONFIG';repo='$REPO'"
echo "ptf: running ptf (log dir $LOGDIR)"
nsx env PYTHONPATH="$REPO/control-plane" "$PYTHON" "$PTF_BIN" --test-dir "$REPO/ptf-tests" "${PTF_IFS[@]}" \
    --test-params "$TEST_PARAMS" --log-dir "$LOGDIR" "$@"
rc=$?
echo "ptf: counters after the run:"
nsx "${CTL[@]}" counters "${CTL_ARGS[@]}" || true
if ! kill -0 "$SW_PID" 2>/dev/null; then
    echo "ptf: ERROR: simple_switch_grpc is no longer running (crashed?)" >&2
    rc=1
fi
exit $rc
