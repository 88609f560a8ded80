#!/usr/bin/env bash
# partita-runtime extra suites:
#  1. loom model checks of the sleep / wake-up / suspension protocol (crates/runtime/src/sleep/README.md)
#     of the workers' deque (crates/runtime/src/deque/README.md) and of heartbeat promotion vs
#     steal (crates/runtime/src/join/README.md), then the deque's unit tests
#     under Miri when the nightly Miri component is installed;
#  2. the target-churn stress test at 10^5 tasks in release mode (the 10^6 variant is
#     `cargo test -p partita-runtime --release --test process_control -- --ignored`);
#  3. the runtime's tests with heartbeat joins on (off by default).
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "-- runtime: loom (sleep protocol, deque, join promotion)"
CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
  cargo test -p partita-runtime --lib --release -- loom_

if cargo +nightly miri --version >/dev/null 2>&1; then
  echo "-- runtime: Miri (the deque's unit tests)"
  CARGO_TARGET_DIR=target/miri MIRIFLAGS="-Zmiri-strict-provenance -Zmiri-disable-isolation" \
    cargo +nightly miri test -p partita-runtime --lib -- deque::
else
  echo "-- runtime: Miri not installed, skipping the deque under Miri (loom covers the protocol)"
fi

echo "-- runtime: churn stress (release)"
PARTITA_CHURN_TASKS=100000 cargo test -p partita-runtime --release --test process_control \
  -- every_task_runs_once_under_target_churn

# Heartbeat joins are off by default (crates/runtime/src/join/README.md §5); the opt-in path
# keeps rayon-core's semantics too: the runtime's whole test suite once more with it on.
echo "-- runtime: the test suite with heartbeat joins on (PARTITA_HEARTBEAT_US=on)"
PARTITA_HEARTBEAT_US=on cargo test -q -p partita-runtime
