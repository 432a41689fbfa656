#!/usr/bin/env bash
# The README's second command, and what CI runs: install what the tests need, then run
# the whole suite against the real kernel. As root it also creates the unprivileged
# `kc-test` user for the tests that must run without privileges.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
bash "$root/Tools/install-deps.sh" --tests
cd "$root"
swift build --build-tests
swift test --skip-build --disable-swift-testing 2>&1 | tee "$root/.build/test-output.txt"
status=${PIPESTATUS[0]}
# XCTest and Swift Testing each print their own summary; give one plain line as well.
passed=$(grep -cE "^Test Case '.*' passed" "$root/.build/test-output.txt" || true)
failed=$(grep -cE "^Test Case '.*' failed" "$root/.build/test-output.txt" || true)
skipped=$(grep -cE "^Test Case '.*' skipped" "$root/.build/test-output.txt" || true)
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit "$status"
