#!/usr/bin/env bash
# Other people's tests against the drop-in rayon-core (compat/rayon-core = partita-runtime):
#  (a) rayon 1.12's own test suite (unit tests, tests/, doctests), with
#      `[patch.crates-io] rayon-core = { path = "compat/rayon-core" }`;
#  (b) rayon-core 1.13's own tests: its tests/ directory, its unit-test modules
#      (src/*/test.rs, which use only the public API apart from two helpers given a public
#      equivalent below) and its compile_fail doctests, all against the patched rayon-core.
# The sources are the registry packages as cargo fetches them. Tests that cannot pass because
# they inspect rayon-core internals are skipped by name; each is listed with its reason in
# compat/rayon-core/EXCLUDED.md (keep the two lists equal).
# Everything is built in target/rayon-compat/ (its own target dir).
# Usage: 60-rayon-compat.sh [a|b]   (default: both parts)
set -euo pipefail
PARTS=${1:-ab}
cd "$(dirname "$0")/../.."
ROOT=$PWD
WORK=$ROOT/target/rayon-compat
COMPAT=$ROOT/compat/rayon-core
RAYON_VERSION=1.12.0 # the newest rayon release; it (like 1.11) is built on rayon-core 1.13
RAYON_CORE_VERSION=1.13.0
export CARGO_TARGET_DIR=$WORK/target

# Skipped tests (name filters for libtest's --skip --exact); see compat/rayon-core/EXCLUDED.md.
RAYON_SKIP=()
RAYON_CORE_SKIP=()
# rayon-core unit tests that do not compile outside rayon-core (they read private fields):
# "<module> <fn>"; they are compiled out with #[cfg(any())].
RAYON_CORE_UNCOMPILABLE=("thread_pool workers_stop" "thread_pool sleeper_stop")

skip_args() {
  local name
  for name in "$@"; do printf -- '--skip\n%s\n' "$name"; done
}

echo "-- rayon-compat: fetch rayon $RAYON_VERSION and rayon-core $RAYON_CORE_VERSION with cargo"
mkdir -p "$WORK/fetch/src"
cat >"$WORK/fetch/Cargo.toml" <<EOF
[package]
name = "fetch-rayon"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rayon = "=$RAYON_VERSION"
rayon-core = "=$RAYON_CORE_VERSION"

[workspace]
EOF
echo 'fn main() {}' >"$WORK/fetch/src/main.rs"
cargo fetch --manifest-path "$WORK/fetch/Cargo.toml"
# cargo metadata names the unpacked sources cargo itself uses (~/.cargo/registry/src/...).
manifest_dir() {
  cargo metadata --format-version 1 --manifest-path "$WORK/fetch/Cargo.toml" |
    grep -o "\"manifest_path\":\"[^\"]*/$1-$2/Cargo.toml\"" | head -n 1 |
    sed -e 's/^"manifest_path":"//' -e 's|/Cargo.toml"$||'
}
RAYON_SRC=$(manifest_dir rayon "$RAYON_VERSION")
CORE_SRC=$(manifest_dir rayon-core "$RAYON_CORE_VERSION")
[[ -d $RAYON_SRC && -d $CORE_SRC ]] || { echo "rayon sources not found" >&2; exit 1; }

# Make a fetched package its own workspace root (it sits under this workspace's target/) whose
# rayon-core is the compat package; start from this workspace's lock file so that
# partita-runtime's dependencies have the versions the workspace tests.
patch_project() {
  cat >>"$1/Cargo.toml" <<EOF

[workspace]

[patch.crates-io]
rayon-core = { path = "$COMPAT" }
EOF
  cp "$ROOT/Cargo.lock" "$1/Cargo.lock"
}

