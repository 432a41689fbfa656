#!/usr/bin/env bash
# The level-race tests (Tests/kcTests/LevelRaceTests.swift), long: two writers of one
# key at two levels, and set racing the removal of its service, in-process and as
# `kc set` processes. CI runs 2000 library and 200 process rounds; this runs 10000 of
# each (override with KC_RACE_ROUNDS and KC_RACE_CLI_ROUNDS) and prints one line.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
export KC_RACE_ROUNDS=${KC_RACE_ROUNDS:-10000}
export KC_RACE_CLI_ROUNDS=${KC_RACE_CLI_ROUNDS:-10000}
cd "$root"
swift build --build-tests >&2 || { echo "race: build failed"; exit 2; }
log=$(mktemp /tmp/kc-race.XXXXXX)
start=$(date +%s)
swift test --skip-build --disable-swift-testing --filter LevelRaceTests >"$log" 2>&1
status=$?
passed=$(grep -cE "^Test Case '.*' passed" "$log" || true)
failed=$(grep -cE "^Test Case '.*' failed" "$log" || true)
skipped=$(grep -cE "^Test Case '.*' skipped" "$log" || true)
summary="race: $passed passed, $failed failed, $skipped skipped ($KC_RACE_ROUNDS library rounds, $KC_RACE_CLI_ROUNDS process rounds, $(( $(date +%s) - start )) s)"
if [ "$status" -ne 0 ]; then
    grep -E "error:" "$log" | cut -c1-400 >&2
    echo "$summary; log: $log"
else
    rm -f "$log"
    echo "$summary"
fi
exit "$status"
