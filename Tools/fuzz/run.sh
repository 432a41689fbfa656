#!/usr/bin/env bash
# Builds the libFuzzer harnesses (with AddressSanitizer) and runs each for a bounded
# time: SECONDS_PER_TARGET (default 60). Prints executions and findings per target;
# exits non-zero if any harness finds a crash or a property violation.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
seconds=${SECONDS_PER_TARGET:-60}
swift build -c release --package-path "$here" --scratch-path "$here/.build" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library >&2
binary="$here/.build/release/kc-fuzz"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for target in names timeout json dotenv describe paths; do
    mkdir -p "$work/$target"
    cp "$here/corpus/$target/"* "$work/$target/"
    log="$work/$target.log"
    if SWIFT_BACKTRACE=enable=no KC_FUZZ_TARGET=$target "$binary" -max_total_time="$seconds" -max_len=4096 \
        -artifact_prefix="$work/$target-" "$work/$target" > "$log" 2>&1; then
        result="no findings"
    else
        result="FINDING (see below)"; status=1
    fi
    runs=$(grep -oE '#[0-9]+' "$log" | tail -1 | tr -d '#')
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
    echo "$target: ${runs:-0} executions in ${seconds}s, $cov, $result"
    [ "$result" = "no findings" ] || tail -30 "$log"
done
exit $status
