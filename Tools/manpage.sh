#!/usr/bin/env bash
# Writes kc's man page (default .build/man/kc.1). The command reference comes from
# kc's argument parser, through swift-argument-parser's generate-manual plugin; the
# rest (DESCRIPTION's opening, ENVIRONMENT, FILES, EXIT STATUS, EXAMPLES, SEE ALSO) is
# written by hand in docs/kc.1.extra. The page is, in order: NAME, SYNOPSIS (one line
# per command, from the parser), DESCRIPTION, COMMANDS (the plugin's subcommand list),
# then the sections of docs/kc.1.extra.
#
# Fixed on the way, line by line, in the text of the help (written for the terminal):
#   - an empty line (a paragraph break in --help) becomes .Pp, mdoc's paragraph macro;
#   - a text line that begins with ' or . is a troff request, which swallows the line
#     (the plugin guards only the first line of a text), so it gets the zero-width \&;
#   - lines indented by two spaces (examples) are kept as they are, in a literal display,
#     instead of being filled into the paragraph.
# And in the plugin's own output: its comment line stays a comment (not text: it was
# once the page's stray first line, "."); NAME's description is a lower-case phrase;
# each command's --version and --help (the same everywhere) are said once; the plugin's
# EXIT STATUS ("exits 0 on success, and >0 if an error occurs") gives way to kc's.
# The date is the last commit's, so every build of one commit makes the same page.
#
# `man --warnings -l PAGE` is quiet on the result; the test suite checks that
# (Tests/kcTests/ManPageTests.swift), and that ENVIRONMENT names every variable the
# sources read.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
out=${1:-$root/.build/man/kc.1}
extra=$root/docs/kc.1.extra
command -v python3 > /dev/null || { echo "manpage.sh: python3 is needed (Tools/install-deps.sh installs it)" >&2; exit 1; }
mkdir -p "$root/.build/man" "$(dirname "$out")"
date=$(git -C "$root" log -1 --format=%cs 2>/dev/null || date -u +%F)
# The plugin builds every product in release mode (an up-to-date build is a quick
# no-op), then runs generate-manual on each executable that uses the parser.
swift package --package-path "$root" --allow-writing-to-package-directory generate-manual --date "$date" \
    > "$root/.build/manpage.log" 2>&1 || { cat "$root/.build/manpage.log" >&2; exit 1; }
generated=$root/.build/plugins/GenerateManual/outputs/kc/kc.1
# The parser's description of every command, for SYNOPSIS: what is optional or
# repeated, which the generated page does not say.
kc=$(swift build -c release --package-path "$root" --show-bin-path)/kc
"$kc" --experimental-dump-help > "$root/.build/man/kc-help.json"

python3 - "$generated" "$root/.build/man/kc-help.json" "$extra" > "$out.tmp" <<'PYTHON'
import json
import re
import sys

generated_path, help_path, extra_path = sys.argv[1:4]


def is_macro(line):
    return re.match(r"^\.([A-Z][a-z]|\\\")", line) is not None


def fix_help_text(lines):
    """The line-by-line fixes of the help text (see the head of manpage.sh)."""
    fixed, example = [], False

    def emit(text):
        if text.startswith("'") or (text.startswith(".") and not is_macro(text)):
            text = "\\&" + text
        fixed.append(text)

    for line in lines:
        if line.startswith("  ") and not is_macro(line):
            if not example:
                fixed.append(".Bd -literal -offset indent")
                example = True
            emit(line[2:])
            continue
        if example:
            fixed.append(".Ed")
            example = False
        if line == "":
            if not fixed or fixed[-1] != ".Pp":
                fixed.append(".Pp")
            continue
        emit(line)
    if example:
        fixed.append(".Ed")
    return fixed


def sections(lines):
    """(preamble, [(title, body lines)]) of an mdoc page."""
    preamble, parts = [], []
    for line in lines:
        if line.startswith(".Sh "):
            parts.append((line[4:].strip().strip('"'), []))
        elif parts:
            parts[-1][1].append(line)
        else:
            preamble.append(line)
    return preamble, parts


def split_items(body):
    """Splits a list's body (between .Bl and .El) into its items, each from its .It."""
    items, depth = [], 0
    for line in body:
        if line.startswith(".It") and depth == 0:
            items.append([])
        if line.startswith(".Bl"):
            depth += 1
        elif line.startswith(".El"):
            depth -= 1
        if items:
            items[-1].append(line)
    return items


def without_common_options(lines):
    """Drops --version and --help from every list below the top: said once, at the top."""
    kept, depth, skipping = [], 0, None
    for line in lines:
        if skipping is not None and depth == skipping and (line.startswith(".It") or line.startswith(".El")):
            skipping = None
        if line.startswith(".It") and depth >= 2 and line in (".It Fl -version", ".It Fl h , -help"):
            skipping = depth
        if line.startswith(".Bl"):
            depth += 1
        elif line.startswith(".El"):
            depth -= 1
        if skipping is None:
            kept.append(line)
    return kept


