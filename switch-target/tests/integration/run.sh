#!/usr/bin/env bash
# Integration tests of flexpass_switch (the real binary) on veth pairs.
#
#   sudo switch-target/tests/integration/run.sh [pytest args]
#
# 1. prerequisites; if one is missing prints "SKIPPED switch-target
#    integration: <why>" and exits 0 (root, ip netns, the flexpass_switch
#    binary, simple_switch_CLI, the python modules of the control plane, BMv2's
#    Thrift CLI and pytest (flexpass_cp.env_check says what is missing), and
#    build/p4/flexpass.{json,p4info.txtpb} or p4c-bm2-ss to build them);
# 2. creates a private network namespace fp-swt-<pid> with veth pairs
#    fp-s<N> (switch side) <-> fp-h<N> (test side), N = 1..3, offloads off;
# 3. runs pytest inside the namespace (test_switch.py starts and stops the
#    switch; its P4Runtime, Thrift and TM API ports exist only in there);
# 4. ALWAYS (trap) deletes the namespace, which deletes the veths.
#
# Environment: FLEXPASS_SWITCH (default build/switch-target/flexpass_switch),
# FLEXPASS_P4_BUILD (default build/p4), PYTHON (default python3).
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
HERE="$REPO/switch-target/tests/integration"
SWITCH="${FLEXPASS_SWITCH:-$REPO/build/switch-target/flexpass_switch}"
BUILD="${FLEXPASS_P4_BUILD:-$REPO/build/p4}"
PYTHON="${PYTHON:-python3}"
NS="fp-swt-$$"
NS_CREATED=0

skip() { echo "SKIPPED switch-target integration: $*"; exit 0; }
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ "$NS_CREATED" = 1 ] && ip netns del "$NS" 2>/dev/null && echo "integration: deleted namespace $NS"
    exit "$rc"
}

[ "$(id -u)" = 0 ] || skip "needs root (network namespace, veth pairs)"
command -v ip >/dev/null || skip "iproute2 'ip' not found"
[ -x "$SWITCH" ] || skip "$SWITCH not built (BMv2 not installed?)"
command -v simple_switch_CLI >/dev/null || skip "simple_switch_CLI not found (BMv2 Thrift CLI)"
# Every Python module the control plane, BMv2's Thrift CLI and pytest need, in $PYTHON.
missing=$(PYTHONPATH="$REPO/control-plane" "$PYTHON" -m flexpass_cp.env_check control-plane bmv2 ptf 2>&1) \
    || skip "$(echo "$missing" | paste -sd ';' | sed 's/;/; /g')"
if [ ! -f "$BUILD/flexpass.json" ] || [ ! -f "$BUILD/flexpass.p4info.txtpb" ] \
   || [ -n "$(find "$REPO/p4src" -name '*.p4' -newer "$BUILD/flexpass.json" -print -quit)" ]; then
    command -v p4c-bm2-ss >/dev/null || skip "p4c-bm2-ss not found and $BUILD/flexpass.json missing or stale"
    mkdir -p "$BUILD"
    p4c-bm2-ss --p4runtime-files "$BUILD/flexpass.p4info.txtpb" -o "$BUILD/flexpass.json" \
        "$REPO/p4src/v1model/flexpass.p4" 2>/dev/null || { echo "integration: P4 compilation failed" >&2; exit 1; }
fi

trap cleanup EXIT INT TERM
ip netns add "$NS" 2>/dev/null || skip "cannot create a network namespace (ip netns add failed)"
NS_CREATED=1
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
for p in 1 2 3; do
    nsx ip link add "fp-s$p" type veth peer name "fp-h$p" || { echo "cannot create veth" >&2; exit 1; }
    for i in "fp-s$p" "fp-h$p"; do
        nsx ip link set "$i" mtu 9000 up
        if command -v ethtool >/dev/null; then
            for off in rx tx sg tso gso gro; do nsx ethtool -K "$i" "$off" off >/dev/null 2>&1 || true; done
        fi
    done
done
nsx env FLEXPASS_SWITCH="$SWITCH" FLEXPASS_P4_BUILD="$BUILD" FLEXPASS_REPO="$REPO" \
    PYTHONPATH="$REPO/control-plane" PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python \
    "$PYTHON" -m pytest -q -rs -p no:cacheprovider "$HERE" "$@"
