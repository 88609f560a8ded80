#!/usr/bin/env bash
# partita-runtime's public API follows semver (issue 33): cargo-semver-checks compares it with
# the API of the baseline release and fails if a change needs a bigger version bump than the
# one in crates/runtime/Cargo.toml (for 0.y.z: anything breaking needs 0.(y+1).0).
#
# The baseline: nothing is published yet, so the baseline release is a commit of this
# repository, named in BASELINE below — the first commit whose packages were ready for
# crates.io (`cargo publish --dry-run` of the whole chain), which stands for 0.1.0. When a
# release is published, replace it by the release's tag (or use --baseline-version).
#
# compat/rayon-core is not checked this way: it re-exports partita-runtime's items, and
# cargo-semver-checks does not follow re-exports of another crate's items (against the
# registry's rayon-core 1.13.0 it reports every item missing). That package's promise (the
# same API as rayon-core 1.13) is checked by building and running rayon's and rayon-core's
# own suites, their compile_fail doctests included, against it (60-rayon-compat.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BASELINE=a6cbc4d2ed2cc14a4f63ec721bbf3470d310eb2f  # partita-runtime 0.1.0
if ! command -v cargo-semver-checks >/dev/null; then
  echo "semver: cargo-semver-checks not found (run scripts/install-deps)" >&2
  exit 2
fi
if ! git cat-file -e "$BASELINE^{commit}" 2>/dev/null; then
  echo "semver: the baseline commit $BASELINE is not in this clone (a shallow clone?);" \
    "fetch the history (git fetch --unshallow) and run again" >&2
  exit 2
fi
echo "-- semver: partita-runtime $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)" \
  "against the baseline ${BASELINE:0:12} (0.1.0)"
CARGO_TARGET_DIR=target/semver cargo semver-checks -p partita-runtime --baseline-rev "$BASELINE"