def tidy(lines):
    """No empty lists; no paragraph break where mdoc makes none or its own (before .It,
    .El, .Sh, or a display, which has a blank line above it anyway)."""
    changed = True
    while changed:
        changed, result = False, []
        for line in lines:
            if result and line.startswith(".El") and result[-1].startswith(".Bl"):
                result.pop()
                changed = True
                continue
            if result and result[-1] == ".Pp" and (line.startswith((".It", ".El", ".Sh", ".Bd"))
                                                   or line == ".Pp"):
                result.pop()
                changed = True
            result.append(line)
        lines = result
    return lines


def quoted(word):
    if word == "" or re.search(r'[\s"]', word):
        return '"' + word.replace('"', "\\(dq") + '"'
    return word


def argument_synopsis(argument):
    """One argument as the mdoc of a SYNOPSIS line."""
    value = quoted(argument.get("valueName", ""))
    if argument["kind"] == "positional":
        text = "Ar " + value
        if argument.get("parsingStrategy") in ("allRemainingInput", "postTerminator", "captureForPassthrough"):
            text = "Fl - " + text
    else:
        name = argument.get("preferredName") or argument["names"][0]
        dashes = {"short": "", "long": "-", "longWithSingleDash": ""}[name["kind"]]
        text = "Fl " + dashes + name["name"]
        if argument["kind"] == "option":
            text += " Ar " + value
    if argument.get("isRepeating"):
        text += " ..."
    if argument.get("isOptional", True):
        text = "Op " + text
    return "." + text


def synopsis(command, words, root):
    """The SYNOPSIS lines of a command and its subcommands: one per command that runs."""
    lines = []
    arguments = [a for a in command.get("arguments", []) if a.get("shouldDisplay", True)]
    subcommands = [s for s in command.get("subcommands", []) if s.get("shouldDisplay", True)]
    if not root:
        arguments = [a for a in arguments
                     if not (a["kind"] == "flag" and a.get("valueName") in ("help", "version"))]
    if root or not subcommands:
        lines.append(".Nm")
        if words:
            lines.append(".Cm " + " ".join(quoted(w) for w in words))
        named = [a for a in arguments if a["kind"] != "positional"]
        positional = [a for a in arguments if a["kind"] == "positional"]
        lines += [argument_synopsis(a) for a in named + positional]
    for subcommand in subcommands:
        lines += synopsis(subcommand, words + [subcommand["commandName"]], False)
    return lines


def name_description(line):
    """`.Nd "A keychain ...s."` becomes `.Nd a keychain ...s`, as NAME lines read."""
    text = line[4:].strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1]
    text = text.rstrip(".")
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        text = text[0].lower() + text[1:]
    return ".Nd " + text


with open(generated_path) as file:
    page = file.read().split("\n")
if page and page[-1] == "":
    page.pop()
with open(help_path) as file:
    parser = json.load(file)["command"]
with open(extra_path) as file:
    extra = [line for line in file.read().split("\n") if not line.startswith('.\\"')]
while extra and extra[-1] == "":
    extra.pop()

preamble, generated = sections(fix_help_text(page))
_, handwritten = sections(extra)
generated = dict(generated)
handwritten_titles = [title for title, _ in handwritten]
handwritten = dict(handwritten)
for needed in ("NAME", "SYNOPSIS", "DESCRIPTION"):
    if needed not in generated:
        sys.exit(f"manpage.sh: the generated page has no {needed} section")

# DESCRIPTION: the hand-written text, the root command's discussion, then its options;
# the commands in the same list become COMMANDS.
description = generated.pop("DESCRIPTION")
start = next(i for i, line in enumerate(description) if line.startswith(".Bl"))
end = max(i for i, line in enumerate(description) if line.startswith(".El"))
options, commands = [], []
for item in split_items(without_common_options(description[start:end + 1])[1:-1]):
    heading = re.match(r"^\.It Em (\S+)$", item[0])
    if heading:
        commands += [".It Cm " + heading.group(1)] + item[1:]
    else:
        options += item
# Subcommands of subcommands (kc vault init) are headed like their parents.
commands = [re.sub(r"^\.It Em (\S+)$", r".It Cm \1", line) for line in commands]

out = ['.\\" Generated by Tools/manpage.sh from kc\'s argument parser (swift-argument-parser\'s',
       '.\\" generate-manual) and docs/kc.1.extra; edit those, not this file.']
# .Os without a name reads "BSD" at the foot of the page (groff 1.22); kc is Linux's.
out += [".Os Linux" if line == ".Os" else line for line in preamble if not line.startswith('.\\"')]
out += [".Sh NAME"] + [name_description(l) if l.startswith(".Nd ") else l for l in generated.pop("NAME")]
generated.pop("SYNOPSIS")
out += [".Sh SYNOPSIS"] + synopsis(parser, [], True)
out += [".Sh DESCRIPTION"] + handwritten.pop("DESCRIPTION", []) + [".Pp"] + description[:start]
if options:
    out += [".Pp", "Options of", ".Nm", "itself:", description[start]] + options + [".El"]
out += [".Sh COMMANDS", description[start]] + commands + [".El"]
if "EXIT STATUS" not in handwritten:
    sys.exit("manpage.sh: docs/kc.1.extra has no EXIT STATUS section")
for title in handwritten_titles:
    if title in handwritten:
        generated.pop(title, None)
        out += [".Sh " + title] + handwritten.pop(title)
for title, body in generated.items():
    out += [".Sh " + title] + body
print("\n".join(tidy(out)))
PYTHON
mv "$out.tmp" "$out"
