#!/usr/bin/env bash
# The portable build (issue 33): the `[patch.crates-io] rayon-core` must build wherever rayon
# does, so partita-runtime compiles its Linux-only half (manager client, re-pinning, NUMA,
# perf-event counters, futex words) only under `cfg(partita_linux)` (crates/runtime/build.rs).
#  1. For macOS (x86-64, ARM), Windows (MSVC) and FreeBSD: `cargo clippy -D warnings` (a
#     `cargo check` plus lints) of partita-runtime's library and of a three-line rayon
#     program patched onto compat/rayon-core. Targets come from `rustup target add`
#     (scripts/install-deps); only the standard library is needed, nothing is linked. (Not
#     the runtime's tests: criterion, a dev-dependency, builds C code with the target's
#     C compiler, which this machine does not have.)
#  2. On Linux with the portable path forced (`PARTITA_PORTABLE=1`, read by the runtime's
#     build script): partita-runtime's own tests, so the fallback (futex emulation, no client)
#     is run, not only compiled, and the patched rayon program runs. rayon's and rayon-core's
#     suites on the forced portable path take longer than this suite's budget; run them with
#     `PARTITA_PORTABLE=1 scripts/test.d/60-rayon-compat.sh`.
# Everything is built in the workspace's target/ (other targets in target/<triple>/), so the
# host's build scripts and the runtime's dependencies are reused; the forced build only
# rebuilds partita-runtime (and, afterwards, the next normal build rebuilds it back).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
WORK=$ROOT/target/portable
export CARGO_TARGET_DIR=$ROOT/target
TARGETS=(x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-msvc x86_64-unknown-freebsd)

installed=$(rustup target list --installed)
for t in "${TARGETS[@]}"; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# The program a new user writes: rayon, patched onto the compat package.
P=$WORK/patched-rayon
mkdir -p "$P/src"
cat >"$P/Cargo.toml" <<EOT
[package]
name = "patched-rayon"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rayon = "1.11"

[patch.crates-io]
rayon-core = { path = "$ROOT/compat/rayon-core" }

[workspace]
EOT
cat >"$P/src/main.rs" <<'EOT'
use rayon::prelude::*;

fn main() {
    let sum: u64 = (1..=1000u64).into_par_iter().map(|x| x * x).sum();
    println!("{sum}");
}
EOT
# The workspace's lock file: partita-runtime's dependencies at the versions the workspace tests.
cp "$ROOT/Cargo.lock" "$P/Cargo.lock"

for t in "${TARGETS[@]}"; do
  echo "-- portable: $t: partita-runtime, clippy -D warnings"
  cargo clippy --quiet --target "$t" -p partita-runtime --lib -- -D warnings
  echo "-- portable: $t: a rayon program patched onto compat/rayon-core, clippy -D warnings"
  cargo clippy --quiet --target "$t" --manifest-path "$P/Cargo.toml" -- -D warnings
done
# The patch took (the rayon-core in the graph is the local one), on the last target.
cargo tree --manifest-path "$P/Cargo.toml" --target "${TARGETS[-1]}" -e normal -i rayon-core |
  grep -F "$ROOT/compat/rayon-core" >/dev/null

echo "-- portable: partita-runtime's tests on Linux with the portable path forced"
PARTITA_PORTABLE=1 cargo test --quiet -p partita-runtime
echo "-- portable: the patched rayon program runs on the forced portable path"
out=$(PARTITA_PORTABLE=1 cargo run --quiet --manifest-path "$P/Cargo.toml")
[[ $out == 333833500 ]] || { echo "patched rayon program printed $out" >&2; exit 1; }
echo "-- portable: all passed"
