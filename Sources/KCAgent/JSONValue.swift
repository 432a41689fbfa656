import KeyringCore

/// A JSON document as OpenBao sends it: a KV secret's data holds any JSON, so the
/// agent reads it into this rather than into fixed types.
///
/// Read and written here, byte for byte, rather than with Foundation's coders: an
/// object's member names become item names, which are bytes, and a `String`-keyed
/// dictionary takes two names that differ only in their Unicode normalization (the
/// composed and the decomposed `café`) for one, keeping one of the two values. Here they
/// are two members, as they are two keys in OpenBao, and become two items.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([JSONKey: JSONValue])

    /// The document in `bytes`, or nil if they are not one JSON value (trailing white space
    /// allowed), are not UTF-8, or nest deeper than 512 levels.
    public static func decode(_ bytes: [UInt8]) -> JSONValue? {
        bytes.withUnsafeBytes { buffer in
            var reader = JSONReader(bytes: buffer)
            guard let value = reader.value(depth: 0) else { return nil }
            reader.skipSpace()
            return reader.position == buffer.count ? value : nil
        }
    }

    /// Compact JSON, an object's members sorted by their names' bytes.
    public func encoded() -> [UInt8] {
        var output: [UInt8] = []
        append(to: &output)
        return output
    }

    private func append(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): output.append(contentsOf: String(value).utf8)
        case .number(let value): output.append(contentsOf: (value.isFinite ? "\(value)" : "null").utf8)
        case .string(let value):
            var text = value
            text.withUTF8 { _ = JSONString.append(UnsafeRawBufferPointer($0), to: &output) }
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                element.append(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                key.bytes.withUnsafeBytes { _ = JSONString.append($0, to: &output) }
                output.append(UInt8(ascii: ":"))
                members[key].unsafelyUnwrapped.append(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[JSONKey(key)] }
        return nil
    }

    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var object: [JSONKey: JSONValue]? { if case .object(let value) = self { value } else { nil } }
    public var array: [JSONValue]? { if case .array(let value) = self { value } else { nil } }
    public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    public var isNull: Bool { self == .null }

    /// A whole number, also from a string ("42"), as OpenBao sends some numbers.
    public var integer: Int64? {
        switch self {
        case .integer(let value): value
        case .number(let value) where value.rounded() == value && abs(value) < 9.0e18: Int64(value)
        case .string(let text): Int64(text)
        default: nil
        }
    }

    /// The longest time a kernel key's timeout can say (an unsigned 32-bit count of
    /// seconds): what any TTL or lease a server sends is held to.
    public static let longestSeconds = Int64(UInt32.max - 2)

    /// A duration in seconds (a TTL, a lease), held to 0 ... ``longestSeconds`` so that
    /// no answer, however odd, overflows the arithmetic done with it.
    public var seconds: Int64? {
        integer.map { min(max($0, 0), Self.longestSeconds) }
    }

    /// The bytes an item holds for this value: a string as its UTF-8 bytes, a list of
    /// strings (a certificate chain) one per line, anything else as compact JSON.
    public var itemBytes: [UInt8] {
        switch self {
        case .string(let text): Array(text.utf8)
        case .array(let elements) where elements.allSatisfy({ $0.string != nil }):
            Array(elements.compactMap(\.string).joined(separator: "\n").utf8)
        default: encoded()
        }
    }
}

/// An object member's name, as its UTF-8 bytes: equal, hashed and ordered by them, so
/// names that differ only in their Unicode normalization stay two names.
public struct JSONKey: Hashable, Comparable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(_ text: String) { bytes = Array(text.utf8) }
    public init(stringLiteral text: String) { self.init(text) }
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// The name as text (it is UTF-8: the reader takes nothing else).
    public var text: String { String(decoding: bytes, as: UTF8.self) }
    public var description: String { text }

    public static func < (lhs: JSONKey, rhs: JSONKey) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
}

extension Dictionary where Key == JSONKey {
    /// The member named `name` (its UTF-8 bytes).
    public subscript(name: String) -> Value? { self[JSONKey(name)] }
}

/// RFC 8259 JSON read from bytes.
private struct JSONReader {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func skipSpace() {
        while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
    }

    private mutating func consume(_ word: StaticString) -> Bool {
        let text = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard position + text.count <= bytes.count, bytes[position..<position + text.count].elementsEqual(text) else { return false }
        position += text.count
        return true
    }

    mutating func value(depth: Int) -> JSONValue? {
        guard depth < 512 else { return nil }
        skipSpace()
        guard position < bytes.count else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string().map { .string($0) }
        case UInt8(ascii: "t"): return consume("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return consume("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return consume("null") ? .null : nil
        default: return number()
        }
    }

    private mutating func object(depth: Int) -> JSONValue? {
        position += 1
        var members: [JSONKey: JSONValue] = [:]
        skipSpace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\""), let name = stringBytes() else { return nil }
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { return nil }
            position += 1
            guard let member = value(depth: depth + 1) else { return nil }
            members[JSONKey(bytes: name)] = member  // a name given twice: the later value, as OpenBao's Go reader keeps
            skipSpace()
            guard position < bytes.count else { return nil }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
            } else if bytes[position] == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            } else {
                return nil
            }
        }
    }

    private mutating func array(depth: Int) -> JSONValue? {
        position += 1
        var elements: [JSONValue] = []
        skipSpace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            guard let element = value(depth: depth + 1) else { return nil }
            elements.append(element)
            skipSpace()
            guard position < bytes.count else { return nil }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
            } else if bytes[position] == UInt8(ascii: "]") {
                position += 1
                return .array(elements)
            } else {
                return nil
            }
        }
    }

    private mutating func string() -> String? {
        stringBytes().map { String(decoding: $0, as: UTF8.self) }
    }

    /// A string's UTF-8 bytes, escapes decoded (the core's ``JSONString/read(_:at:into:)``);
    /// nil if malformed or not UTF-8.
    private mutating func stringBytes() -> [UInt8]? {
        var value: [UInt8] = []
        return JSONString.read(bytes, at: &position, into: &value) == nil ? value : nil
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`: an integer where it has no
    /// fraction or exponent and fits 64 bits, else a double.
    private mutating func number() -> JSONValue? {
        let start = position
        func digits() -> Int {
            let from = position
            while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") { position += 1 }
            return position - from
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
        let integerStart = position
        let integerDigits = digits()
        guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { return nil }
        var whole = true
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard digits() > 0 else { return nil }
            whole = false
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard digits() > 0 else { return nil }
            whole = false
        }
        let text = String(decoding: bytes[start..<position], as: UTF8.self)
        if whole, let value = Int64(text) { return .integer(value) }
        return Double(text).map { .number($0) }
    }
}
