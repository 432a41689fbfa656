import Foundation

// The shell examples of the README and docs/INTEGRATIONS.md, read from the markdown so
// the suite can run them (docs/EXAMPLES.md is the notation, for the people who write them).
// This file reads the blocks and compares output; ExampleSandbox.swift runs them.

/// One `$ command` of an example block and the lines the docs show it printing.
public struct ExampleStep: Sendable {
    /// Who types it: nil for a plain `$ ` prompt (the sandbox's own user), else the name
    /// before the `$` (`alice$ `), a throwaway account of its own.
    public var user: String?
    public var command: String
    public var expected: [String]
    /// The line of the command in the markdown file, from 1.
    public var line: Int
}

/// A file an example block uses, written out of a code block marked
/// `<!-- example file: PATH -->` (PATH relative to the home folder, or `~/...`).
public struct ExampleFile: Sendable {
    public var path: String
    public var contents: String
    public var line: Int
    /// A file that starts with `#!` is made executable.
    public var executable: Bool { contents.hasPrefix("#!") }
}

/// A fenced code block with `$ ` prompts, and what its `<!-- example ... -->` markers say.
public struct ExampleBlock: Sendable {
    public var file: String
    /// The line of the opening fence, from 1: how a block is named (`README.md:17`).
    public var line: Int
    public var steps: [ExampleStep] = []
    /// `<!-- example: not run — REASON -->`
    public var notRunReason: String?
    /// `<!-- example: continues -->`: runs in the sandbox (shells, keyrings, homes) of the
    /// block run before it in the same file.
    public var continues = false
    /// `<!-- example: as root -->`: the `$` user is the uid running the tests (root), not
    /// a throwaway account.
    public var asRoot = false
    /// `<!-- example: users alice, bob -->`: accounts the commands name without a prompt of theirs.
    public var extraUsers: [String] = []
    /// `<!-- example: group deploy: alice, bob -->` (`you`: the `$` user)
    public var groups: [String: [String]] = [:]
    /// `<!-- example: types "TEXT" at each prompt -->`: standard input is a terminal, and
    /// TEXT is typed at every prompt (output that waits after `: `).
    public var typed: String?
    /// `<!-- example setup: ... -->`: commands run first, their output not compared.
    public var setup: [ExampleStep] = []
    /// Files from `example file` blocks since the previous example block.
    public var files: [ExampleFile] = []

    public var name: String { "\(file):\(line)" }

    /// Every account the block needs besides the `$` user, by its name in the docs.
    public var namedUsers: [String] {
        var names: [String] = []
        for name in (steps + setup).compactMap(\.user) + extraUsers + groups.values.flatMap({ $0 })
        where !names.contains(name) && name != "you" { names.append(name) }
        return names
    }
}

/// A problem in the markdown itself: a marker kc's reader does not understand, a block
/// it cannot read.
public struct ExampleMarkupError: Error, CustomStringConvertible, Sendable {
    public var file: String
    public var line: Int
    public var message: String
    public var description: String { "\(file):\(line): \(message)" }
}

public enum DocumentedExamples {
    /// The markdown files whose examples the suite runs, relative to the checkout.
    public static let files = ["README.md", "docs/INTEGRATIONS.md", "docs/CONTAINERS.md", "docs/FLEET.md",
                               "docs/SECRET-SERVICE.md", "docs/SHARING.md", "docs/VAULT.md", "docs/SWIFT.md",
                               "docs/DESIGN-NOTES.md", "docs/TESTING.md"]

    /// The checkout this test was built from.
    public static var checkout: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    /// `$ `, or a user's name and `$ `, at the start of a line.
    static let promptPattern = try! NSRegularExpression(pattern: "^([a-z][a-z0-9_-]*)?\\$ ")

