/// Base64 as age writes it: the standard alphabet of RFC 4648 §4, without `=`
/// padding, and canonical (RFC 4648 §3.5: the unused low bits of the last
/// character are zero). Decoding refuses anything else, so that every byte string
/// has exactly one encoding and a header cannot be changed without changing its MAC.
enum CanonicalBase64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The 6-bit value of each ASCII byte, or `invalid`.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()
    private static let invalid: UInt8 = 0xFF

    /// How many characters `byteCount` bytes encode to.
    static func encodedLength(ofByteCount byteCount: Int) -> Int {
        (byteCount * 8 + 5) / 6
    }

    /// The unpadded encoding of `bytes`, as ASCII.
    static func encode(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var text = [UInt8]()
        text.reserveCapacity(encodedLength(ofByteCount: bytes.count))
        var index = bytes.startIndex
        while bytes.endIndex - index >= 3 {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
            text.append(alphabet[Int(group >> 6 & 63)])
            text.append(alphabet[Int(group & 63)])
            index += 3
        }
        switch bytes.endIndex - index {
        case 1:
            let group = UInt32(bytes[index]) << 16
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
        case 2:
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
            text.append(alphabet[Int(group >> 6 & 63)])
        default:
            break
        }
        return text
    }

    /// The unpadded encoding of `bytes`, as ASCII.
    static func encode(_ bytes: [UInt8]) -> [UInt8] {
        encode(bytes[...])
    }

    /// The bytes `text` encodes, or nil if it is not canonical unpadded base64: a
    /// character outside the alphabet (`=`, CR and LF included), a length that no
    /// byte count encodes to, or non-zero unused bits in the last character.
    static func decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        let remainder = text.count % 4
        if remainder == 1 { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.count / 4 * 3 + max(remainder - 1, 0))
        var index = text.startIndex
        let fullGroupsEnd = text.endIndex - remainder
        while index < fullGroupsEnd {
            guard let group = sextets(text, from: index, count: 4) else { return nil }
            bytes.append(UInt8(truncatingIfNeeded: group >> 16))
            bytes.append(UInt8(truncatingIfNeeded: group >> 8))
            bytes.append(UInt8(truncatingIfNeeded: group))
            index += 4
        }
        switch remainder {
        case 2:
            // 12 bits carry one byte; the low 4 must be zero.
            guard let group = sextets(text, from: index, count: 2), group & 0x0F == 0 else { return nil }
            bytes.append(UInt8(truncatingIfNeeded: group >> 4))
        case 3:
            // 18 bits carry two bytes; the low 2 must be zero.
            guard let group = sextets(text, from: index, count: 3), group & 0x03 == 0 else { return nil }
            bytes.append(UInt8(truncatingIfNeeded: group >> 10))
            bytes.append(UInt8(truncatingIfNeeded: group >> 2))
        default:
            break
        }
        return bytes
    }

    /// `count` characters from `start` as one big-endian number of 6-bit digits.
    private static func sextets(_ text: ArraySlice<UInt8>, from start: Int, count: Int) -> UInt32? {
        var group: UInt32 = 0
        for index in start..<(start + count) {
            let value = values[Int(text[index])]
            if value == invalid { return nil }
            group = group << 6 | UInt32(value)
        }
        return group
    }
}
