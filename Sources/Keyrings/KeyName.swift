/// A key's description as the kernel keeps and compares it: bytes, not necessarily
/// UTF-8. kc's service and item names are key descriptions, so they are bytes too:
/// `a\xffb` and `a\xfeb` are two names, and the NFC and NFD spellings of `café` are
/// two names although Swift's `==` calls the strings equal.
public struct KeyName: Hashable, Sendable, Comparable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The bytes, without a terminating NUL.
    public let bytes: [UInt8]

    /// The UTF-8 bytes of `text`.
    public init(_ text: String) {
        bytes = Array(text.utf8)
    }

    public init(stringLiteral text: String) {
        self.init(text)
    }

    public init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    public init(bytes: some Sequence<UInt8>) {
        self.bytes = Array(bytes)
    }

    /// The bytes of a C string, up to its NUL (an argv entry, a name from the kernel).
    public init(cString: UnsafePointer<CChar>) {
        var count = 0
        while cString[count] != 0 { count += 1 }
        bytes = UnsafeRawBufferPointer(start: cString, count: count).map { $0 }
    }

    /// The name as text if it is valid UTF-8, else nil.
    public var text: String? {
        String(validating: bytes, as: UTF8.self)
    }

    /// The name as text for people: valid UTF-8 as it is, each byte that is not part
    /// of valid UTF-8 as `\xHH`. Unambiguous only for names that are valid UTF-8; for
    /// messages, never for storage.
    public var description: String {
        if let text { return text }
        var result = ""
        var index = 0
        while index < bytes.count {
            let length = Self.validSequenceLength(bytes, at: index)
            if length > 0 {
                result += String(decoding: bytes[index..<index + length], as: UTF8.self)
                index += length
            } else {
                let hex = String(bytes[index], radix: 16, uppercase: false)
                result += "\\x" + (hex.count == 1 ? "0" + hex : hex)
                index += 1
            }
        }
        return result
    }

    /// Byte order, as the kernel compares descriptions (and `ls` sorts in the C locale).
    public static func < (lhs: KeyName, rhs: KeyName) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    /// Calls `body` with the name as a NUL-terminated C string, for the kernel.
    public func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: bytes.count + 1) { buffer in
            for (offset, byte) in bytes.enumerated() { buffer[offset] = CChar(bitPattern: byte) }
            buffer[bytes.count] = 0
            // A temporary allocation is never empty here (capacity >= 1).
            return body(UnsafePointer(buffer.baseAddress.unsafelyUnwrapped))
        }
    }

    /// The length of the well-formed UTF-8 sequence starting at `index`, or 0 if the
    /// byte there does not start one.
    private static func validSequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let lead = bytes[index]
        let length: Int
        switch lead {
        case 0x00...0x7f: return 1
        case 0xc2...0xdf: length = 2
        case 0xe0...0xef: length = 3
        case 0xf0...0xf4: length = 4
        default: return 0
        }
        guard index + length <= bytes.count else { return 0 }
        return String(validating: bytes[index..<index + length], as: UTF8.self) == nil ? 0 : length
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
    /// The name followed by `other`'s bytes.
    public static func + (lhs: KeyName, rhs: KeyName) -> KeyName {
        KeyName(bytes: lhs.bytes + rhs.bytes)
    }

    /// Whether the name begins with `prefix`'s bytes.
    public func hasPrefix(_ prefix: KeyName) -> Bool {
        bytes.starts(with: prefix.bytes)
    }

    /// The name without its first `count` bytes.
    public func dropFirst(_ count: Int) -> KeyName {
        KeyName(bytes: bytes.dropFirst(count))
    }
}