    /// The example blocks of one markdown file (`name` is how messages name it).
    public static func parse(_ text: String, name: String) -> (blocks: [ExampleBlock], errors: [ExampleMarkupError]) {
        let lines = text.components(separatedBy: "\n")
        var blocks: [ExampleBlock] = []
        var errors: [ExampleMarkupError] = []
        var pendingFiles: [ExampleFile] = []
        var index = 0
        while index < lines.count {
            guard let fence = openingFence(lines[index]) else { index += 1; continue }
            let start = index
            var end = index + 1
            while end < lines.count, !isClosingFence(lines[end], of: fence) { end += 1 }
            let body = lines[(start + 1)..<min(end, lines.count)].map { dropIndent($0, fence.indent) }
            let markers = markersAbove(start, in: lines)
            index = end + 1
            let isExample = body.contains { prompt(of: $0) != nil }
            if !isExample {
                for marker in markers {
                    if let path = marker.text.dropPrefix("example file:") {
                        let path = path.trimmingCharacters(in: .whitespaces)
                        if path.isEmpty {
                            errors.append(.init(file: name, line: marker.line, message: "`example file:` needs a path"))
                        } else {
                            pendingFiles.append(ExampleFile(path: path, contents: body.joined(separator: "\n") + "\n", line: start + 1))
                        }
                    } else {
                        errors.append(.init(file: name, line: marker.line,
                                            message: "an example marker above a block without `$ ` prompts: \(marker.text)"))
                    }
                }
                continue
            }
            var block = ExampleBlock(file: name, line: start + 1)
            block.files = pendingFiles
            pendingFiles = []
            for marker in markers.reversed() {
                if let error = apply(marker, to: &block) {
                    errors.append(.init(file: name, line: marker.line, message: error))
                }
            }
            for (offset, line) in body.enumerated() {
                if let (user, command) = prompt(of: line) {
                    block.steps.append(ExampleStep(user: user, command: command, expected: [], line: start + 2 + offset))
                } else if block.steps.isEmpty {
                    errors.append(.init(file: name, line: start + 2 + offset, message: "output before the first `$ ` prompt"))
                } else {
                    block.steps[block.steps.count - 1].expected.append(line)
                }
            }
            if block.continues, !blocks.contains(where: { $0.notRunReason == nil }) {
                errors.append(.init(file: name, line: block.line, message: "`continues`, but no block runs before it"))
            }
            blocks.append(block)
        }
        if !pendingFiles.isEmpty {
            errors.append(.init(file: name, line: pendingFiles[0].line, message: "an `example file` with no example block after it"))
        }
        return (blocks, errors)
    }

    /// Reads the docs' example blocks from the checkout.
    public static func load() throws -> (blocks: [ExampleBlock], errors: [ExampleMarkupError]) {
        var blocks: [ExampleBlock] = []
        var errors: [ExampleMarkupError] = []
        for file in files {
            let text = try String(contentsOfFile: checkout + "/" + file, encoding: .utf8)
            let parsed = parse(text, name: file)
            blocks += parsed.blocks
            errors += parsed.errors
        }
        return (blocks, errors)
    }

    // MARK: Markdown

    struct Fence { var indent: Int; var character: Character; var count: Int }

    static func openingFence(_ line: String) -> Fence? {
        let indent = line.prefix { $0 == " " }.count
        let rest = line.dropFirst(indent)
        guard let first = rest.first, first == "`" || first == "~" else { return nil }
        let count = rest.prefix { $0 == first }.count
        guard count >= 3 else { return nil }
        return Fence(indent: indent, character: first, count: count)
    }

    static func isClosingFence(_ line: String, of fence: Fence) -> Bool {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        return trimmed.count >= fence.count && trimmed.allSatisfy { $0 == fence.character }
    }

    static func dropIndent(_ line: String, _ indent: Int) -> String {
        String(line.dropFirst(min(indent, line.prefix { $0 == " " }.count)))
    }

    /// The user (nil for `$`) and the command of a prompt line.
    static func prompt(of line: String) -> (String?, String)? {
        let range = NSRange(line.startIndex..., in: line)
        guard let match = promptPattern.firstMatch(in: line, range: range),
              let whole = Range(match.range, in: line) else { return nil }
        let user = Range(match.range(at: 1), in: line).map { String(line[$0]) }
        return (user, String(line[whole.upperBound...]))
    }

    struct Marker { var text: String; var line: Int }

