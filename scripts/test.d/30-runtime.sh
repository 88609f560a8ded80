#!/usr/bin/env bash
# partita-runtime extra suites:
#  1. loom model checks of the sleep / wake-up / suspension protocol (crates/runtime/src/sleep/README.md)
#     and of the workers' deque (crates/runtime/src/deque/README.md), then the deque's unit tests
#     under Miri when the nightly Miri component is installed;
#  2. the target-churn stress test at 10^5 tasks in release mode (the 10^6 variant is
#     `cargo test -p partita-runtime --release --test process_control -- --ignored`).
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "-- runtime: loom (sleep protocol, deque)"
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
