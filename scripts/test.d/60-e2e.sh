#!/usr/bin/env bash
# The root package's cross-crate programs, run for real (short runs): the end-to-end
# multiprogramming benchmarks (a real `partita serve` + runtime processes; they fail if any copy
# loses or repeats a task) and the examples a user copies. The integration tests in tests/ run in
# `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== bench: multiprogramming (short)"
cargo bench --bench multiprogramming
echo "== bench: short programs beside a long one (short)"
cargo bench --bench short_programs -- --runs 1 --long-rounds 1500 --short-rounds 100
for ex in under_manager partitions reaction; do
  echo "== example: $ex"
  if [[ $ex == reaction ]]; then
    cargo run --release --example reaction 20
  else
    cargo run --release --example "$ex"
  fi
done