    /// The `<!-- example ... -->` comments right above line `fence` (blank lines between
    /// them allowed), innermost last; the text after `<!--`, trimmed.
    static func markersAbove(_ fence: Int, in lines: [String]) -> [Marker] {
        var markers: [Marker] = []
        var index = fence - 1
        while index >= 0 {
            let line = lines[index].trimmingCharacters(in: .whitespaces)
            if line.isEmpty { index -= 1; continue }
            guard line.hasSuffix("-->") else { break }
            var start = index
            while start >= 0, !lines[start].contains("<!--") { start -= 1 }
            guard start >= 0 else { break }
            var text = lines[start...index].joined(separator: "\n")
            text = String(text[text.range(of: "<!--")!.upperBound...])
            text = String(text.dropLast(3)).trimmingCharacters(in: .whitespacesAndNewlines)
            guard text.hasPrefix("example") else { break }
            markers.append(Marker(text: text, line: start + 1))
            index = start - 1
        }
        return markers
    }

    /// Applies one marker; an error message if it is not understood.
    static func apply(_ marker: Marker, to block: inout ExampleBlock) -> String? {
        if let script = marker.text.dropPrefix("example setup:") {
            for (offset, line) in script.components(separatedBy: "\n").enumerated() {
                let command = line.trimmingCharacters(in: .whitespaces)
                guard !command.isEmpty else { continue }
                let (user, text) = prompt(of: command) ?? (nil, command)
                block.setup.append(ExampleStep(user: user, command: text, expected: [], line: marker.line + offset))
            }
            return nil
        }
        guard let options = marker.text.dropPrefix("example:") else {
            return "not an example marker kc's reader knows (docs/EXAMPLES.md): \(marker.text)"
        }
        for option in splitOptions(options) {
            if let reason = option.dropPrefix("not run") {
                let reason = reason.trimmingCharacters(in: CharacterSet(charactersIn: " —–-:"))
                guard !reason.isEmpty else { return "`not run` needs a reason: `not run — needs a reboot`" }
                block.notRunReason = reason
            } else if option == "continues" {
                block.continues = true
            } else if option == "as root" {
                block.asRoot = true
            } else if let names = option.dropPrefix("users ") {
                block.extraUsers += names.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            } else if let rest = option.dropPrefix("group "), let colon = rest.firstIndex(of: ":") {
                let group = rest[..<colon].trimmingCharacters(in: .whitespaces)
                block.groups[group] = rest[rest.index(after: colon)...].split(separator: ",")
                    .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            } else if let rest = option.dropPrefix("types \""), let close = rest.firstIndex(of: "\""),
                      rest[rest.index(after: close)...].trimmingCharacters(in: .whitespaces) == "at each prompt" {
                block.typed = String(rest[..<close])
            } else {
                return "unknown example option '\(option)' (docs/EXAMPLES.md lists them)"
            }
        }
        return nil
    }

    /// Options are separated by `;`, except inside a `not run` reason, which is last.
    static func splitOptions(_ text: String) -> [String] {
        var options: [String] = []
        var rest = Substring(text)
        while !rest.isEmpty {
            let trimmed = rest.drop { $0 == " " }
            if trimmed.hasPrefix("not run") { options.append(String(trimmed).trimmingCharacters(in: .whitespaces)); break }
            let end = trimmed.firstIndex(of: ";") ?? trimmed.endIndex
            let option = trimmed[..<end].trimmingCharacters(in: .whitespaces)
            if !option.isEmpty { options.append(option) }
            rest = end == trimmed.endIndex ? "" : trimmed[trimmed.index(after: end)...]
        }
        return options
    }
}

// MARK: Comparing output

