#!/usr/bin/env bash
# Short coverage-guided fuzzing run (issue 12): cargo-fuzz (libFuzzer, AddressSanitizer,
# overflow checks) on the two targets of fuzz/, each for FUZZ_SECONDS (default 25; 40 until CI reached 30 min) from the
# committed seeds. Installs a minimal nightly toolchain and cargo-fuzz when missing. If either
# cannot be installed, it says so and runs the stable stand-ins instead (the mutation fuzzer of
# the wire decoders and the manager's random-session test), which are not coverage-guided.
# The long run (10^6 inputs per target, recorded in BENCHMARKS.md) is:
#   cd fuzz && cargo +nightly fuzz run <wire_decode|session> corpus/<t> seeds/<t> -- \
#     -runs=1000000 -timeout=10 -max_len=16384 [-detect_leaks=0 for session]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-25}

fallback() {
  echo "!! fuzz: $1" >&2
  echo "!! fuzz: FALLING BACK to the stable, non-coverage-guided fuzzers" >&2
  echo "== fuzz (stable fallback): wire decoders, 100000 mutated inputs"
  cargo run -q -p partita-protocol --release --example fuzz_wire -- 100000
  echo "== fuzz (stable fallback): 2000 random sessions against an in-process manager"
  PARTITA_FUZZ_SESSIONS=2000 cargo test -q --release -p partita-manager --test session_fuzz
  exit 0
}

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "== fuzz: installing a minimal nightly toolchain"
  rustup toolchain install nightly --profile minimal ||
    fallback "cannot install a nightly toolchain (cargo-fuzz needs one)"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked || fallback "cannot install cargo-fuzz"
fi

cd fuzz
echo "== fuzz: building the targets (cargo +nightly fuzz build)"
cargo +nightly fuzz build
# -timeout: an input taking longer is a hang (a failure); -max_len: a client frame is at most
# 4 KiB, a few of them are enough. session: -detect_leaks=0, because the manager keeps state
# across inputs (its registry, tokio's), so libFuzzer's per-input heuristic (more mallocs than
# frees) would run a full LeakSanitizer scan after almost every input (38 instead of ~470
# inputs/s); memory growth is still caught by libFuzzer's -rss_limit_mb.
run() {
  local target=$1
  shift
  echo "== fuzz: $target for ${seconds} s"
  mkdir -p "corpus/$target"
  cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -max_len=16384 -print_final_stats=1 "$@"
}
run wire_decode
run session -detect_leaks=0
