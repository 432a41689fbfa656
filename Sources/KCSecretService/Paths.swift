import Keyrings
/// The object paths of the Secret Service, and which object a path names.
enum SecretPath {
    static let service = "/org/freedesktop/secrets"
    static let collectionPrefix = service + "/collection/"
    static let aliasPrefix = service + "/aliases/"
    static let sessionPrefix = service + "/session/"
    static let promptPrefix = service + "/prompt/"
    static let none = "/"
    private static let collectionFolder = service + "/collection"
    private static let aliasesFolder = service + "/aliases"

    static func collection(_ name: String) -> String { collectionPrefix + name }

    static func item(_ id: ItemID, in collection: String) -> String {
        self.collection(collection) + "/" + encode(id.service.bytes) + "__" + encode(id.name.bytes)
    }

    /// A name as an object path element: letters and digits as they are, every other
    /// byte `_` and two lower-case hex digits (`_2e` for `.`). An `_` is always followed
    /// by a hex digit, so `__` never occurs inside one and separates service from item.
    static func encode(_ bytes: [UInt8]) -> String {
        // Bytes first, one String at the end: every SearchItems answer encodes its items.
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "_"))
                out.append(hexDigit(byte >> 4))
                out.append(hexDigit(byte & 0xF))
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    static func decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = text.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "_") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return bytes.isEmpty ? nil : bytes
    }

    /// Where the first `__` begins.
    private static func separatorIndex(_ text: ArraySlice<UInt8>) -> Int? {
        var previous: Int? = nil
        for index in text.indices {
            if text[index] == UInt8(ascii: "_") {
                if let previous { return previous }
                previous = index
            } else {
                previous = nil
            }
        }
        return nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// What a path names, before checking that it exists.
    enum Target: Equatable {
        case service
        /// A collection by its name, or by an alias (`/aliases/default`).
        case collection(name: String, alias: Bool)
        case item(collection: String, alias: Bool, ItemID)
        case session(String)
        case prompt(String)
        /// `/org/freedesktop/secrets/collection` or `…/aliases`: only introspected, for
        /// tools that walk the tree (`busctl tree`).
        case folder(String)
    }

    static func parse(_ path: String) -> Target? {
        if path == service { return .service }
        if path == collectionFolder { return .folder("collection") }
        if path == aliasesFolder { return .folder("aliases") }
        // Over the path's bytes, by offset, not as Characters: an object path is ASCII,
        // and every call is routed here.
        let bytes = Array(path.utf8)
        for (prefix, alias) in [(collectionPrefix, false), (aliasPrefix, true)] where bytes.starts(with: prefix.utf8) {
            let rest = bytes[prefix.utf8.count...].split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            guard let name = rest.first, !name.isEmpty else { return nil }
            let collection = String(decoding: name, as: UTF8.self)
            if rest.count == 1 { return .collection(name: collection, alias: alias) }
            guard rest.count == 2, let separator = separatorIndex(rest[1]),
                  let service = decode(rest[1][..<separator]), let item = decode(rest[1][(separator + 2)...]) else { return nil }
            return .item(collection: collection, alias: alias, ItemID(service: KeyName(bytes: service), name: KeyName(bytes: item)))
        }
        if bytes.count > sessionPrefix.utf8.count, bytes.starts(with: sessionPrefix.utf8) { return .session(path) }
        if bytes.count > promptPrefix.utf8.count, bytes.starts(with: promptPrefix.utf8) { return .prompt(path) }
        return nil
    }
}