if [[ $PARTS == *a* ]]; then
echo "-- rayon-compat (a): rayon $RAYON_VERSION's test suite on the patched rayon-core"
rm -rf "$WORK/rayon"
cp -r "$RAYON_SRC" "$WORK/rayon"
chmod -R u+w "$WORK/rayon"
patch_project "$WORK/rayon"
# `cargo tree` proves the patch took: the rayon-core in the graph is the local one.
cargo tree --manifest-path "$WORK/rayon/Cargo.toml" -e normal -i rayon-core | grep -F "$COMPAT" >/dev/null
mapfile -t skips < <(skip_args "${RAYON_SKIP[@]}")
cargo test --manifest-path "$WORK/rayon/Cargo.toml" --no-fail-fast -- "${skips[@]}"
fi
[[ $PARTS == *b* ]] || exit 0

echo "-- rayon-compat (b): rayon-core $RAYON_CORE_VERSION's own tests on partita-runtime"
H=$WORK/rayon-core-tests
rm -rf "$H"
mkdir -p "$H/src" "$H/tests"
cat >"$H/Cargo.toml" <<EOF
[package]
name = "rayon-core-tests"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rayon-core = "=$RAYON_CORE_VERSION"

# rayon-core $RAYON_CORE_VERSION's dev-dependencies, and crossbeam-utils (a dependency of
# rayon-core that its tests/scoped_threadpool.rs uses).
[dev-dependencies]
crossbeam-utils = "0.8"
rand = "0.9"
rand_xorshift = "0.4"
scoped-tls = "1.0"
libc = "0.2"
EOF
patch_project "$H"
# The compile_fail doctests (Send/lifetime errors the API must keep producing).
cp -r "$CORE_SRC/src/compile_fail" "$H/src/compile_fail"
printf '//! rayon-core %s compile_fail doctests.\n#[cfg(doctest)]\nmod compile_fail;\n' \
  "$RAYON_CORE_VERSION" >"$H/src/lib.rs"
# The integration tests, unchanged.
cp "$CORE_SRC"/tests/*.rs "$H/tests/"
# The unit-test modules, each in the module it had in rayon-core. `crate::X` and `super::X`
# name public items (re-exported at the root and in the wrapping module), except two internal
# helpers given their public equivalent: `unwind::halt_unwinding` is `catch_unwind`, and
# `registry::in_worker(op)` (run op on a worker of the current or global pool) is what
# `scope(|_| op())` does before spawning anything.
unit_test() { # <module> <test file>
  local out=$H/tests/unit_${1}.rs
  {
    echo "//! rayon-core $RAYON_CORE_VERSION: ${2#"$CORE_SRC"/}, on the patched rayon-core."
    echo '#![allow(unused_imports, clippy::all)]'
    echo 'pub use rayon_core::*;'
    echo 'mod unwind {'
    echo '    pub fn halt_unwinding<F: FnOnce() -> R, R>(f: F) -> std::thread::Result<R> {'
    echo '        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))'
    echo '    }'
    echo '}'
    echo 'mod registry {'
    echo '    pub fn in_worker<OP: FnOnce(&(), bool) -> R + Send, R: Send>(op: OP) -> R {'
    echo '        rayon_core::scope(|_| op(&(), false))'
    echo '    }'
    echo '}'
    echo "mod $1 {"
    echo '    pub use rayon_core::*;'
    echo '    use crate::{registry, unwind}; // imported by the parent modules of rayon-core'
    echo '    mod test {'
    local drop=() entry
    for entry in "${RAYON_CORE_UNCOMPILABLE[@]}"; do
      [[ ${entry% *} == "$1" ]] && drop+=(-e "s/^fn ${entry#* }(/#[cfg(any())] \\/\\/ see EXCLUDED.md\\nfn ${entry#* }(/")
    done
    if ((${#drop[@]})); then sed "${drop[@]}" "$2"; else cat "$2"; fi
    echo '    }'
    echo '}'
  } >"$out"
}
for m in broadcast join scope spawn thread_pool; do
  unit_test "$m" "$CORE_SRC/src/$m/test.rs"
done
unit_test lib "$CORE_SRC/src/test.rs"
mapfile -t skips < <(skip_args "${RAYON_CORE_SKIP[@]}")
cargo test --manifest-path "$H/Cargo.toml" --no-fail-fast -- "${skips[@]}"
echo "-- rayon-compat: all passed"
