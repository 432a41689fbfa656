import KernelKeychain
import KeyringCore

/// Just enough JSON (RFC 8259) for docker-credential-kc, without Foundation's decoder
/// (its start-up would be most of a helper call): reading one object's string fields,
/// strictly, and writing a string.
enum StrictJSON {
    /// Why the input is not the JSON asked for, with the byte where reading stopped
    /// (`expected ':' at byte 12`). It never quotes the input: that may be a secret.
    struct SyntaxError: Error, Equatable {
        var reason: String
    }

    /// The named string fields of the one object `json` holds (white space around it
    /// only). Other fields may hold any JSON value and are skipped; a named field that
    /// is null counts as absent; one that is not a string, or that appears twice, is an
    /// error. Values are UTF-8 bytes; the caller zeroes them.
    static func stringFields(of json: [UInt8], named wanted: Set<String>) throws(SyntaxError) -> [String: [UInt8]] {
        var fields: [String: [UInt8]] = [:]
        do {
            try readFields(of: json, named: wanted, into: &fields)
            return fields
        } catch {
            // A field read before the error may be the secret.
            for name in Array(fields.keys) { fields[name]?.overwriteWithZeros() }
            throw error
        }
    }

    private static func readFields(of json: [UInt8], named wanted: Set<String>, into fields: inout [String: [UInt8]]) throws(SyntaxError) {
        var reader = Reader(bytes: json)
        var seen: Set<String> = []
        reader.skipSpace()
        try reader.expect(UInt8(ascii: "{"))
        reader.skipSpace()
        if reader.peek() == UInt8(ascii: "}") {
            reader.position += 1
        } else {
            while true {
                reader.skipSpace()
                guard reader.peek() == UInt8(ascii: "\"") else { throw reader.error("expected a field name in quotes") }
                let nameBytes = try reader.string()
                let name = String(decoding: nameBytes, as: UTF8.self)
                reader.skipSpace()
                try reader.expect(UInt8(ascii: ":"))
                reader.skipSpace()
                if wanted.contains(name) {
                    guard seen.insert(name).inserted else { throw reader.error("the field \(name) appears twice") }
                    if reader.peek() == UInt8(ascii: "\"") {
                        fields[name] = try reader.string()
                    } else if reader.consume("null") {
                        // Absent, as encoding/json reads it.
                    } else {
                        throw reader.error("\(name) must be a string")
                    }
                } else {
                    try reader.skipValue(depth: 0)
                }
                reader.skipSpace()
                if reader.peek() == UInt8(ascii: ",") { reader.position += 1; continue }
                try reader.expect(UInt8(ascii: "}"))
                break
            }
        }
        reader.skipSpace()
        guard reader.position == json.count else { throw reader.error("unexpected text after the object") }
    }

    /// Appends `bytes` as a JSON string (the core's ``JSONString``, which the front's
    /// docker answer writes with too). False, appending nothing, if they are not UTF-8.
    @discardableResult
    static func appendString(_ bytes: [UInt8], to output: inout [UInt8]) -> Bool {
        bytes.withUnsafeBytes { JSONString.append($0, to: &output) }
    }

    private struct Reader {
        let bytes: [UInt8]
        var position = 0

        func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

        func error(_ reason: String) -> SyntaxError {
            SyntaxError(reason: position < bytes.count ? "\(reason) at byte \(position + 1)" : "\(reason) at the end")
        }

        mutating func skipSpace() {
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
        }

        mutating func expect(_ byte: UInt8) throws(SyntaxError) {
            guard peek() == byte else { throw error("expected '\(Character(Unicode.Scalar(byte)))'") }
            position += 1
        }

        mutating func consume(_ literal: String) -> Bool {
            let literal = Array(literal.utf8)
            guard bytes.count - position >= literal.count, bytes[position..<position + literal.count].elementsEqual(literal)
            else { return false }
            position += literal.count
            return true
        }

        /// A string's UTF-8 bytes, escapes resolved; `position` is at its opening quote.
        /// On an error, what was read of it is zeroed (it may be part of a secret).
        mutating func string() throws(SyntaxError) -> [UInt8] {
            var value: [UInt8] = []
            do {
                try readString(into: &value)
                return value
            } catch {
                value.overwriteWithZeros()
                throw error
            }
        }

        private mutating func readString(into value: inout [UInt8]) throws(SyntaxError) {
            // Long enough for any string in the input, so growing leaves no copy behind.
            value.reserveCapacity(bytes.count - position)
            var at = position
            let failure = bytes.withUnsafeBytes { JSONString.read($0, at: &at, into: &value) }
            position = at
            switch failure {
            case nil: return
            case .unterminated: throw error("unterminated string")
            case .notUTF8: throw error("a string is not valid UTF-8")
            case .unescapedControl: throw error("a control character must be escaped in a string")
            case .loneSurrogate: throw error("a lone UTF-16 surrogate")
            case .invalidUnicodeEscape: throw error("an invalid \\u escape")
            // Not quoted: the character after the backslash may be the secret's.
            case .invalidEscape: throw error("an invalid backslash escape")
            }
        }

        /// Skips any JSON value, checking its syntax.
        mutating func skipValue(depth: Int) throws(SyntaxError) {
            guard depth < 64 else { throw error("nesting too deep") }
            switch peek() {
            case UInt8(ascii: "\"")?:
                var skipped = try string()
                skipped.overwriteWithZeros()
            case UInt8(ascii: "{")?:
                position += 1
                skipSpace()
                if peek() == UInt8(ascii: "}") { position += 1; return }
                while true {
                    skipSpace()
                    guard peek() == UInt8(ascii: "\"") else { throw error("expected a field name in quotes") }
                    _ = try string()
                    skipSpace()
                    try expect(UInt8(ascii: ":"))
                    skipSpace()
                    try skipValue(depth: depth + 1)
                    skipSpace()
                    if peek() == UInt8(ascii: ",") { position += 1; continue }
                    try expect(UInt8(ascii: "}"))
                    return
                }
            case UInt8(ascii: "[")?:
                position += 1
                skipSpace()
                if peek() == UInt8(ascii: "]") { position += 1; return }
                while true {
                    skipSpace()
                    try skipValue(depth: depth + 1)
                    skipSpace()
                    if peek() == UInt8(ascii: ",") { position += 1; continue }
                    try expect(UInt8(ascii: "]"))
                    return
                }
            default:
                if consume("true") || consume("false") || consume("null") { return }
                try skipNumber()
            }
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        private mutating func skipNumber() throws(SyntaxError) {
            let isDigit = { (byte: UInt8?) in byte.map { (0x30...0x39).contains($0) } ?? false }
            if peek() == UInt8(ascii: "-") { position += 1 }
            if peek() == UInt8(ascii: "0") {
                position += 1
            } else {
                guard isDigit(peek()) else { throw error("expected a JSON value") }
                while isDigit(peek()) { position += 1 }
            }
            if peek() == UInt8(ascii: ".") {
                position += 1
                guard isDigit(peek()) else { throw error("expected a digit") }
                while isDigit(peek()) { position += 1 }
            }
            if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
                position += 1
                if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
                guard isDigit(peek()) else { throw error("expected a digit") }
                while isDigit(peek()) { position += 1 }
            }
        }
    }
}