/// What a command printed against what the docs show (docs/EXAMPLES.md, "Notation"):
/// `<word>` stands for any text within a line (a serial, a date, a pid), `…` for any
/// text (also none), a line of only `…` for any number of lines; runs of spaces compare
/// equal whatever their length, and spaces at either end of a line and blank lines at
/// the end of the output do not count.
public enum ExampleOutput {
    /// The output's lines: a last line without a newline is a line (`kc get` adds none to
    /// a pipe; the docs show it as the terminal does, before the next prompt).
    public static func lines(_ output: String) -> [String] {
        var lines = output.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    /// The text as a terminal shows it: without colour and other SGR escape sequences
    /// (`ESC [ ... m`, as direnv writes around its messages).
    public static func visible(_ output: String) -> String {
        guard output.contains("\u{1b}") else { return output }
        var result = ""
        var rest = Substring(output)
        while let escape = rest.firstIndex(of: "\u{1b}") {
            result += rest[..<escape]
            var end = rest.index(after: escape)
            if end < rest.endIndex, rest[end] == "[" {
                end = rest.index(after: end)
                while end < rest.endIndex, rest[end].isNumber || rest[end] == ";" { end = rest.index(after: end) }
                if end < rest.endIndex, rest[end] == "m" { rest = rest[rest.index(after: end)...]; continue }
            }
            result.append("\u{1b}")
            rest = rest[rest.index(after: escape)...]
        }
        return result + rest
    }

    public static func matches(expected: [String], actual: [String]) -> Bool {
        let expected = trimTrailingBlankLines(expected.map(normalize))
        let actual = trimTrailingBlankLines(actual.map(normalize))
        let patterns = expected.map(LinePattern.init)
        var memo: [Int: Bool] = [:]
        func match(_ e: Int, _ a: Int) -> Bool {
            let key = e * (actual.count + 1) + a
            if let known = memo[key] { return known }
            let result: Bool
            if e == patterns.count {
                result = a == actual.count
            } else if patterns[e].isAnyLines {
                result = match(e + 1, a) || (a < actual.count && match(e, a + 1))
            } else {
                result = a < actual.count && patterns[e].matches(actual[a]) && match(e + 1, a + 1)
            }
            memo[key] = result
            return result
        }
        return match(0, 0)
    }

    /// Runs of spaces as one space, no spaces at either end (tabs stay as they are).
    static func normalize(_ line: String) -> String {
        var result = ""
        var lastWasSpace = false
        for character in line {
            if character == " " {
                if !lastWasSpace { result.append(" ") }
                lastWasSpace = true
            } else {
                result.append(character)
                lastWasSpace = false
            }
        }
        while result.hasSuffix(" ") { result.removeLast() }
        if result.hasPrefix(" ") { result.removeFirst() }
        return result
    }

    static func trimTrailingBlankLines(_ lines: [String]) -> [String] {
        var lines = lines
        while lines.last == "" { lines.removeLast() }
        return lines
    }

    /// One expected line: literal text, `<word>` (one or more characters) and `…` (any).
    struct LinePattern {
        enum Piece: Equatable { case text(Character), oneOrMore, anyText }
        var pieces: [Piece] = []
        var isAnyLines: Bool

        init(_ line: String) {
            isAnyLines = line == "…"
            var rest = Substring(line)
            while let first = rest.first {
                if first == "…" {
                    pieces.append(.anyText)
                    rest = rest.dropFirst()
                } else if first == "<", let close = rest.firstIndex(of: ">"),
                          Self.isPlaceholderName(rest[rest.index(after: rest.startIndex)..<close]) {
                    pieces.append(.oneOrMore)
                    rest = rest[rest.index(after: close)...]
                } else {
                    pieces.append(.text(first))
                    rest = rest.dropFirst()
                }
            }
        }

        static func isPlaceholderName(_ name: Substring) -> Bool {
            guard let first = name.first, first.isASCII, first.isLowercase else { return false }
            return name.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") }
        }

        func matches(_ line: String) -> Bool {
            let characters = Array(line)
            var memo: [Int: Bool] = [:]
            func match(_ p: Int, _ c: Int) -> Bool {
                let key = p * (characters.count + 1) + c
                if let known = memo[key] { return known }
                let result: Bool
                if p == pieces.count {
                    result = c == characters.count
                } else {
                    switch pieces[p] {
                    case .text(let character):
                        result = c < characters.count && characters[c] == character && match(p + 1, c + 1)
                    case .anyText:
                        result = match(p + 1, c) || (c < characters.count && match(p, c + 1))
                    case .oneOrMore:
                        result = c < characters.count && (match(p + 1, c + 1) || match(p, c + 1))
                    }
                }
                memo[key] = result
                return result
            }
            return match(0, 0)
        }
    }
}

extension String {
    /// The rest after `prefix`, or nil.
    func dropPrefix(_ prefix: String) -> String? {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : nil
    }
}

extension Substring {
    func dropPrefix(_ prefix: String) -> String? {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : nil
    }
}
