#!/usr/bin/env bash
# The root package's cross-crate programs, run for real (short runs): the end-to-end
# multiprogramming benchmark (manager in-process + runtime processes; fails if any copy loses
# or repeats a task) and the examples a user copies. The integration tests in tests/ run in
# `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== bench: multiprogramming (short)"
cargo bench --bench multiprogramming
for ex in under_manager partitions reaction; do
  echo "== example: $ex"
  if [[ $ex == reaction ]]; then
    cargo run --release --example reaction 20
  else
    cargo run --release --example "$ex"
  fi
done
