/// The dotenv format of one service: `NAME=value` per line.
///
/// Reading accepts what dotenv files in the wild contain: blank lines, `#` comments
/// (whole lines, and after an unquoted value when preceded by a space), an `export `
/// prefix, spaces around the name and an unquoted value, `=` inside values (the first
/// `=` separates), CRLF line ends, `'single quoted'` values taken literally and
/// `"double quoted"` values with `\n \r \t \" \\ \$` escapes that may span lines.
/// Writing always double-quotes, so any UTF-8 value without NUL round-trips.
public enum DotEnv {
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var value: [UInt8]
        public var line: Int
    }

    public static func parse(_ text: String) throws(ArchiveError) -> [Entry] {
        var entries: [Entry] = []
        var seen: [String: Int] = [:]
        // "\r\n" is a single Character in Swift, so both line ends are separators.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        var index = 0
        while index < lines.count {
            let number = index + 1
            var line = lines[index].drop(while: { $0 == " " || $0 == "\t" })
            index += 1
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") || line.hasPrefix("export\t") { line = line.dropFirst(7).drop(while: { $0 == " " || $0 == "\t" }) }
            guard let equals = line.firstIndex(of: "=") else {
                throw ArchiveError(location: "line \(number)", problem: "expected NAME=value")
            }
            let name = String(line[..<equals].trimmingSpaces)
            guard isValidName(name) else {
                throw ArchiveError(location: "line \(number)", problem: "'\(name)' is not a name (letters, digits, '_', '.', '-'; not starting with a digit)")
            }
            var rest = line[line.index(after: equals)...].drop(while: { $0 == " " || $0 == "\t" })
            var value = ""
            if rest.hasPrefix("'") {
                rest = rest.dropFirst()
                guard let close = rest.firstIndex(of: "'") else {
                    throw ArchiveError(location: "line \(number)", problem: "the single quote is not closed")
                }
                value = String(rest[..<close])
                try checkTrailing(rest[rest.index(after: close)...], line: number)
            } else if rest.hasPrefix("\"") {
                // A double-quoted value may continue on the following lines.
                var body = rest.dropFirst()
                while true {
                    if let (text, after) = try unescapeUntilQuote(body, line: number) {
                        value += text
                        try checkTrailing(after, line: number)
                        break
                    }
                    guard index < lines.count else {
                        throw ArchiveError(location: "line \(number)", problem: "the double quote is not closed")
                    }
                    value += (try unescapeAll(body, line: number)) + "\n"
                    body = lines[index]
                    index += 1
                }
            } else {
                var text = rest
                // A `#` starts a comment when a space or tab comes before it.
                var previous: Character? = nil
                for position in text.indices {
                    if text[position] == "#", previous == " " || previous == "\t" {
                        text = text[..<position]
                        break
                    }
                    previous = text[position]
                }
                value = String(text.trimmingSpaces)
            }
            guard !value.isEmpty else {
                throw ArchiveError(location: "line \(number)", problem: "\(name) is empty; kernel keys cannot be empty")
            }
            guard value.utf8.count <= KeychainError.maximumValueSize else {
                throw ArchiveError(location: "line \(number)", problem: "\(name) is \(value.utf8.count) bytes; the limit is \(KeychainError.maximumValueSize)")
            }
            if let first = seen[name] {
                throw ArchiveError(location: "line \(number)", problem: "\(name) is set again (first on line \(first))")
            }
            seen[name] = number
            entries.append(Entry(name: name, value: Array(value.utf8), line: number))
        }
        return entries
    }

    /// Renders items as `NAME="value"` lines. Names must be dotenv names and values
    /// UTF-8 without NUL; anything else is an error naming the item (use JSON).
    public static func render(_ items: [(name: String, value: [UInt8])]) throws(ArchiveError) -> String {
        var text = ""
        for item in items {
            guard isValidName(item.name) else {
                throw ArchiveError(location: item.name, problem: "is not a dotenv name; export this service as JSON")
            }
            guard !item.value.contains(0), let value = String(validating: item.value, as: UTF8.self) else {
                throw ArchiveError(location: item.name, problem: "is binary (not UTF-8, or has NUL); export this service as JSON")
            }
            var escaped = ""
            for character in value {
                switch character {
                case "\\": escaped += "\\\\"
                case "\"": escaped += "\\\""
                case "$": escaped += "\\$"
                case "\n": escaped += "\\n"
                case "\r": escaped += "\\r"
                case "\t": escaped += "\\t"
                default: escaped.append(character)
                }
            }
            text += "\(item.name)=\"\(escaped)\"\n"
        }
        return text
    }

    /// `[A-Za-z_][A-Za-z0-9_.-]*`, at most 255 bytes.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.utf8.count <= 255 else { return false }
        func isLetter(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_" }
        return isLetter(first) && name.unicodeScalars.allSatisfy {
            isLetter($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-"
        }
    }

    private static func checkTrailing(_ rest: Substring, line: Int) throws(ArchiveError) {
        let trailing = rest.trimmingSpaces
        guard trailing.isEmpty || trailing.hasPrefix("#") else {
            throw ArchiveError(location: "line \(line)", problem: "unexpected text after the closing quote")
        }
    }

    /// Unescapes up to an unescaped `"`; nil if the quote does not close on this line.
    private static func unescapeUntilQuote(_ body: Substring, line: Int) throws(ArchiveError) -> (String, Substring)? {
        var result = ""
        var position = body.startIndex
        while position < body.endIndex {
            let character = body[position]
            if character == "\"" { return (result, body[body.index(after: position)...]) }
            if character == "\\" {
                let next = body.index(after: position)
                guard next < body.endIndex else { return nil }
                result.append(try unescape(body[next], line: line))
                position = body.index(after: next)
                continue
            }
            result.append(character)
            position = body.index(after: position)
        }
        return nil
    }

    private static func unescapeAll(_ body: Substring, line: Int) throws(ArchiveError) -> String {
        var result = ""
        var escaping = false
        for character in body {
            if escaping { result.append(try unescape(character, line: line)); escaping = false }
            else if character == "\\" { escaping = true }
            else { result.append(character) }
        }
        return result
    }

    private static func unescape(_ character: Character, line: Int) throws(ArchiveError) -> Character {
        switch character {
        case "n": return "\n"
        case "r": return "\r"
        case "t": return "\t"
        case "\"", "\\", "$", "'": return character
        default: throw ArchiveError(location: "line \(line)", problem: "unknown escape '\\\(character)'")
        }
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}
