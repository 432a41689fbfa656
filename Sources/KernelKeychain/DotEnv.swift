/// The dotenv format of one service: `NAME=value` per line.
///
/// Reading accepts what dotenv files in the wild contain: blank lines, `#` comments
/// (whole lines, and after an unquoted value when preceded by a space), an `export `
/// prefix, spaces around the name and an unquoted value, `=` inside values (the first
/// `=` separates), CRLF line ends, `'single quoted'` values taken literally and
/// `"double quoted"` values with `\n \r \t \" \\ \$` escapes; both may span lines.
///
/// Writing aims at every reader at once: python-dotenv, docker compose's `env_file`
/// and systemd's `EnvironmentFile=` must each read back the exact value. The forms
/// they agree on are narrow, so ``render(_:)`` picks one per value (see ``quoted(_:)``)
/// and refuses, naming the item, a value none of them can carry.
public enum DotEnv {
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var value: [UInt8]
        public var line: Int
    }

    public static func parse(_ text: String) throws(ArchiveError) -> [Entry] {
        // Unicode scalars, not Characters: a combining mark after a quote or a CR before
        // an LF would otherwise merge with the syntax into one Character.
        let scalars = Array(text.unicodeScalars)
        var lines: [ArraySlice<Unicode.Scalar>] = []
        var start = 0
        for (position, scalar) in scalars.enumerated() where scalar == "\n" {
            let end = position > start && scalars[position - 1] == "\r" ? position - 1 : position
            lines.append(scalars[start..<end])
            start = position + 1
        }
        lines.append(scalars[start...])

        var entries: [Entry] = []
        var seen: [String: Int] = [:]
        var index = 0
        while index < lines.count {
            let number = index + 1
            var line = lines[index].drop(while: isBlank)
            index += 1
            if line.isEmpty || line.first == "#" { continue }
            if line.starts(with: "export".unicodeScalars), line.count > 6, isBlank(line[line.startIndex + 6]) {
                line = line.dropFirst(7).drop(while: isBlank)
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ArchiveError(location: "line \(number)", problem: "expected NAME=value")
            }
            let name = string(trimmed(line[..<equals]))
            guard isValidName(name) else {
                throw ArchiveError(location: "line \(number)", problem: "'\(name)' is not a name (letters, digits, '_', '.', '-'; not starting with a digit)")
            }
            var rest = line[(equals + 1)...].drop(while: isBlank)
            var value = String.UnicodeScalarView()
            if rest.first == "'" {
                // A single-quoted value may continue on the following lines too.
                rest = rest.dropFirst()
                while true {
                    if let close = rest.firstIndex(of: "'") {
                        value.append(contentsOf: rest[..<close])
                        try checkTrailing(rest[(close + 1)...], line: number)
                        break
                    }
                    guard index < lines.count else {
                        throw ArchiveError(location: "line \(number)", problem: "the single quote is not closed")
                    }
                    value.append(contentsOf: rest)
                    value.append("\n")
                    rest = lines[index]
                    index += 1
                }
            } else if rest.first == "\"" {
                // A double-quoted value may continue on the following lines.
                var body = rest.dropFirst()
                while true {
                    if let after = try unescape(body, into: &value, line: number) {
                        try checkTrailing(after, line: number)
                        break
                    }
                    guard index < lines.count else {
                        throw ArchiveError(location: "line \(number)", problem: "the double quote is not closed")
                    }
                    value.append("\n")
                    body = lines[index]
                    index += 1
                }
            } else {
                var text = rest
                // A `#` starts a comment when a space or tab comes before it.
                for position in text.indices.dropFirst() where text[position] == "#" && isBlank(text[position - 1]) {
                    text = text[..<position]
                    break
                }
                value.append(contentsOf: trimmed(text))
            }
            let bytes = Array(String(value).utf8)
            guard bytes.count <= KeychainError.maximumValueSize else {
                throw ArchiveError(location: "line \(number)", problem: "\(name) is \(bytes.count) bytes; the limit is \(KeychainError.maximumValueSize)")
            }
            if let first = seen[name] {
                throw ArchiveError(location: "line \(number)", problem: "\(name) is set again (first on line \(first))")
            }
            seen[name] = number
            entries.append(Entry(name: name, value: bytes, line: number))
        }
        return entries
    }

    /// Renders items as `NAME='value'` lines (``quoted(_:)``). Names must be dotenv
    /// names and values UTF-8 text that every reader keeps; anything else is an error
    /// naming the item (use JSON).
    public static func render(_ items: [(name: String, value: [UInt8])]) throws(ArchiveError) -> String {
        var text = ""
        for item in items {
            guard isValidName(item.name) else {
                throw ArchiveError(location: item.name, problem: "is not a dotenv name; export this service as JSON")
            }
            guard !item.value.contains(0), let value = String(validating: item.value, as: UTF8.self) else {
                throw ArchiveError(location: item.name, problem: "is binary (not UTF-8, or has NUL); export this service as JSON")
            }
            switch quoted(value) {
            case .success(let quoted): text += "\(item.name)=\(quoted)\n"
            case .failure(let reason): throw ArchiveError(location: item.name, problem: "\(reason); export this service as JSON")
            }
        }
        return text
    }

    /// Why no quoting carries a value to every reader; completes "NAME ...".
    public enum Unquotable: Error, CustomStringConvertible, Equatable {
        case carriageReturn
        case expansion
        case trailingBackslash
        case quoteAndDollar

        public var description: String {
            switch self {
            case .carriageReturn:
                "has a carriage return, which python-dotenv turns into a newline and systemd cannot escape"
            case .expansion:
                "has '${...}', which python-dotenv expands in every kind of quotes"
            case .trailingBackslash:
                "ends with a backslash, which python-dotenv reads as escaping the closing quote"
            case .quoteAndDollar:
                "has '$' as well as a single quote or a backslash escape, which single quotes cannot hold, and compose expands '$' in double quotes"
            }
        }
    }

    /// The value as python-dotenv (0.21 and later), compose v2 and systemd all read it:
    /// - single quotes, taken literally by all three, when the value has no `'` and no
    ///   backslash pair that python-dotenv or compose would read as an escape (`\\`, `\'`);
    /// - else double quotes escaping only `\` and `"` (the escapes all three share),
    ///   when the value has no `$` (compose expands it in double quotes, and `\$` means
    ///   two characters to python-dotenv: the bug this replaced);
    /// - else nothing works.
    /// Newlines stay literal inside either quote: all three read a quoted value across
    /// lines. A carriage return cannot stay literal (python-dotenv reads files with
    /// universal newlines) nor be escaped (systemd keeps `\r` as two characters);
    /// python-dotenv expands `${NAME}` inside single quotes too, and its pattern for a
    /// double-quoted value takes `\\"` at the end for an escaped quote, so a value that
    /// ends in a backslash has no form either.
    public static func quoted(_ value: String) -> Result<String, Unquotable> {
        let scalars = Array(value.unicodeScalars)
        if scalars.contains("\r") { return .failure(.carriageReturn) }
        if hasExpansion(scalars) { return .failure(.expansion) }
        if scalars.last == "\\" { return .failure(.trailingBackslash) }
        let backslashEscapes = zip(scalars, scalars.dropFirst()).contains { $0 == "\\" && ($1 == "\\" || $1 == "'") }
        if !scalars.contains("'") && !backslashEscapes {
            return .success("'\(value)'")
        }
        if !scalars.contains("$") {
            var escaped = "\""
            for scalar in scalars {
                if scalar == "\\" || scalar == "\"" { escaped += "\\" }
                escaped.unicodeScalars.append(scalar)
            }
            return .success(escaped + "\"")
        }
        return .failure(.quoteAndDollar)
    }

    /// python-dotenv's variable form, which it expands: `${NAME}` or `${NAME:-DEFAULT}`,
    /// where NAME has no `}` or `:` and DEFAULT no `}`.
    private static func hasExpansion(_ scalars: [Unicode.Scalar]) -> Bool {
        for start in scalars.indices.dropLast() where scalars[start] == "$" && scalars[start + 1] == "{" {
            var position = start + 2
            while position < scalars.count, scalars[position] != "}", scalars[position] != ":" { position += 1 }
            guard position < scalars.count else { return false }
            if scalars[position] == "}" { return true }
            guard position + 1 < scalars.count, scalars[position + 1] == "-" else { continue }
            if scalars[(position + 2)...].contains("}") { return true }
        }
        return false
    }

    /// `[A-Za-z_][A-Za-z0-9_.-]*`, at most 255 bytes.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.utf8.count <= 255 else { return false }
        func isLetter(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_" }
        return isLetter(first) && name.unicodeScalars.allSatisfy {
            isLetter($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-"
        }
    }

    private static func isBlank(_ scalar: Unicode.Scalar) -> Bool { scalar == " " || scalar == "\t" }

    private static func trimmed(_ text: ArraySlice<Unicode.Scalar>) -> ArraySlice<Unicode.Scalar> {
        var text = text
        while let first = text.first, isBlank(first) { text = text.dropFirst() }
        while let last = text.last, isBlank(last) { text = text.dropLast() }
        return text
    }

    private static func string(_ scalars: ArraySlice<Unicode.Scalar>) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }

    private static func checkTrailing(_ rest: ArraySlice<Unicode.Scalar>, line: Int) throws(ArchiveError) {
        let trailing = trimmed(rest)
        guard trailing.isEmpty || trailing.first == "#" else {
            throw ArchiveError(location: "line \(line)", problem: "unexpected text after the closing quote")
        }
    }

    /// Appends the unescaped text up to an unescaped `"` and returns what follows it;
    /// nil if the quote does not close on this line (everything was appended).
    private static func unescape(
        _ body: ArraySlice<Unicode.Scalar>, into value: inout String.UnicodeScalarView, line: Int
    ) throws(ArchiveError) -> ArraySlice<Unicode.Scalar>? {
        var position = body.startIndex
        while position < body.endIndex {
            let scalar = body[position]
            if scalar == "\"" { return body[(position + 1)...] }
            if scalar == "\\" && position + 1 < body.endIndex {
                switch body[position + 1] {
                case "n": value.append("\n")
                case "r": value.append("\r")
                case "t": value.append("\t")
                case "\"", "\\", "$", "'": value.append(body[position + 1])
                default:
                    throw ArchiveError(location: "line \(line)", problem: "unknown escape '\\\(body[position + 1])'")
                }
                position += 2
                continue
            }
            value.append(scalar)
            position += 1
        }
        return nil
    }
}

