import KeyringCore

/// A key's description as the kernel keeps and compares it: bytes, not necessarily
/// UTF-8. kc's service and item names are key descriptions, so they are bytes too:
/// `a\xffb` and `a\xfeb` are two names, and the NFC and NFD spellings of `café` are
/// two names although Swift's `==` calls the strings equal.
public struct KeyName: Hashable, Sendable, Comparable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// Text when the bytes are valid UTF-8 (every name kc makes, and the names on
    /// `kc get`'s path, which then costs no array), else the bytes. Every initializer
    /// keeps this rule, so equal bytes always have the same storage.
    private enum Storage: Sendable {
        case text(String)
        case bytes([UInt8])
    }

    private let storage: Storage

    /// The UTF-8 bytes of `text`.
    public init(_ text: String) {
        storage = .text(text)
    }

    public init(stringLiteral text: String) {
        self.init(text)
    }

    public init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    public init(bytes: some Sequence<UInt8>) {
        let array = Array(bytes)
        if let text = String(validating: array, as: UTF8.self) { storage = .text(text) } else { storage = .bytes(array) }
    }

    /// The bytes of a C string, up to its NUL (an argv entry, a name from the kernel).
    public init(cString: UnsafePointer<CChar>) {
        if let text = String(validatingCString: cString) {
            storage = .text(text)
        } else {
            var count = 0
            while cString[count] != 0 { count += 1 }
            storage = .bytes(Array(UnsafeRawBufferPointer(start: cString, count: count)))
        }
    }

    /// The bytes, without a terminating NUL.
    public var bytes: [UInt8] {
        switch storage {
        case .text(let text): Array(text.utf8)
        case .bytes(let bytes): bytes
        }
    }

    /// The number of bytes.
    public var byteCount: Int {
        switch storage {
        case .text(let text): text.utf8.count
        case .bytes(let bytes): bytes.count
        }
    }

    /// Whether `byte` occurs in the name.
    public func contains(byte: UInt8) -> Bool {
        switch storage {
        case .text(let text):
            // Over the contiguous bytes: the UTF-8 view's iterator costs tens of
            // instructions a byte, and every read validates its item's name.
            text.utf8.withContiguousStorageIfAvailable { $0.contains(byte) } ?? text.utf8.contains(byte)
        case .bytes(let bytes): bytes.contains(byte)
        }
    }

    /// The name as text if it is valid UTF-8, else nil.
    public var text: String? {
        if case .text(let text) = storage { return text }
        return nil
    }

    /// The name as text for people: valid UTF-8 as it is, each byte that is not part
    /// of valid UTF-8 as `\xHH`. Unambiguous only for names that are valid UTF-8; for
    /// messages, never for storage.
    public var description: String {
        switch storage {
        case .text(let text): return text
        case .bytes(let bytes): return Self.escaping(bytes)
        }
    }

    public static func == (lhs: KeyName, rhs: KeyName) -> Bool {
        switch (lhs.storage, rhs.storage) {
        // Byte for byte: String's == would call NFC and NFD spellings equal.
        case (.text(let left), .text(let right)): left.utf8.elementsEqual(right.utf8)
        case (.bytes(let left), .bytes(let right)): left == right
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        // The bytes in one call where they are contiguous (the mount hashes a node per
        // lookup): a combine per byte costs tens of instructions a byte.
        switch storage {
        case .text(let text):
            let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            if hashed == nil { for byte in text.utf8 { hasher.combine(byte) } }
        case .bytes(let bytes): bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
        hasher.combine(byteCount)
    }

    /// Byte order, as the kernel compares descriptions (and `ls` sorts in the C locale).
    public static func < (lhs: KeyName, rhs: KeyName) -> Bool {
        switch (lhs.storage, rhs.storage) {
        case (.text(let left), .text(let right)): left.utf8.lexicographicallyPrecedes(right.utf8)
        default: lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
        }
    }

    /// Calls `body` with the name as a NUL-terminated C string, for the kernel.
    public func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        switch storage {
        case .text(let text):
            return text.withCString(body)
        case .bytes(let bytes):
            return withUnsafeTemporaryAllocation(of: CChar.self, capacity: bytes.count + 1) { buffer in
                for (offset, byte) in bytes.enumerated() { buffer[offset] = CChar(bitPattern: byte) }
                buffer[bytes.count] = 0
                // A temporary allocation is never empty here (capacity >= 1).
                return body(UnsafePointer(buffer.baseAddress.unsafelyUnwrapped))
            }
        }
    }

    /// The bytes as the core shows a name (``NameRules/appendShown(_:to:)``, which the
    /// front's messages use too).
    private static func escaping(_ bytes: [UInt8]) -> String {
        var shown: [UInt8] = []
        bytes.withUnsafeBytes { NameRules.appendShown($0, to: &shown) }
        return String(decoding: shown, as: UTF8.self)
    }
}

