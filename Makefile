# FlexPass: credit-based datacenter transport (FlexPass EuroSys'23 + ExpressPass SIGCOMM'17).
# `make demo` and `make test` work on a fresh machine: they call `deps` themselves.

SHELL        := /bin/bash
CARGO        ?= cargo
PYTHON       ?= python3
HOST_AGENT   := host-agent
BIN          := $(HOST_AGENT)/target/release/flexpass
# The model for long runs (bench-model, figures): Cargo profile sim-fast, fat LTO
SIM_BIN      := $(HOST_AGENT)/target/sim-fast/flexpass
RESULTS      := results
FUZZ_SECONDS ?= 60
SUMMARY      := build/test-summary.txt

.PHONY: deps deps-model deps-python deps-switch deps-mininet deps-apps deps-xdp build build-sim-fast switch-target test demo demo-mininet bench bench-floods bench-model fidelity figures fuzz clean p4 p4-nic nic-ebpf p4-tofino ptf ptf-tofino-model test-rust test-python test-fuzz test-netns test-cpp test-p4 test-mininet

## deps: everything every target needs (make test); each target installs only its own part:
## deps-model (the model and the agent: make build, make demo), deps-python (control plane),
## deps-switch (switch target), and as root deps-mininet, deps-apps, deps-xdp.
## Idempotent: apt and pip run only when something is missing; no step starts a service.
deps: deps-model deps-python deps-switch deps-mininet deps-apps deps-xdp

