#!/usr/bin/env bash
# Writes kc's man page (default .build/man/kc.1): swift-argument-parser's generate-manual
# plugin, then the two things mdoc misreads in help texts written for the terminal,
# fixed line by line:
#   - an empty line (a paragraph break in --help) becomes .Pp, mdoc's paragraph macro;
#   - a text line that begins with ' or . is a troff request, which swallows the line
#     (the plugin guards only the first line of a text), so it gets the zero-width \&;
#   - lines indented by two spaces (examples) are kept as they are, in a literal display,
#     instead of being filled into the paragraph.
# `man --warnings -l PAGE` is quiet on the result; the test suite checks that.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
out=${1:-$root/.build/man/kc.1}
mkdir -p "$root/.build" "$(dirname "$out")"
swift package --package-path "$root" --allow-writing-to-package-directory generate-manual \
    > "$root/.build/manpage.log" 2>&1 || { cat "$root/.build/manpage.log" >&2; exit 1; }
awk '
    function emit(text) {
        if (text ~ /^\x27/ || (text ~ /^\./ && text !~ /^\.[A-Z][a-z]/)) text = "\\&" text
        print text; previous = text
    }
    function end_example() { if (example) { print ".Ed"; example = 0 } }
    /^$/ { end_example(); if (previous != ".Pp") print ".Pp"; previous = ".Pp"; next }
    /^  / { if (!example) { print ".Bd -literal -offset indent"; example = 1 }; emit(substr($0, 3)); next }
    { end_example(); emit($0) }
    END { end_example() }
' "$root/.build/plugins/GenerateManual/outputs/kc/kc.1" > "$out"
