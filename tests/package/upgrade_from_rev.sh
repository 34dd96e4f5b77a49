#!/usr/bin/env bash
# The package test (test_package.py) with the "previous version" built from an older source
# tree, so that the upgrade migrates state an older runsnack wrote (schema migrations):
#
#   tests/package/upgrade_from_rev.sh REV [BUILD_DIR]
#
# REV: a git revision (e.g. the last release's tag); its runsnack binary (Release, only that
# target) goes into the previous package in place of the current one; the maintainer scripts
# stay the current ones. BUILD_DIR: the current build to package (default build/dev). As root;
# about 15 minutes on 2 cores (the old binary's build). Not part of `make test`.
set -euo pipefail
rev=${1:?usage: upgrade_from_rev.sh REV [BUILD_DIR]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${2:-$root/build/dev}" && pwd)
old=$(mktemp -d "${TMPDIR:-/tmp}/runsnack-rev.XXXXXX")
cleanup() { git -C "$root" worktree remove --force "$old/src" >/dev/null 2>&1 || true; rm -rf "$old"; }
trap cleanup EXIT

git -C "$root" worktree add --detach "$old/src" "$rev" >/dev/null
cmake -G Ninja -Wno-dev -S "$old/src" -B "$old/build" -DCMAKE_BUILD_TYPE=Release -DRUNSNACK_CUDA_SHIM=OFF >/dev/null
ninja -C "$old/build" -j"${JOBS:-$(nproc)}" runsnack
echo "previous version: $("$old/build/src/cli/runsnack" --version) from $(git -C "$root" rev-parse --short "$rev")"
python3 "$root/tests/package/test_package.py" "$build" --previous-binary "$old/build/src/cli/runsnack"