# apt-get install without starting any service it installs (redis-server would start one):
# a policy-rc.d that refuses, for the duration of the install, if there is none already.
APT_INSTALL = apt-get update -qq && { own=; [ -e /usr/sbin/policy-rc.d ] || { printf '\043!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && own=1; }; \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(1) >/dev/null; rc=$$?; [ -z "$$own" ] || rm -f /usr/sbin/policy-rc.d; exit $$rc; }

deps-model:
	@command -v $(CARGO) >/dev/null || { echo "deps: cargo not found: install Rust with rustup (https://rustup.rs)"; exit 1; }
	@if ! pkg-config --exists fontconfig freetype2 2>/dev/null || ! fc-list 2>/dev/null | grep -qi dejavu; then \
	  echo "deps: installing fontconfig/freetype/fonts for the plots (apt)"; \
	  ( $(call APT_INSTALL,pkg-config libfontconfig1-dev libfreetype-dev fonts-dejavu-core) ); fi

deps-switch:
	@if ! command -v cmake >/dev/null || [ ! -e /usr/include/gtest/gtest.h ]; then \
	  echo "deps: installing cmake, g++ and GoogleTest for the switch target (apt)"; \
	  ( $(call APT_INSTALL,cmake g++ libgtest-dev) ); fi

deps-python:
	@PYTHONPATH=control-plane $(PYTHON) -m flexpass_cp.env_check control-plane ptf >/dev/null 2>&1 || \
	  { echo "deps: installing the control-plane package and its dependencies (pip)"; $(PYTHON) -m pip install -q -e './control-plane[dev,ptf,bmv2]'; }
	@if command -v simple_switch_CLI >/dev/null && ! $(PYTHON) -c 'import thrift' 2>/dev/null; then \
	  echo "deps: installing thrift for BMv2's runtime CLI (pip: control-plane[bmv2])"; $(PYTHON) -m pip install -q -e './control-plane[dev,ptf,bmv2]'; fi
	@$(PYTHON) -c 'import matplotlib' 2>/dev/null || { echo "deps: installing matplotlib for the runners' plots (pip)"; $(PYTHON) -m pip install -q -r mininet-topos/requirements.txt; }
	@if command -v simple_switch_CLI >/dev/null; then PYTHONPATH=control-plane $(PYTHON) -m flexpass_cp.env_check control-plane bmv2 ptf mininet | sed 's/^/deps: still missing: /'; true; fi

deps-apps:
	@if [ "$$(id -u)" = 0 ] && { ! command -v iperf3 >/dev/null || ! command -v curl >/dev/null || ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null || ! command -v nc >/dev/null; }; then \
	  echo "deps: installing iperf3, curl, redis and netcat for the unmodified-application tests (apt; no service started)"; \
	  ( $(call APT_INSTALL,iperf3 curl redis-server redis-tools netcat-openbsd) ); fi

# Debian's Mininet runs under /usr/bin/python3 (flexpass emulate runs its runner there): the
# runners' plots need matplotlib in that interpreter too, and the control plane they drive
# the switches with needs scapy, gRPC, protobuf and p4runtime there (pip: Debian has no
# p4runtime, and its protobuf is older than p4runtime's; pip puts them in /usr/local, beside
# Debian's own packages, hence --break-system-packages; the control plane uses pure-Python
# protobuf, as the import check does).
RUNNER_PY_MODULES = scapy grpc google.protobuf p4.v1.p4runtime_pb2
RUNNER_PY_PACKAGES = scapy grpcio protobuf p4runtime
deps-mininet: deps-python
	@if [ "$$(id -u)" = 0 ] && { ! command -v mn >/dev/null || ! command -v ethtool >/dev/null || ! command -v ping >/dev/null \
	  || ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; }; then \
	  echo "deps: installing Mininet, ethtool, ping and matplotlib (for /usr/bin/python3) for the Mininet topologies (apt)"; \
	  ( $(call APT_INSTALL,mininet ethtool iputils-ping python3-matplotlib python3-pip) ); fi
	@if [ "$$(id -u)" = 0 ] && [ -x /usr/bin/python3 ] && ! PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python /usr/bin/python3 -c "$(foreach m,$(RUNNER_PY_MODULES),import $(m);)" 2>/dev/null; then \
	  echo "deps: installing $(RUNNER_PY_PACKAGES) for /usr/bin/python3 (the Mininet runners' control plane; pip)"; \
	  /usr/bin/python3 -m pip install -q --break-system-packages $(RUNNER_PY_PACKAGES); fi

deps-xdp:
	@if [ "$$(id -u)" = 0 ] && ! command -v clang >/dev/null && ! compgen -c clang- | grep -qE '^clang-1[4-9]$$'; then \
	  echo "deps: installing clang for the agent's AF_XDP program (apt; without it the agent uses UDP sockets only)"; \
	  ( $(call APT_INSTALL,clang) ); fi

## p4: the v1model switch program for BMv2 (JSON + P4Info under build/p4); a P4 error fails
p4:
	@command -v p4c-bm2-ss >/dev/null || { echo "p4: p4c-bm2-ss not installed (README: P4 toolchain)"; exit 1; }
	mkdir -p build/p4
	p4c-bm2-ss --p4runtime-files build/p4/flexpass.p4info.txtpb -o build/p4/flexpass.json p4src/v1model/flexpass.p4

## p4-nic: the NIC edge in PNA (p4src/pna) for BMv2's pna_nic (build/p4-nic/bmv2: JSON + P4Info)
## and DPDK's SWX pipeline (build/p4-nic/dpdk: .spec, P4Info, bfrt.json, context.json); a missing
## backend is skipped by name (SKIPPED p4-nic ...), none installed fails
P4_NIC      := p4src/pna/flexpass_nic.p4
P4_NIC_BMV2 := p4c-bm2-pna --p4runtime-files build/p4-nic/bmv2/flexpass_nic.p4info.txtpb -o build/p4-nic/bmv2/flexpass_nic.json $(P4_NIC)
P4_NIC_DPDK := p4c-dpdk --arch pna -DFLEXPASS_PNA_DPDK --p4runtime-files build/p4-nic/dpdk/flexpass_nic.p4info.txtpb \
  --bf-rt-schema build/p4-nic/dpdk/bfrt.json --context build/p4-nic/dpdk/context.json -o build/p4-nic/dpdk/flexpass_nic.spec $(P4_NIC)
p4-nic:
	@found=; \
	if command -v p4c-bm2-pna >/dev/null; then found=1; mkdir -p build/p4-nic/bmv2; echo "$(P4_NIC_BMV2)"; nice -n 15 $(P4_NIC_BMV2) || exit 1; \
	else echo "SKIPPED p4-nic bmv2: p4c-bm2-pna not installed (p4src/README.md: NIC edge)"; fi; \
	if command -v p4c-dpdk >/dev/null; then found=1; mkdir -p build/p4-nic/dpdk; echo "$(P4_NIC_DPDK)"; nice -n 15 $(P4_NIC_DPDK) || exit 1; \
	else echo "SKIPPED p4-nic dpdk: p4c-dpdk not installed (p4src/README.md: NIC edge)"; fi; \
	[ -n "$$found" ] || { echo "p4-nic: neither p4c-bm2-pna nor p4c-dpdk is installed (p4src/README.md: NIC edge)"; exit 1; }

## nic-ebpf: the NIC edge as a tc eBPF program (nic/ebpf/flexpass_edge.bpf.c) compiled with
## clang into build/nic-ebpf/ (no root; `nic/flexpass_nic.py ebpf apply` compiles and attaches it;
## docs/smartnic.md)
nic-ebpf:
	$(PYTHON) nic/flexpass_ebpf.py build --out build/nic-ebpf/flexpass_edge.bpf.o

## p4-tofino: the TNA program for Tofino and Tofino2 with p4c's Tofino backend, into
## build/p4-tofino/{tofino,tofino2} (bfrt.json, pipe/: context.json, the binary, logs) + resources.txt
# The SDE ships p4c with the Tofino backend; otherwise the p4c on PATH.
P4C ?= $(or $(if $(SDE_INSTALL),$(wildcard $(SDE_INSTALL)/bin/p4c)),p4c)
TOFINO_BACKEND = $(P4C) --help-targets 2>/dev/null | grep -qx 'tofino-tna'
p4-tofino:
	@$(TOFINO_BACKEND) || { echo "p4-tofino: '$(P4C)' has no Tofino backend (p4c --help-targets lists no tofino-tna; README: Tofino)"; exit 1; }
	@for t in tofino:tna tofino2:t2na; do tgt=$${t%%:*}; arch=$${t##*:}; out=$(CURDIR)/build/p4-tofino/$$tgt; \
	  mkdir -p $$out; echo "$(P4C) --target $$tgt --arch $$arch -g --verbose 1 -o $$out p4src/tna/flexpass.p4"; \
	  nice $(P4C) --target $$tgt --arch $$arch -g --verbose 1 -o $$out p4src/tna/flexpass.p4 || exit 1; \
	  $(PYTHON) p4src/tna/report_resources.py $$out > $$out/resources.txt; sed 's/^/  /' $$out/resources.txt; done

## ptf: BMv2 on veth pairs in a namespace, control plane applies a config, PTF suite (root)
ptf: deps-python
	bash ptf-tests/run_ptf.sh

## ptf-tofino-model: tofino-model + bf_switchd (the installed SDE) on veth pairs in a namespace,
## flexpass-ctl applies a config over BfRt, PTF feature tests (root)
ptf-tofino-model: deps-python
	bash ptf-tests/run_tofino_model.sh

## switch-target: the TM library, its tests and (when BMv2/PI are installed) flexpass_switch
switch-target:
	cmake -S switch-target -B build/switch-target -DCMAKE_BUILD_TYPE=Release >/dev/null
	nice cmake --build build/switch-target -j2

## build: the Rust workspace (release: the model and benchmarks need it)
build: deps-model
	cd $(HOST_AGENT) && $(CARGO) build --release --workspace

## build-sim-fast: the model's binary for long runs (profile sim-fast: fat LTO, one codegen
## unit; minutes longer to build, so not what make build and make test use)
build-sim-fast: deps-model
	cd $(HOST_AGENT) && $(CARGO) build --profile sim-fast -p flexpass-cli

## test: every test tier; ends with a summary of tiers run and skipped
test: deps
	@mkdir -p build && : > $(SUMMARY)
	@$(MAKE) --no-print-directory -k test-rust test-p4 test-python test-cpp test-netns test-mininet test-fuzz; status=$$?; \
	 echo "== FlexPass test summary =="; cat $(SUMMARY); \
	 ran=$$(grep -c '^ran:' $(SUMMARY)); skipped=$$(grep -ci '^skipped' $(SUMMARY)); \
	 echo "tiers: $$ran passed, $$((7 - ran - skipped)) failed, $$skipped skipped"; \
	 exit $$status

test-rust: deps-model
	cd $(HOST_AGENT) && $(CARGO) build --release --workspace && $(CARGO) test --release --workspace
	@echo "ran: rust (wire vectors + mutations + proptests, core unit + flow tests, model acceptance tests, agent over loopback UDP (PASE flows with a real arbitrator, forged answers ignored, probing in the lowest queue, delegation to per-host arbitrators; a flow moved to its HELLO_ACK's port and HELLO_ACKs from other addresses ignored; a connection handed to a process's own socket, and over the API: in-process listeners taken, refused, their process dead before or after the hand-over, wrong answers refused), its API incl. TCP connections (a reader that comes late gets every byte the agent holds), libflexpass.so in preloaded programs)" >> $(SUMMARY)

test-python: deps-python
	$(PYTHON) -m pytest -q -rs control-plane/tests nic/tests --ignore=nic/tests/test_dpdk_swx.py mininet-topos/tests/test_fabric.py mininet-topos/tests/test_emulate.py $(HOST_AGENT)/fidelity/tests
	@echo "ran: python (Scapy layer against the shared vectors, control-plane config, P4Runtime entries and TM settings, Tofino BfRt operations (golden), link-down/up, reconcile and mastership against a fake P4Runtime server, MTU-derived credit rates, NIC edge (qdiscs; the config's nics: section: errors naming the key, --config --nic = the flags' numbers, PNA entries and meter from the entry; the PNA program takes the switch's classifier entries, against its P4Info where built; the eBPF edge (root: BPF_PROG_TEST_RUN on the shared vectors, credit rate on a veth pair within 3 %, htb classes without u32, an agent beside it: --nic-edge ebpf leaves the credit limit to the edge, status says who polices, the rate on the wire within 3 % either way; an agent beside the qdisc edge: status reads its htb credit class, equal to tc's counters)), Mininet topologies and scaling, model experiments planned for Mininet (flexpass emulate: scaling, refused keys, the report), the model's small fidelity cases against the recorded ns-2$(if $(NS2),, (ns-2 side SKIPPED: NS2 not set)))" >> $(SUMMARY)

# The P4 programs (p4c: v1model for BMv2, PNA for the NIC edge (pna_nic, DPDK), TNA for Tofino/Tofino2), the PTF suite against
# simple_switch_grpc (root, netns) and, where the SDE is installed, on the Tofino model.
# One summary line; each missing tool is named in it.
test-p4:
	@mkdir -p build; notes=""; ran=""; \
	if ! command -v p4c-bm2-ss >/dev/null; then \
	  notes="$$notes; SKIPPED v1model: p4c-bm2-ss not installed (P4 compile, control plane on BMv2, PTF)"; \
	else $(MAKE) --no-print-directory p4 || exit 1; \
	  bash ptf-tests/run_ptf.sh 2>&1 | tee build/ptf.out; status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || exit $$status; \
	  if grep -q '^SKIPPED ptf:' build/ptf.out; then ran="v1model compiles"; notes="$$notes; $$(grep '^SKIPPED ptf:' build/ptf.out)"; \
	  else ran="v1model + ptf (classification, credit meter and its burst for credit batches, credits charged their frame (68-byte ones at 60/68 of the rate), symmetric ECMP, ECN, selective drop, legacy, malformed/TTL, the PPT, PASE and FlashPass profiles on simple_switch_grpc)"; fi; fi; \
	if command -v p4c-bm2-pna >/dev/null || command -v p4c-dpdk >/dev/null; then \
	  $(MAKE) --no-print-directory p4-nic 2>&1 | tee build/p4-nic.out; status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || exit $$status; \
	  nic=$$(for b in bmv2 dpdk; do grep -q "^SKIPPED p4-nic $$b:" build/p4-nic.out || echo -n "$$b, "; done); \
	  ran="$${ran:+$$ran, }pna compiles ($${nic%, })"; \
	  while read -r l; do notes="$$notes; $$l"; done < <(grep '^SKIPPED p4-nic' build/p4-nic.out); \
	  if ! grep -q '^SKIPPED p4-nic dpdk:' build/p4-nic.out; then \
	    $(PYTHON) -m pytest -q -rs nic/tests/test_dpdk_swx.py 2>&1 | tee build/swx.out; status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || exit $$status; \
	    if grep -q 'SKIPPED DPDK SWX pipeline:' build/swx.out; then notes="$$notes; SKIPPED dpdk swx run: $$(grep -o 'SKIPPED DPDK SWX pipeline: .*' build/swx.out | head -1 | sed 's/^SKIPPED DPDK SWX pipeline: //')"; \
	    else ran="$$ran + dpdk swx pipeline run (golden pcaps: credits above the burst dropped, classes and colours counted, forged FlexPass dropped; credit rate within 3 %)"; fi; fi; \
	else notes="$$notes; SKIPPED pna: neither p4c-bm2-pna nor p4c-dpdk installed (NIC edge compile; p4src/README.md)"; fi; \
	if $(TOFINO_BACKEND); then \
	  $(MAKE) --no-print-directory p4-tofino || exit 1; ran="$${ran:+$$ran, }tna compiles (tofino, tofino2)"; \
	  bash ptf-tests/run_tofino_model.sh 2>&1 | tee build/ptf-tofino.out; status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || exit $$status; \
	  if grep -q '^SKIPPED tofino-model:' build/ptf-tofino.out; then notes="$$notes; $$(grep '^SKIPPED tofino-model:' build/ptf-tofino.out)"; \
	  else ran="$$ran + ptf on tofino-model"; fi; \
	else notes="$$notes; SKIPPED tna: $(P4C) has no Tofino backend (p4c --help-targets: no tofino-tna; README: Tofino)"; fi; \
	if [ -n "$$ran" ]; then echo "ran: p4 ($$ran)$$notes" >> $(SUMMARY); \
	else notes="$${notes#; }"; echo "SKIPPED p4 tier: $${notes//SKIPPED /}" | tee -a $(SUMMARY); fi

# The switch target (C++ via ctest): TM unit tests (GoogleTest) and, when BMv2/PI
# are installed, the flexpass_switch binary and its integration tests on veth
# pairs (root; tests/integration/run.sh). Missing pieces are reported as skipped.
test-cpp: deps-switch
	@if command -v cmake >/dev/null && [ -e /usr/include/gtest/gtest.h ]; then \
	  $(MAKE) --no-print-directory switch-target && \
	  ctest --test-dir build/switch-target --output-on-failure 2>&1 | tee build/ctest.out; \
	  status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || exit $$status; \
	  if [ ! -x build/switch-target/flexpass_switch ]; then \
	    echo "ran: c++ (TM: DWRR, strict priority, shaping, color admission, pFabric queue); SKIPPED flexpass_switch: BMv2/PI not installed in /usr/local" | tee -a $(SUMMARY); \
	  elif grep -q "flexpass_switch_integration .*Skipped" build/ctest.out; then \
	    echo "ran: c++ (TM unit tests, flexpass_switch built); SKIPPED flexpass_switch integration: needs root, netns, p4c and the python modules (run switch-target/tests/integration/run.sh for the reason)" | tee -a $(SUMMARY); \
	  else echo "ran: c++ (TM unit tests; flexpass_switch on veth: P4Runtime+Thrift, DSCP queues, DWRR shares, credit shaper, red drop, qdepth units, TM API, pFabric queue order and drops, egress backlog bounded when BMv2 is slower than the TM)" >> $(SUMMARY); fi; \
	else echo "SKIPPED c++ tier: cmake or GoogleTest (libgtest-dev) not installed" | tee -a $(SUMMARY); fi

# Real kernel networking: namespaces, veth, a Linux router with htb/u32 (needs root).
test-netns: deps-apps deps-xdp deps-python
	@reason=$$(cd $(HOST_AGENT)/netns-tests && FLEXPASS_BIN=$(CURDIR)/$(BIN) $(PYTHON) -c 'import test_netns_e2e as t; print(t.SKIP or "")'); \
	if [ -n "$$reason" ]; then echo "SKIPPED netns tier: $$reason" | tee -a $(SUMMARY); \
	else FLEXPASS_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q $(HOST_AGENT)/netns-tests && \
	  echo "ran: netns (agent byte-exact per transport, FlexPass + kernel TCP, incast, hostile traffic; floods: spoofed HELLO/CREDIT_REQUEST flood with flows byte-exact and half-open table/credits/RSS bounded, forged credits capped at the sender's link; unmodified programs under flexpass run: nc, iperf3 both ways, curl 100 MB, redis-benchmark, socket API, fallback to a peer without FlexPass; their reliability: a program killed mid-transfer frees its connection in both agents, an agent restarted under a connection fails it (no hang), 1000 concurrent connections from one process byte-exact; the server's transport in its own process (FLEXPASS_INPROC=1): nc both ways, socket API, iperf3 both ways, curl 100 MB, fallback, a server killed mid-transfer frees the agents' state, a listener registers again after its agent restarts, a connection lives on in its dup, a forking server (parent closes at once) and a program that forks and execs mid-connection byte-exact, sendfile of 20 MB, splice through a pipe both ways, an ACK leaves with the reply or before a select/poll/epoll wait, a non-blocking sender sleeps until its buffer has room (select, poll, epoll level- and edge-triggered), 1000 concurrent in-process connections byte-exact, flows take their agent's settings (link, RTT, w_q, credit batch; the environment wins), every transport in-process byte-exact (expresspass, dctcp, ppt, flashpass, pfabric), in-process connections listed in their agents' status once ended, a gone peer ends a closing connection at once (lost final ACK) or resets a writer (killed reader); AF_XDP datapath: byte-exact per transport, ping/TCP pass, program detached after exit and SIGKILL, frames alike from both datapaths, loopback fallback, several receive queues (16 with all bound), jumbo frames in chains of buffers, no credit-scheduled data lost at a receiver that cannot keep up, no frame dropped for an empty fill ring at 1500 and 9000, auto takes the UDP socket in copy mode, naming why)" >> $(SUMMARY); fi

# Mininet topologies on flexpass_switch: FlexPass vs DCTCP, naive ExpressPass, incast, leaf-spine,
# network faults (link down, switch and controller restarts).
test-mininet: deps-mininet
	@if [ ! -x build/switch-target/flexpass_switch ] && command -v simple_switch_grpc >/dev/null && command -v cmake >/dev/null; then \
	  $(MAKE) --no-print-directory switch-target >/dev/null; fi
	@reason=$$(cd mininet-topos/tests && FLEXPASS_BIN=$(CURDIR)/$(BIN) $(PYTHON) -c 'import test_mininet_e2e as t; print(t.SKIP or "")'); \
	if [ -n "$$reason" ]; then echo "SKIPPED mininet tier: $$reason" | tee -a $(SUMMARY); \
	else FLEXPASS_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q mininet-topos/tests/test_mininet_e2e.py mininet-topos/tests/test_mininet_emulate.py mininet-topos/tests/test_mininet_faults.py mininet-topos/tests/test_mininet_soak.py mininet-topos/tests/test_mininet_flashpass.py mininet-topos/tests/test_mininet_credit_batch.py mininet-topos/tests/test_mininet_pase.py mininet-topos/tests/test_mininet_pfabric.py && \
	  echo "ran: mininet (flexpass_switch: FlexPass vs DCTCP shares and Q1 bound, the model's dumbbell, incast and leaf-spine (link failure) experiments through flexpass emulate, and flexpass compare, naive ExpressPass starves DCTCP, incast without timeouts, leaf-spine path symmetry; faults: spine link down/up, leaf restart and controller restart under running flows, byte-exact, symmetric groups, idempotent apply; soak: 20 s of mixed traffic, byte-exact, memory and CPU series; flashpass: near-empty data queue and no data loss vs a window transport, byte-exact; credit batches of 8 respaced by the switch: no data loss, near-empty data queue; a sender stalled for 60 ms drops its stale credits, no data lost; and through stock BMv2's P4 credit meter: byte-exact, credit drops bounded; PASE testbed (Fig. 13(b)): 9 clients -> 1 server, DCTCP then PASE with a rack arbitrator process and delegation, byte-exact, PASE in several priority queues; AFCTs printed, not asserted: docs/results-pase.md; pFabric: short flows past long ones through the pFabric queue, well below DCTCP's FCT, byte-exact, pushed_out drops counted)" >> $(SUMMARY); fi

# Every fuzz target for 20 s (about 3 minutes with the build): the decoder, the
# stateful targets (sender, receiver, pair) and the text parsers (trace, api, edge_text;
# docs/fuzzing.md). The summary quotes the
# executions and coverage (cov: edges, ft: features) libFuzzer reported.
test-fuzz:
	@if rustup toolchain list 2>/dev/null | grep -q nightly; then \
	  $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20 && \
	  echo "ran: fuzz (20 s per target, seeds from recorded exchanges, the API doc's requests and tc / SWX CLI output: $$(cat build/fuzz/summary.txt))" >> $(SUMMARY); \
	else echo "SKIPPED fuzz tier: no nightly Rust toolchain (cargo fuzz needs it): rustup toolchain install nightly" | tee -a $(SUMMARY); fi

## demo: FlexPass vs DCTCP and ExpressPass vs DCTCP on the model; JSON + PNG under results/
## demo TARGET=mininet [SWITCH=flexpass_switch|simple_switch]: the same two experiment files on
## BMv2 in Mininet (root), each beside the model's run (flexpass compare); results under
## results/mininet/
TARGET ?= model
SWITCH ?= flexpass_switch
demo: build
ifeq ($(TARGET),mininet)
	@$(MAKE) --no-print-directory demo-mininet
else
	@mkdir -p $(RESULTS)
	@for s in flexpass-vs-dctcp expresspass-vs-dctcp; do \
	  $(BIN) sim $$s --json --plot $(RESULTS)/$$s.png > $(RESULTS)/$$s.json || exit 1; \
	  $(BIN) sim $$s; \
	done
	@echo "results: $(RESULTS)/flexpass-vs-dctcp.{json,png} $(RESULTS)/expresspass-vs-dctcp.{json,png}"
endif

demo-mininet: deps-mininet
	@[ "$$(id -u)" = 0 ] || { echo "demo TARGET=mininet: needs root (Mininet creates namespaces and veths): sudo make demo TARGET=mininet"; exit 2; }
	@$(MAKE) --no-print-directory p4
	@if [ "$(SWITCH)" = flexpass_switch ]; then $(MAKE) --no-print-directory switch-target >/dev/null; fi
	@for s in flexpass-vs-dctcp expresspass-vs-dctcp; do \
	  d=$(RESULTS)/mininet/$$s; rm -rf $$d; \
	  $(BIN) sim $$s --out $$d/model >/dev/null || exit 1; \
	  $(BIN) emulate $$s --switch $(SWITCH) --out $$d/emulate || exit 1; \
	  $(BIN) compare $$d/model $$d/emulate || exit 1; \
	done
	@echo "results: $(RESULTS)/mininet/{flexpass,expresspass}-vs-dctcp/{model,emulate}/ (result.json, queue.png; emulate/compare.png: model vs Mininet)"

## bench: criterion benchmarks (per-credit decision, codec, simulated events/s), the
## model on FlexPass §6.2's 192-host Clos (bench-model), the agent on a veth pair (goodput
## vs kernel TCP, CPU per packet, credit pacing error; root), programs through libflexpass (and with
## the transport in their own processes, FLEXPASS_INPROC=1) vs
## kernel TCP (root: iperf3 at MTU 1500/9000, redis-benchmark, curl, 1-byte ping-pong;
## results/bench/preload.json), the NIC edge's PNA program on DPDK's SWX pipeline vs BMv2
## pna_nic packets/s (results/bench/nic-swx.txt; where DPDK's pipeline example is) and
## flexpass_switch vs simple_switch_grpc packets/s (root, BMv2)
bench: build
	cd $(HOST_AGENT) && $(CARGO) bench --workspace
	@$(MAKE) --no-print-directory bench-model
	@mkdir -p $(RESULTS)/bench
	set -o pipefail; FLEXPASS_BIN=$(CURDIR)/$(BIN) $(PYTHON) $(HOST_AGENT)/netns-tests/bench_agent.py | tee $(RESULTS)/bench/agent.txt
	$(PYTHON) $(HOST_AGENT)/reports/bench_agent_plot.py $(RESULTS)/bench/agent.txt $(RESULTS)/bench/agent.png
	BENCH_INPROC=1 BENCH_JSON=$(RESULTS)/bench/preload.json FLEXPASS_BIN=$(CURDIR)/$(BIN) $(PYTHON) $(HOST_AGENT)/netns-tests/bench_preload.py
	$(PYTHON) nic/flexpass_nic.py ebpf bench | tee $(RESULTS)/bench/ebpf-edge.txt
	set -o pipefail; $(PYTHON) nic/dpdk_swx.py bench --config control-plane/configs/dumbbell.yaml --nic h3 --skip-missing | tee $(RESULTS)/bench/nic-swx.txt
	$(MAKE) --no-print-directory switch-target
	bash switch-target/bench/bench_pps.sh

## bench-floods: the agent under floods (root): spoofed HELLO/CREDIT_REQUEST floods per cookie
## mode and rate with flows of every transport (FCT, memory, half-open table), forged credit
## floods against a sender (docs/reliability.md; several minutes)
bench-floods: build
	FLEXPASS_BIN=$(CURDIR)/$(BIN) $(PYTHON) $(HOST_AGENT)/netns-tests/bench_floods.py

## bench-model: one 10 000-flow web-search run on the 192-host Clos at load 0.5, on one core:
## wall time, events/s, simulated seconds per wall second, peak memory
bench-model: build build-sim-fast
	@mkdir -p $(RESULTS)/bench
	/usr/bin/time -f '%e %M' -o $(RESULTS)/bench/clos-websearch.time $(SIM_BIN) sim clos-websearch -j 1 --json > $(RESULTS)/bench/clos-websearch.json
	@$(PYTHON) $(HOST_AGENT)/reports/bench_model.py $(RESULTS)/bench/clos-websearch.json $(RESULTS)/bench/clos-websearch.time
	@FLEXPASS_BIN=$(CURDIR)/$(SIM_BIN) $(PYTHON) $(HOST_AGENT)/reports/bench_vs_ns2.py $(RESULTS)/bench/vs-ns2

## fidelity: the model against the FlexPass authors' ns-2 (docs/fidelity.md): every matched
## case on the model (default, compat and one toggle run per compat key) and, with
## NS2=path/to/ns (the artifact, built by hand), on ns-2; rewrites the tables of
## docs/fidelity.md and docs/figures/fidelity.{png,csv} (JOBS=N, default all cores)
fidelity: build
	$(PYTHON) $(HOST_AGENT)/fidelity/fidelity.py --out $(RESULTS)/fidelity --write-docs $(if $(JOBS),-j $(JOBS))

## figures: the large-scale figure runners (FlexPass Fig. 10–18, PASE Fig. 10) into results/figures/<name>/
## (resumable: an interrupted run continues where it stopped; JOBS=N, default all cores)
FIGURES ?= fig10-deployment fig11-mixed fig14-load fig15-workloads fig17-selective-drop fig18-queue-weight queues-deployment pase-left-right pase-left-right-cdf pase-intra-rack pase-queues pase-pruning pase-delegation pase-probing
figures: build-sim-fast
	@for f in $(FIGURES); do \
	  $(SIM_BIN) sweep $$f --out $(RESULTS)/figures/$$f $(if $(JOBS),-j $(JOBS)) || exit 1; done

## fuzz: every cargo-fuzz target (decode, sender, receiver, pair, trace, api, edge_text) for FUZZ_SECONDS each,
## seeds generated first; FUZZ_TARGETS="pair" picks targets, FUZZ_COVERAGE=1 adds line coverage
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install -q cargo-fuzz
	bash $(HOST_AGENT)/fuzz/run.sh $(FUZZ_SECONDS)

clean:
	cd $(HOST_AGENT) && $(CARGO) clean
	rm -rf $(HOST_AGENT)/fuzz/target build $(RESULTS)
