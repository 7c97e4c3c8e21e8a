#!/usr/bin/env bash
# Forwarding rate (packets/s) of flexpass_switch vs simple_switch_grpc (the
# simple_switch data path plus P4Runtime, so both get the same pipeline and
# entries from `flexpass-ctl apply`) on the same program and traffic: 100-byte
# UDP frames, port 1 -> port 3, on veth pairs in a private namespace.  The
# flexpass_switch TM links run at 100 Gbit/s so the TM is never the bottleneck.
#
#   sudo switch-target/bench/bench_pps.sh [seconds per run, default 10]
#
# Prints both rates and the ratio; exits 1 if flexpass_switch is more than 5 %
# slower.  Prints "SKIPPED bench: ..." and exits 0 if a prerequisite is missing.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECS="${1:-10}"
SWITCH="${FLEXPASS_SWITCH:-$REPO/build/switch-target/flexpass_switch}"
BUILD="$REPO/build/p4"
PYTHON="${PYTHON:-python3}"
NS="fp-bench-$$"
SW_PID=""
LOGDIR="$REPO/build/switch-target/bench-logs"

skip() { echo "SKIPPED bench: $*"; exit 0; }
stop_switch() {
    if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then
        kill -TERM "$SW_PID"; for _ in $(seq 50); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SW_PID" 2>/dev/null; wait "$SW_PID" 2>/dev/null
    fi
    SW_PID=""
}
cleanup() { local rc=$?; trap - EXIT INT TERM; stop_switch; ip netns del "$NS" 2>/dev/null; exit "$rc"; }

[ "$(id -u)" = 0 ] || skip "needs root (network namespace)"
[ -x "$SWITCH" ] || skip "$SWITCH not built"
command -v simple_switch_grpc >/dev/null || skip "simple_switch_grpc not installed"
[ -f "$BUILD/flexpass.json" ] || { command -v p4c-bm2-ss >/dev/null && make -C "$REPO" -s p4 >/dev/null 2>&1; } \
    || skip "no build/p4/flexpass.json and no p4c"
mkdir -p "$LOGDIR"
trap cleanup EXIT INT TERM
ip netns add "$NS" || skip "cannot create a namespace"
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up
for p in 1 2 3; do
    nsx ip link add "fp-s$p" type veth peer name "fp-h$p"
    for i in "fp-s$p" "fp-h$p"; do nsx ip link set "$i" up; done
done

run() {  # name binary [target options...]
    local name=$1 bin=$2; shift 2
    # `ip netns exec` execs the switch, so $! is the switch's own PID (a shell
    # function in the background would leave the switch orphaned when killed).
    ip netns exec "$NS" "$bin" --no-p4 --device-id 0 --thrift-port 9090 -i 1@fp-s1 -i 2@fp-s2 -i 3@fp-s3 \
        -- --grpc-server-addr 127.0.0.1:9559 "$@" >"$LOGDIR/$name.stdout" 2>&1 &
    SW_PID=$!
    for _ in $(seq 100); do
        nsx "$PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', 9559), 0.2)" 2>/dev/null && break
        sleep 0.2
    done
    nsx env PYTHONPATH="$REPO/control-plane" PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python "$PYTHON" -m flexpass_cp.cli \
        apply --config "$REPO/switch-target/tests/integration/switch-config.yaml" --switch s1 \
        --grpc-addr 127.0.0.1:9559 --p4info "$BUILD/flexpass.p4info.txtpb" --bmv2-json "$BUILD/flexpass.json" \
        --no-queues >"$LOGDIR/$name.apply" 2>&1 || { cat "$LOGDIR/$name.apply"; exit 1; }
    # The blaster runs at the lowest CPU priority: the switch gets the CPU it
    # needs and the blaster the rest, so the switch is the bottleneck.
    nsx nice -n 19 "$PYTHON" "$REPO/switch-target/bench/blast.py" "$SECS"
    stop_switch
    # The next switch binds the same ports and veths: wait until this one is gone.
    for _ in $(seq 50); do
        nsx "$PYTHON" -c "import socket; socket.create_connection(('127.0.0.1', 9559), 0.2)" 2>/dev/null || break
        sleep 0.1
    done
}

# One switch at a time, in this shell: run() returns only after its switch is
# stopped, so the two never share the namespace's veths or ports.
run simple_switch_grpc simple_switch_grpc --priority-queues 8 >"$LOGDIR/simple_switch_grpc.rate"
run flexpass_switch "$SWITCH" --tm-default-rate-bps 100000000000 \
    --tm-default-buffer-bytes 1000000 >"$LOGDIR/flexpass_switch.rate"
read -r ss_pps ss_off <"$LOGDIR/simple_switch_grpc.rate"
read -r fp_pps fp_off <"$LOGDIR/flexpass_switch.rate"
echo "simple_switch_grpc: $ss_pps pkt/s forwarded (offered $ss_off pkt/s)"
echo "flexpass_switch:    $fp_pps pkt/s forwarded (offered $fp_off pkt/s)"
"$PYTHON" -c "
r = $fp_pps / $ss_pps
print(f'ratio flexpass_switch / simple_switch_grpc = {r:.2f}')
raise SystemExit(0 if r >= 0.95 else 1)"
