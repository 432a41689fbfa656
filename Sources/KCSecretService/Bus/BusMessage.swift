import CSDBus
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads a message's arguments in order, each checked against what it must be. sd-bus
/// checks a message's types as it reads them; the caller checks the whole signature
/// first (``BusReader/expect(_:)``) so a wrong one is one clear error, not a half-read.
struct BusReader {
    let message: OpaquePointer

    var signature: String {
        sd_bus_message_get_signature(message, 1).map { String(cString: $0) } ?? ""
    }

    /// Refuses a call whose arguments are not `signature`.
    func expect(_ signature: String) throws(BusError) {
        let actual = self.signature
        guard actual == signature else {
            throw .invalidArguments("expected arguments of type '\(signature)', got '\(actual)'")
        }
    }

    private func check(_ result: Int32, _ what: String) throws(BusError) {
        guard result >= 0 else { throw .invalidArguments("cannot read \(what): \(String(cString: strerror(-result)))") }
    }

    private func text(_ type: Character) throws(BusError) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        try check(sd_bus_message_read_basic(message, CChar(type.asciiValue!), &pointer), "a string")
        guard let pointer else { throw .invalidArguments("missing string") }
        return String(cString: pointer)
    }

    func string() throws(BusError) -> String { try text("s") }
    func objectPath() throws(BusError) -> String { try text("o") }

    func bool() throws(BusError) -> Bool {
        var value: Int32 = 0
        try check(sd_bus_message_read_basic(message, CChar(UInt8(ascii: "b")), &value), "a boolean")
        return value != 0
    }

    func bytes() throws(BusError) -> [UInt8] {
        var pointer: UnsafeRawPointer? = nil
        var size = 0
        try check(sd_bus_message_read_array(message, CChar(UInt8(ascii: "y")), &pointer, &size), "a byte array")
        guard let pointer, size > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: size))
    }

    /// Enters a container; false at the end of the enclosing array.
    func enter(_ type: Character, _ contents: String) throws(BusError) -> Bool {
        let result = sd_bus_message_enter_container(message, CChar(type.asciiValue!), contents)
        try check(result, "a '\(type)\(contents)'")
        return result > 0
    }

    func exit() throws(BusError) {
        try check(sd_bus_message_exit_container(message), "the end of a container")
    }

    /// Skips one complete value.
    func skip() throws(BusError) {
        try check(sd_bus_message_skip(message, nil), "a value")
    }

    /// The type of the next value and, for a container, its contents' signature.
    func peek() -> (type: Character, contents: String)? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>? = nil
        guard sd_bus_message_peek_type(message, &type, &contents) > 0 else { return nil }
        return (Character(Unicode.Scalar(UInt8(bitPattern: type))), contents.map { String(cString: $0) } ?? "")
    }

    /// `a{ss}`, in the order sent; a name sent twice keeps its last value.
    func stringDictionary() throws(BusError) -> [String: String] {
        var result: [String: String] = [:]
        guard try enter("a", "{ss}") else { return result }
        while try enter("e", "ss") {
            let key = try string()
            result[key] = try string()
            try exit()
        }
        try exit()
        return result
    }

    /// `ao`.
    func objectPaths() throws(BusError) -> [String] {
        var result: [String] = []
        guard try enter("a", "o") else { return result }
        while peek() != nil { result.append(try objectPath()) }
        try exit()
        return result
    }

    /// `(oayays)`.
    func secret() throws(BusError) -> WireSecret {
        guard try enter("r", "oayays") else { throw .invalidArguments("missing secret") }
        let secret = WireSecret(session: try objectPath(), parameters: try bytes(), value: try bytes(), contentType: try string())
        try exit()
        return secret
    }

    /// A variant holding `s`, `a{ss}` or `b`; anything else is refused, naming `what`.
    func variant(for what: String) throws(BusError) -> PropertyValue {
        guard let (type, contents) = peek(), type == "v" else { throw .invalidArguments("\(what) must be a variant") }
        let value: PropertyValue
        switch contents {
        case "s":
            _ = try enter("v", "s")
            value = .string(try string())
        case "a{ss}":
            _ = try enter("v", "a{ss}")
            value = .attributes(try stringDictionary())
        case "b":
            _ = try enter("v", "b")
            value = .bool(try bool())
        default:
            try skip()
            return .other(contents)
        }
        try exit()
        return value
    }

    /// `a{sv}`: the properties of a new collection or item.
    func properties() throws(BusError) -> [String: PropertyValue] {
        var result: [String: PropertyValue] = [:]
        guard try enter("a", "{sv}") else { return result }
        while try enter("e", "sv") {
            let key = try string()
            result[key] = try variant(for: key)
            try exit()
        }
        try exit()
        return result
    }
}

