#!/usr/bin/env bash
# Bounded fuzz run of every cargo-fuzz target in fuzz/ (see fuzz/README.md).
#   ci/fuzz.sh [SECONDS [TARGET...]]
# SECONDS per target: the first argument, else $FUZZ_SECONDS, else 20.
# TARGETs: default all (`cargo fuzz list`).
#
# Installs cargo-fuzz when missing, builds the targets, replays the inputs
# kept under fuzz/regressions/<target>/, then fuzzes each target from its
# committed seed corpus fuzz/corpus/<target>/. New inputs go to a temporary
# directory, so the committed corpus never grows. Prints one summary line per
# target with its number of executions; exits non-zero when any target
# crashed, hung or ran out of memory (the crashing input is then left in
# fuzz/artifacts/<target>/ and the end of libFuzzer's log is printed).
set -uo pipefail
source "$(dirname "$0")/../ci/lib/scope.sh" "$@" # a scope of its own: stops what it starts
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)

secs=${1:-${FUZZ_SECONDS:-20}}
shift || true
case "$secs" in
  ''|*[!0-9]*) echo "fuzz: seconds must be a whole number, got '$secs'" >&2; exit 2 ;;
esac

if ! rustup toolchain list | grep '^nightly' >/dev/null; then
  echo "fuzz: installing the nightly toolchain"
  rustup toolchain install nightly --profile minimal >/dev/null || {
    echo "fuzz: the nightly toolchain is required (rustup toolchain install nightly)" >&2
    exit 1
  }
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  t0=$(date +%s)
  echo "fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet || { echo "fuzz: cannot install cargo-fuzz" >&2; exit 1; }
  echo "fuzz: cargo-fuzz installed in $(( $(date +%s) - t0 )) s"
fi
echo "fuzz: $(cargo fuzz --version)"

fuzz=(cargo +nightly fuzz)
if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <("${fuzz[@]}" list)
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no targets found" >&2; exit 1; }

t0=$(date +%s)
if [ $# -gt 0 ]; then
  for t in "${targets[@]}"; do
    "${fuzz[@]}" build "$t" || { echo "fuzz: building $t failed" >&2; exit 1; }
  done
else
  "${fuzz[@]}" build || { echo "fuzz: building the targets failed" >&2; exit 1; }
fi
echo "fuzz: built ${#targets[@]} targets in $(( $(date +%s) - t0 )) s"

# The lines of a libFuzzer log that say what went wrong and where the input is.
explain() {
  grep -E -A2 "panicked at|^==[0-9]+==ERROR|^ERROR: libFuzzer|ALARM: working on the last Unit" "$1" | head -n 30 >&2
  grep -E "^SUMMARY|Test unit written to|^Running: " "$1" | head -n 10 >&2
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
summary=()

for t in "${targets[@]}"; do
  # Replay the inputs that once crashed this target.
  reg="$root/fuzz/regressions/$t"
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    log="$work/$t.regressions.log"
    if "${fuzz[@]}" run "$t" "$reg"/* -- -runs=1 >"$log" 2>&1; then
      summary+=("fuzz summary: $t: $(ls "$reg" | wc -l) regression inputs replayed: ok")
    else
      failed=1
      summary+=("fuzz summary: $t: regression inputs in fuzz/regressions/$t: FAILED")
      echo "fuzz: $t fails on a regression input:" >&2
      explain "$log"
    fi
  fi

  corpus="$root/fuzz/corpus/$t"
  mkdir -p "$corpus"
  new="$work/$t.new"
  mkdir -p "$new"
  log="$work/$t.log"
  t1=$(date +%s)
  "${fuzz[@]}" run "$t" "$new" "$corpus" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - t1 ))
  runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
  [ -n "$runs" ] || runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  nnew=$(ls "$new" | wc -l)
  if [ $rc -eq 0 ]; then
    summary+=("fuzz summary: $t: ${runs:-?} runs in ${took} s, ${cov:-cov: ?}, $nnew new inputs: ok")
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    summary+=("fuzz summary: $t: ${runs:-?} runs in ${took} s: FAILED (exit $rc${artifact:+, input in $artifact})")
    echo "fuzz: $t failed:" >&2
    explain "$log"
  fi
done

printf '%s\n' "${summary[@]}"
echo "fuzz: total $(( $(date +%s) - start )) s"
if [ $failed -ne 0 ]; then
  echo "fuzz: FAILED" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ok"
