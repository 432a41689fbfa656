/// A JSON string written from bytes, as both programs write one (the docker credential
/// helper's answer; the full kc's `StrictJSON`).
public enum JSONString {
    /// Appends `bytes` as a JSON string: `"`, `\`, line feed, carriage return and tab
    /// escaped by name, other controls and DEL as `\u00XX`, the rest as they are. False,
    /// appending nothing, if the bytes are not UTF-8.
    @discardableResult
    public static func append(_ bytes: UnsafeRawBufferPointer, to output: inout [UInt8]) -> Bool {
        guard NameRules.isUTF8(bytes) else { return false }
        let hex = staticBytes("0123456789abcdef")
        let backslash = UInt8(ascii: "\\")
        output.append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [backslash, UInt8(ascii: "\"")])
            case backslash: output.append(contentsOf: [backslash, backslash])
            case UInt8(ascii: "\n"): output.append(contentsOf: [backslash, UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): output.append(contentsOf: [backslash, UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): output.append(contentsOf: [backslash, UInt8(ascii: "t")])
            case 0..<0x20, 0x7F:
                output.append(contentsOf: [backslash, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                           hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
        return true
    }
}

extension JSONString {
    /// Why a JSON string cannot be read.
    public enum ReadError: Error, Equatable {
        case unterminated, notUTF8, unescapedControl, loneSurrogate, invalidUnicodeEscape, invalidEscape
    }

    /// Reads the JSON string whose opening quote is at `position` (RFC 8259: escapes
    /// resolved, a surrogate pair joined, control characters refused, the result UTF-8),
    /// appending its bytes to `value` and leaving `position` after the closing quote.
    /// The agent's reader and the credential helpers' strict one read strings with it.
    public static func read(_ input: UnsafeRawBufferPointer, at position: inout Int, into value: inout [UInt8]) -> ReadError? {
        position += 1
        let start = value.count
        while position < input.count {
            let byte = input[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return value[start...].withUnsafeBytes { NameRules.isUTF8($0) } ? nil : .notUTF8
            case 0..<0x20:
                return .unescapedControl
            case UInt8(ascii: "\\"):
                guard position < input.count else { return .unterminated }
                let escaped = input[position]
                position += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): value.append(escaped)
                case UInt8(ascii: "b"): value.append(0x08)
                case UInt8(ascii: "f"): value.append(0x0C)
                case UInt8(ascii: "n"): value.append(0x0A)
                case UInt8(ascii: "r"): value.append(0x0D)
                case UInt8(ascii: "t"): value.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hexQuad(input, at: &position) else { return .invalidUnicodeEscape }
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard position + 1 < input.count, input[position] == UInt8(ascii: "\\"), input[position + 1] == UInt8(ascii: "u")
                        else { return .loneSurrogate }
                        position += 2
                        guard let low = hexQuad(input, at: &position) else { return .invalidUnicodeEscape }
                        guard low >= 0xDC00 && low < 0xE000 else { return .loneSurrogate }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar < 0xE000 {
                        return .loneSurrogate
                    }
                    appendUTF8(scalar, to: &value)
                default:
                    return .invalidEscape
                }
            default:
                value.append(byte)
            }
        }
        return .unterminated
    }

    /// Four hex digits, either case.
    private static func hexQuad(_ input: UnsafeRawBufferPointer, at position: inout Int) -> UInt32? {
        guard input.count - position >= 4 else { return nil }
        var scalar: UInt32 = 0
        for offset in 0..<4 {
            guard let digit = hexDigit(input[position + offset]) else { return nil }
            scalar = scalar << 4 | UInt32(digit)
        }
        position += 4
        return scalar
    }

    /// A scalar (not a surrogate, at most U+10FFFF) as UTF-8.
    private static func appendUTF8(_ scalar: UInt32, to value: inout [UInt8]) {
        switch scalar {
        case 0..<0x80:
            value.append(UInt8(scalar))
        case 0x80..<0x800:
            value.append(contentsOf: [UInt8(0xC0 | scalar >> 6), UInt8(0x80 | scalar & 0x3F)])
        case 0x800..<0x10000:
            value.append(contentsOf: [UInt8(0xE0 | scalar >> 12), UInt8(0x80 | (scalar >> 6) & 0x3F), UInt8(0x80 | scalar & 0x3F)])
        default:
            value.append(contentsOf: [UInt8(0xF0 | scalar >> 18), UInt8(0x80 | (scalar >> 12) & 0x3F),
                                      UInt8(0x80 | (scalar >> 6) & 0x3F), UInt8(0x80 | scalar & 0x3F)])
        }
    }
}

/// How `docker-credential-kc` names a registry's service: `docker:` and the server URL
/// encoded (``CredentialNameCodec``). Both programs' rule.
public enum DockerCredentialNames {
    public static let servicePrefix: StaticString = "docker:"

    /// The service of `server`, or nil if the name would be too long or hold a NUL.
    public static func service(server: some Sequence<UInt8>) -> [UInt8]? {
        var name: [UInt8] = Array(staticBytes(servicePrefix))
        CredentialNameCodec.appendEncoded(server, to: &name)
        return name.count <= NameRules.maximumLength && !name.contains(0) ? name : nil
    }

    /// Where the server URL a client sent is in `input`: without the white space around
    /// it (the reference helpers trim it on `get` and `erase`); nil if there is none.
    public static func serverRange(in input: UnsafeRawBufferPointer) -> Range<Int>? {
        let isSpace = { (byte: UInt8) in byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) }
        guard let first = input.firstIndex(where: { !isSpace($0) }), let last = input.lastIndex(where: { !isSpace($0) })
        else { return nil }
        return first..<(last + 1)
    }
}
