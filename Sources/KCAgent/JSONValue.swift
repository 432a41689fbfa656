import FoundationEssentials

/// A JSON document as OpenBao sends it: a KV secret's data holds any JSON, so the
/// agent decodes into this rather than into fixed types.
public enum JSONValue: Sendable, Equatable, Codable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .integer(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    public static func decode(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? Array(encoder.encode(self))) ?? Array("null".utf8)
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var object: [String: JSONValue]? { if case .object(let value) = self { value } else { nil } }
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
