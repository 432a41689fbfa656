import CKeyutils

/// What a service or item name may be (DESIGN §3), and how a name is shown to people.
public enum NameRules {
    /// The longest name: a key description holds at most 4095 bytes, and a name is also
    /// a file name in the mount and the vault.
    public static let maximumLength = 255

    /// 1–255 bytes, no `/` and no NUL, not `.` or `..`.
    public static func isValid(_ name: UnsafeRawBufferPointer) -> Bool {
        guard name.count >= 1 && name.count <= maximumLength else { return false }
        for byte in name where byte == UInt8(ascii: "/") || byte == 0 { return false }
        return !isDots(name)
    }

    /// ``isValid(_:)-(UnsafeRawBufferPointer)`` of the bytes of a C string (a word of argv,
    /// which cannot hold a NUL).
    public static func isValid(_ name: UnsafePointer<CChar>) -> Bool {
        isValid(UnsafeRawBufferPointer(start: name, count: strnlen(name, maximumLength + 1)))
    }

    /// ``isValid(_:)-(UnsafeRawBufferPointer)`` of an array of bytes.
    public static func isValid(_ name: [UInt8]) -> Bool {
        name.withUnsafeBytes { isValid($0) }
    }

    /// Whether the name is `.` or `..`.
    public static func isDots(_ name: UnsafeRawBufferPointer) -> Bool {
        (name.count == 1 || name.count == 2) && name.allSatisfy { $0 == UInt8(ascii: ".") }
    }

    /// Appends `name` as kc shows a name in a message: each well-formed UTF-8 sequence as
    /// it is (ASCII controls included), each other byte as `\xhh`. Unambiguous only for
    /// names that are UTF-8; for messages, never for storage.
    public static func appendShown(_ name: UnsafeRawBufferPointer, to shown: inout [UInt8]) {
        var index = 0
        while index < name.count {
            let length = wellFormedUTF8Length(name, at: index)
            if length > 0 {
                shown.append(contentsOf: name[index..<index + length])
                index += length
            } else {
                let hex = staticBytes("0123456789abcdef")
                let byte = name[index]
                shown.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 0xf)]])
                index += 1
            }
        }
    }

    /// Whether the bytes are well-formed UTF-8 throughout.
    public static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < bytes.count {
            let length = wellFormedUTF8Length(bytes, at: index)
            guard length > 0 else { return false }
            index += length
        }
        return true
    }

    /// The length of the well-formed UTF-8 sequence at `index` (Unicode's table 3-7: no
    /// overlong forms, no surrogates, nothing past U+10FFFF), or 0.
    public static func wellFormedUTF8Length(_ bytes: UnsafeRawBufferPointer, at index: Int) -> Int {
        let lead = bytes[index]
        let length: Int
        var second: ClosedRange<UInt8> = 0x80...0xbf
        switch lead {
        case 0x00...0x7f: return 1
        case 0xc2...0xdf: length = 2
        case 0xe0: length = 3; second = 0xa0...0xbf
        case 0xed: length = 3; second = 0x80...0x9f
        case 0xe1...0xef: length = 3
        case 0xf0: length = 4; second = 0x90...0xbf
        case 0xf4: length = 4; second = 0x80...0x8f
        case 0xf1...0xf3: length = 4
        default: return 0
        }
        guard index + length <= bytes.count, second.contains(bytes[index + 1]) else { return 0 }
        for next in index + 2..<index + length where !(0x80...0xbf).contains(bytes[next]) { return 0 }
        return length
    }
}
