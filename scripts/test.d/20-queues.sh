#!/usr/bin/env bash
# partita-queues: model-check the concurrency core with loom (always), and run the unsafe
# atomic queue's unit tests under Miri when the nightly Miri component is installed.
# loom builds with --cfg loom, so it uses its own target dir to keep the shared one valid.
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "-- partita-queues: loom (tests/loom.rs)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 \
  cargo test -p partita-queues --test loom

if cargo +nightly miri --version >/dev/null 2>&1; then
  echo "-- partita-queues: Miri (lib unit tests of the atomic queue)"
  CARGO_TARGET_DIR=target/miri MIRIFLAGS="-Zmiri-strict-provenance" \
    cargo +nightly miri test -p partita-queues --lib
else
  echo "-- partita-queues: Miri not installed, skipping (loom above covers the protocol)"
fi