/// What can name a key: `String` (its UTF-8 bytes) and ``KeyName`` (any bytes). Public
/// APIs take `some KeyNameConvertible`, so text and literals work as they always did,
/// and a name that is not UTF-8 is passed as a ``KeyName``.
public protocol KeyNameConvertible {
    var keyName: KeyName { get }
}

extension String: KeyNameConvertible {
    public var keyName: KeyName { KeyName(self) }
}

extension Substring: KeyNameConvertible {
    public var keyName: KeyName { KeyName(bytes: utf8) }
}

extension KeyName: KeyNameConvertible {
    public var keyName: KeyName { self }
}

extension KeyName {
    /// Whether the name's bytes are `text`'s UTF-8 bytes, so that code naming items with
    /// `String`s compares them with the names it is given (`item.service == service`).
    /// Byte for byte, as every name comparison: the NFC and NFD spellings of `café` are
    /// equal `String`s but two names, and a name that is not UTF-8 equals no `String`.
    public static func == (name: KeyName, text: String) -> Bool {
        guard let own = name.text else { return false }
        return own.utf8.elementsEqual(text.utf8)
    }

    /// ``==(_:_:)-(KeyName,String)`` with the text first.
    public static func == (text: String, name: KeyName) -> Bool { name == text }

    /// Whether the name's bytes are not `text`'s UTF-8 bytes.
    public static func != (name: KeyName, text: String) -> Bool { !(name == text) }

    /// ``!=(_:_:)-(KeyName,String)`` with the text first.
    public static func != (text: String, name: KeyName) -> Bool { !(name == text) }
}

extension Array where Element == KeyName {
    /// Whether the names are, in order, `texts`' UTF-8 bytes, so that a list of names
    /// compares with a list of `String`s as it did when names were `String`s
    /// (`try keychain.allKeyNames() == expected`, `items().map(\.name) == names`).
    public static func == (names: [KeyName], texts: [String]) -> Bool {
        names.count == texts.count && zip(names, texts).allSatisfy { $0 == $1 }
    }

    /// ``==(_:_:)-([KeyName],[String])`` with the texts first.
    public static func == (texts: [String], names: [KeyName]) -> Bool { names == texts }

    public static func != (names: [KeyName], texts: [String]) -> Bool { !(names == texts) }

    public static func != (texts: [String], names: [KeyName]) -> Bool { !(names == texts) }
}

extension Sequence where Element == KeyName {
    /// Whether one of the names is `text`'s UTF-8 bytes (see ``KeyName/==(_:_:)-(KeyName,String)``),
    /// so that `Keychain.services().contains(service)` reads as it did when names were `String`s.
    public func contains(_ text: String) -> Bool {
        contains { $0 == text }
    }
}

extension KeyName {
    /// The name followed by `other`'s bytes.
    public static func + (lhs: KeyName, rhs: KeyName) -> KeyName {
        if let left = lhs.text, let right = rhs.text { return KeyName(left + right) }
        return KeyName(bytes: lhs.bytes + rhs.bytes)
    }

    /// Whether the name begins with `prefix`'s bytes.
    public func hasPrefix(_ prefix: KeyName) -> Bool {
        if let text, let start = prefix.text { return text.utf8.starts(with: start.utf8) }
        return bytes.starts(with: prefix.bytes)
    }

    /// The name without its first `count` bytes.
    public func dropFirst(_ count: Int) -> KeyName {
        KeyName(bytes: bytes.dropFirst(count))
    }
}
