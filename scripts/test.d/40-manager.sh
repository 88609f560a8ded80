#!/usr/bin/env bash
# Manager/protocol checks that need a special build: the control page's seqlock under loom
# (every interleaving and memory ordering of one writer and one reader).
# The integration tests with real processes run in `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== loom: partita-protocol seqlock"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p partita-protocol --release --lib seqlock