/// A secret as it crosses the bus: the session it is encrypted for, the cipher's
/// parameters (the IV), the value, and its content type.
struct WireSecret {
    var session: String
    var parameters: [UInt8]
    var value: [UInt8]
    var contentType: String
}

/// A property value kc-secretd reads or writes.
enum PropertyValue: Equatable {
    case string(String)
    case attributes([String: String])
    case bool(Bool)
    case uint64(UInt64)
    case objectPaths([String])
    /// A type kc-secretd does not use (its signature): ignored where it may be, refused where it matters.
    case other(String)
}

/// Writes a reply's or signal's arguments. Every append's failure (out of memory, a
/// string that is not UTF-8) is collected and reported once by ``finish()``.
struct BusWriter {
    let message: OpaquePointer
    private(set) var failure: Int32 = 0

    init(_ message: OpaquePointer) { self.message = message }

    private mutating func note(_ result: Int32) {
        if result < 0, failure == 0 { failure = result }
    }

    mutating func string(_ value: String) {
        note(value.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) })
    }

    mutating func objectPath(_ value: String) {
        note(value.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "o")), $0) })
    }

    mutating func bool(_ value: Bool) {
        var raw: Int32 = value ? 1 : 0
        note(sd_bus_message_append_basic(message, CChar(UInt8(ascii: "b")), &raw))
    }

    mutating func uint64(_ value: UInt64) {
        var raw = value
        note(sd_bus_message_append_basic(message, CChar(UInt8(ascii: "t")), &raw))
    }

    mutating func bytes(_ value: [UInt8]) {
        note(value.withUnsafeBytes { sd_bus_message_append_array(message, CChar(UInt8(ascii: "y")), $0.baseAddress, $0.count) })
    }

    mutating func open(_ type: Character, _ contents: String) {
        note(sd_bus_message_open_container(message, CChar(type.asciiValue!), contents))
    }

    mutating func close() {
        note(sd_bus_message_close_container(message))
    }

    mutating func objectPaths(_ paths: [String]) {
        open("a", "o")
        for path in paths { objectPath(path) }
        close()
    }

    mutating func stringDictionary(_ dictionary: [String: String]) {
        open("a", "{ss}")
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            open("e", "ss")
            string(key)
            string(value)
            close()
        }
        close()
    }

    mutating func secret(_ secret: WireSecret) {
        open("r", "oayays")
        objectPath(secret.session)
        bytes(secret.parameters)
        bytes(secret.value)
        string(secret.contentType)
        close()
    }

    mutating func variant(_ value: PropertyValue) {
        switch value {
        case .string(let text): open("v", "s"); string(text); close()
        case .attributes(let attributes): open("v", "a{ss}"); stringDictionary(attributes); close()
        case .bool(let flag): open("v", "b"); bool(flag); close()
        case .uint64(let number): open("v", "t"); uint64(number); close()
        case .objectPaths(let paths): open("v", "ao"); objectPaths(paths); close()
        case .other: open("v", "s"); string(""); close()
        }
    }

    /// `a{sv}` of named properties.
    mutating func properties(_ properties: [(String, PropertyValue)]) {
        open("a", "{sv}")
        for (name, value) in properties {
            open("e", "sv")
            string(name)
            variant(value)
            close()
        }
        close()
    }
}
