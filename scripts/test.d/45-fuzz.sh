#!/usr/bin/env bash
# Short mutation-fuzzing run of the wire decoders (issue 12). The long run (10^6 inputs,
# recorded in BENCHMARKS.md) is:
#   cargo run -p partita-protocol --release --example fuzz_wire -- 1000000
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "== fuzz: wire decoders, 100000 inputs"
cargo run -q -p partita-protocol --release --example fuzz_wire -- 100000
