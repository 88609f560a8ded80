#!/usr/bin/env bash
# The dependency floors of what compat/rayon-core pulls in (partita-runtime, -queues,
# -protocol, -numa) are real (issue 33): in a scratch workspace holding only those crates
# (no dev-dependencies, which consumers never build), every direct dependency is resolved to
# the oldest version its requirement allows (`-Z direct-minimal-versions`, nightly), and
# partita-runtime must still build. A project whose Cargo.lock is a year old then takes the
# rayon-core patch with `cargo update -p rayon-core` alone (README, "Use with rayon").
# Skipped (with a message) when no nightly toolchain is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
W=$ROOT/target/minimal-versions
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "-- minimal-versions: no nightly toolchain; skipped"
  exit 0
fi
rm -rf "$W/ws"
mkdir -p "$W/ws/crates"
for c in queues protocol runtime numa stats; do
  cp -r "crates/$c" "$W/ws/crates/$c"
  rm -rf "$W/ws/crates/$c"/{tests,benches,examples,vm,target}
done
python3 - "$ROOT/Cargo.toml" "$W/ws" <<'PY'
import glob, re, sys
root, ws = sys.argv[1], sys.argv[2]
head = open(root).read().split("\n[package]")[0]
head = re.sub(r"members = \[.*?\]", 'members = ["crates/*"]', head, flags=re.S)
head = re.sub(r"exclude = \[.*?\]\n", "", head, flags=re.S)
open(ws + "/Cargo.toml", "w").write(head + "\n")
drop = {"[dev-dependencies]", "[[bench]]", "[[bin]]", "[[example]]", "[[test]]"}
for p in glob.glob(ws + "/crates/*/Cargo.toml"):
    out, skip = [], False
    for line in open(p).read().split("\n"):
        if line.startswith("["):
            skip = line.strip() in drop
        if not skip:
            out.append(line)
    open(p, "w").write("\n".join(out))
PY
echo "-- minimal-versions: resolve every direct dependency to its floor"
cargo +nightly update -Z direct-minimal-versions --manifest-path "$W/ws/Cargo.toml"
grep -A1 -E '^name = "(libc|nix|crossbeam-deque|crossbeam-utils|thiserror|tracing|perf-event2)"$' \
  "$W/ws/Cargo.lock" | grep -v '^--' | paste - - | sed 's/^/   /'
echo "-- minimal-versions: partita-runtime builds at the floors"
CARGO_TARGET_DIR=$W/target cargo +nightly check --quiet --manifest-path "$W/ws/Cargo.toml" -p partita-runtime
echo "-- minimal-versions: passed"
