#!/usr/bin/env bash
# The declared `rust-version` (workspace Cargo.toml) is real for the crates a rayon program
# patched onto compat/rayon-core builds (issue 33): partita-runtime, -queues, -protocol, -numa,
# checked with that toolchain (installed here with `rustup toolchain install --profile
# minimal` if missing), on Linux and on the portable path (`PARTITA_PORTABLE=1`).
set -euo pipefail
cd "$(dirname "$0")/../.."
MSRV=$(sed -n 's/^rust-version = "\([0-9.]*\)"$/\1/p' Cargo.toml | head -n 1)
[[ -n $MSRV ]] || { echo "no rust-version in Cargo.toml" >&2; exit 1; }
rustup toolchain list | grep -q "^$MSRV" || rustup toolchain install "$MSRV" --profile minimal
export CARGO_TARGET_DIR=target/msrv
CRATES=(-p partita-runtime -p partita-queues -p partita-protocol -p partita-numa)
echo "-- msrv: Rust $MSRV builds the runtime's crates"
cargo "+$MSRV" check --quiet "${CRATES[@]}"
echo "-- msrv: Rust $MSRV builds the portable runtime"
PARTITA_PORTABLE=1 cargo "+$MSRV" check --quiet -p partita-runtime
echo "-- msrv: passed"
