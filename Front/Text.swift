import CFront

/// Bytes built up for a kernel call, a path or a line of output: names are bytes,
/// not necessarily UTF-8, so the front never makes a String of them.
struct CText {
    private(set) var bytes: [UInt8] = []

    mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func append(_ text: UnsafePointer<CChar>) {
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: text, count: strlen(text)))
    }

    /// Appends `value` in decimal digits.
    mutating func append(decimal value: UInt64) {
        var digits: [UInt8] = []
        var rest = value
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        bytes.append(contentsOf: digits.reversed())
    }

    mutating func append(_ other: [UInt8]) {
        bytes.append(contentsOf: other)
    }

    /// Appends `name` as the full kc shows a name in a message (`KeyName.description`):
    /// each well-formed UTF-8 sequence as it is (ASCII controls included), each other
    /// byte as `\xhh`.
    mutating func appendShown(_ name: UnsafePointer<CChar>) {
        let name = UnsafeRawBufferPointer(start: name, count: strlen(name))
        var index = 0
        while index < name.count {
            let length = Self.wellFormedLength(name, at: index)
            if length > 0 {
                bytes.append(contentsOf: name[index..<index + length])
                index += length
            } else {
                let hex: StaticString = "0123456789abcdef"
                let byte = name[index]
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "x"),
                                          hex.utf8Start[Int(byte >> 4)], hex.utf8Start[Int(byte & 0xf)]])
                index += 1
            }
        }
    }

    /// The length of the well-formed UTF-8 sequence at `index` (Unicode's table 3-7: no
    /// overlong forms, no surrogates, nothing past U+10FFFF), or 0.
    static func wellFormedLength(_ bytes: UnsafeRawBufferPointer, at index: Int) -> Int {
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

    /// Calls `body` with the bytes and a NUL after them.
    func withCString<Result>(_ body: (UnsafePointer<CChar>) -> Result) -> Result {
        var terminated = bytes
        terminated.append(0)
        // Never empty (it holds the NUL), so it has a base address.
        return terminated.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }
}
