#!/usr/bin/env bash
# Runs every fuzz target for a bounded time (`make fuzz`, `make test`'s fuzz tier).
#
#   run.sh SECONDS_PER_TARGET
#
# 1. Generates the stateful targets' seed corpora (seeds/<target>, deterministic) and
#    checks that they round-trip and replay their exchange (harness tests, stable Rust).
# 2. Runs each target under libFuzzer for SECONDS_PER_TARGET with corpus/<target> (kept
#    between runs, not in git), its seeds and regressions/<target> (inputs that once failed,
#    in git), and dicts/<target>.dict where there is one (the text parsers' words); logs go
#    to build/fuzz/<target>.log.
# 3. Prints one line per target from libFuzzer's final status line: executions, exec/s,
#    cov (edges covered) and ft (features), and writes a one-line summary to
#    build/fuzz/summary.txt (the test summary quotes it).
#
# Environment: FUZZ_TARGETS (default: all seven), FUZZ_SANITIZER (default none: the code
# under test is safe Rust, and without ASan the 2-core test machine runs ~3x more inputs;
# use `address` to look for memory errors in dependencies), FUZZ_COVERAGE=1 (also
# `cargo fuzz coverage` over each corpus and a line-coverage report of flexpass-core and
# flexpass-wire; needs the nightly llvm-tools-preview component).
# Exit status: non-zero if a target found a failure (the input is in artifacts/<target>/;
# replay it on stable: cd harness && cargo run --example replay -- <target> FILE -v).
set -uo pipefail

secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
logs=$root/build/fuzz
targets=${FUZZ_TARGETS:-decode sender receiver pair trace api edge_text}
san=${FUZZ_SANITIZER:-none}
mkdir -p "$logs"
cd "$here" || exit 1

cargo run -q --release -p flexpass-fuzz-harness --bin gen_seeds -- seeds || exit 1
cargo test -q --release -p flexpass-fuzz-harness >"$logs/harness-tests.log" 2>&1 ||
  { cat "$logs/harness-tests.log"; echo "fuzz: the seed replay tests failed"; exit 1; }
cargo +nightly fuzz build -s "$san" -a >"$logs/build.log" 2>&1 ||
  { tail -30 "$logs/build.log"; echo "fuzz: build failed"; exit 1; }

status=0
summary=()
printf '%-9s %12s %8s %7s %8s  %s\n' target executions exec/s cov ft result
for t in $targets; do
  mkdir -p "corpus/$t"
  dirs=("corpus/$t")
  [ -d "seeds/$t" ] && dirs+=("seeds/$t")
  [ -d "regressions/$t" ] && dirs+=("regressions/$t")
  dict=()
  [ -f "dicts/$t.dict" ] && dict=(-dict="dicts/$t.dict")
  cargo +nightly fuzz run -s "$san" -a "$t" "${dirs[@]}" -- \
    -max_total_time="$secs" -print_final_stats=1 "${dict[@]}" >"$logs/$t.log" 2>&1
  rc=$?
  # "#123 DONE cov: 1402 ft: 8453 corp: ... exec/s: 3732 rss: 37Mb" (or the last status line).
  line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$logs/$t.log" | tail -1)
  runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$logs/$t.log" | grep -oE '[0-9]+$')
  runs=${runs:-$(sed -E 's/^#([0-9]+).*/\1/' <<<"$line")}
  cov=$(grep -oE 'cov: [0-9]+' <<<"$line" | grep -oE '[0-9]+')
  ft=$(grep -oE 'ft: [0-9]+' <<<"$line" | grep -oE '[0-9]+')
  eps=$(grep -oE 'exec/s: [0-9]+' <<<"$line" | grep -oE '[0-9]+')
  if [ $rc -eq 0 ]; then
    result=ok
  else
    status=1
    art=$(grep -oE 'Test unit written to [^ ]+' "$logs/$t.log" | tail -1 | sed 's/Test unit written to //')
    result="FAILED ($(grep -m1 -E "panicked at|ERROR: libFuzzer" "$logs/$t.log" | head -c 120)) ${art:+input: $art}"
    grep -A3 -m1 "panicked at" "$logs/$t.log"
  fi
  printf '%-9s %12s %8s %7s %8s  %s\n' "$t" "${runs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "$result"
  summary+=("$t ${runs:-?} execs cov ${cov:-?} ft ${ft:-?}$([ $rc -eq 0 ] || echo " FAILED")")
done

if [ "${FUZZ_COVERAGE:-0}" = 1 ]; then
  rustup component add llvm-tools-preview --toolchain nightly >/dev/null 2>&1
  tools=$(dirname "$(find "$(rustc +nightly --print sysroot)" -name llvm-cov -type f | head -1)")
  objects=()
  profiles=()
  for t in $targets; do
    dirs=("corpus/$t")
    [ -d "seeds/$t" ] && dirs+=("seeds/$t")
    [ -d "regressions/$t" ] && dirs+=("regressions/$t")
    cargo +nightly fuzz coverage "$t" "${dirs[@]}" >"$logs/coverage-$t.log" 2>&1 || continue
    bin=$(find target -path "*coverage*release/$t" -type f | head -1)
    # The code each target is about: its crate, or the parser's files.
    crates=$root/host-agent/crates
    case $t in
      decode) src=flexpass-wire; files=("$crates/$src/src") ;;
      trace) src=flexpass-workload; files=("$crates/$src/src") ;;
      api) src=flexpass-agent/api.rs; files=("$crates/flexpass-agent/src/api.rs") ;;
      edge_text) src="flexpass-agent/edge{,/swx}.rs"
        files=("$crates/flexpass-agent/src/edge.rs" "$crates/flexpass-agent/src/edge/swx.rs") ;;
      *) src=flexpass-core; files=("$crates/$src/src")
        objects+=(-object "$bin"); profiles+=("coverage/$t/coverage.profdata") ;;
    esac
    # TOTAL regions missed cover% functions missed exec% lines missed cover% ...
    lines=$("$tools/llvm-cov" report "$bin" -instr-profile="coverage/$t/coverage.profdata" \
      "${files[@]}" 2>/dev/null | awk '/^TOTAL/ {print $10}')
    echo "coverage $t: $src lines ${lines:-?}"
    summary+=("$t: $src lines ${lines:-?}")
  done
  if [ ${#profiles[@]} -gt 1 ]; then
    "$tools/llvm-profdata" merge -o coverage/stateful.profdata "${profiles[@]}"
    "$tools/llvm-cov" report "${objects[@]:1}" -instr-profile=coverage/stateful.profdata \
      "$root/host-agent/crates/flexpass-core/src" >"$logs/coverage-core.txt" 2>/dev/null
    lines=$(awk '/^TOTAL/ {print $10}' "$logs/coverage-core.txt")
    echo "coverage of flexpass-core by the stateful targets together: lines ${lines:-?} (per file: build/fuzz/coverage-core.txt)"
    summary+=("stateful targets together: flexpass-core lines ${lines:-?}")
  fi
fi

(IFS=';'; echo "${summary[*]}" | sed 's/;/; /g') >"$logs/summary.txt"
exit $status
