/// Bech32 (BIP 173, the original checksum constant 1, not Bech32m) as age uses it
/// for keys: `age1…` recipients and `AGE-SECRET-KEY-1…` identities. Unlike BIP 173
/// there is no 90-character limit. A string is all lower case or all upper case;
/// the checksum is computed over its lower-case form.
///
/// Works on ASCII bytes rather than `String`, so that callers holding a secret key
/// can zero every intermediate buffer.
enum Bech32 {
    private static let alphabet: [UInt8] = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let invalid: UInt8 = 0xFF
    /// The 5-bit value of each lower-case ASCII byte, or `invalid`.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()
    private static let separator = UInt8(ascii: "1")
    private static let checksumLength = 6

    /// The lower-case Bech32 string for `data` under `humanReadablePart` (which must
    /// be lower-case printable ASCII). The caller zeroes the result if `data` is secret.
    static func encode(humanReadablePart: [UInt8], data: [UInt8]) -> [UInt8] {
        var groups = regroup(data, from: 8, to: 5, padding: true) ?? []
        defer { groups.zeroize() }
        let checksum = self.checksum(humanReadablePart: humanReadablePart, groups: groups)
        var text = [UInt8]()
        text.reserveCapacity(humanReadablePart.count + 1 + groups.count + checksumLength)
        text.append(contentsOf: humanReadablePart)
        text.append(separator)
        for group in groups { text.append(alphabet[Int(group)]) }
        for group in checksum { text.append(alphabet[Int(group)]) }
        return text
    }

    /// Splits `text` into its human-readable part, in the case it was written in,
    /// and the data it carries, after checking case, alphabet and checksum. The
    /// caller zeroes `data` if it is secret.
    static func decode(_ text: ArraySlice<UInt8>) throws(AgeError) -> (humanReadablePart: [UInt8], data: [UInt8]) {
        var hasLower = false
        var hasUpper = false
        for character in text {
            guard (33...126).contains(character) else {
                throw .invalidKey("a character outside printable ASCII")
            }
            if (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(character) { hasLower = true }
            if (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(character) { hasUpper = true }
        }
        if hasLower && hasUpper { throw .invalidKey("mixed upper and lower case") }
        guard let separatorIndex = text.lastIndex(of: separator),
              separatorIndex > text.startIndex,
              text.endIndex - separatorIndex - 1 >= checksumLength
        else {
            throw .invalidKey("no Bech32 '1' separator followed by a checksum")
        }
        let humanReadablePart = Array(text[..<separatorIndex])
        var groups = [UInt8]()
        groups.reserveCapacity(text.endIndex - separatorIndex - 1)
        defer { groups.zeroize() }
        for character in text[(separatorIndex + 1)...] {
            let value = values[Int(lowercased(character))]
            guard value != invalid else { throw .invalidKey("a character outside the Bech32 alphabet") }
            groups.append(value)
        }
        let lowerHumanReadablePart = humanReadablePart.map(lowercased)
        guard polymod(humanReadablePart: lowerHumanReadablePart, groups: groups[...]) == 1 else {
            throw .invalidKey("the Bech32 checksum does not match (a typing error?)")
        }
        guard let data = regroup(groups.dropLast(checksumLength), from: 5, to: 8, padding: false) else {
            throw .invalidKey("the Bech32 data has invalid padding")
        }
        return (humanReadablePart, data)
    }

    private static func lowercased(_ character: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(character) ? character | 0x20 : character
    }

    /// BIP 173's checksum over the expanded human-readable part, the data groups and
    /// `trailingZeros` zero groups (the placeholder for a checksum being computed).
    private static func polymod(humanReadablePart: [UInt8], groups: ArraySlice<UInt8>, trailingZeros: Int = 0) -> UInt32 {
        let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]
        var checksum: UInt32 = 1
        func mix(_ value: UInt8) {
            let top = checksum >> 25
            checksum = (checksum & 0x1ff_ffff) << 5 ^ UInt32(value)
            for bit in 0..<5 where (top >> bit) & 1 == 1 {
                checksum ^= generator[bit]
            }
        }
        for character in humanReadablePart { mix(character >> 5) }
        mix(0)
        for character in humanReadablePart { mix(character & 31) }
        for group in groups { mix(group) }
        for _ in 0..<trailingZeros { mix(0) }
        return checksum
    }

    /// The six checksum groups that make `polymod` of the whole string equal 1.
    private static func checksum(humanReadablePart: [UInt8], groups: [UInt8]) -> [UInt8] {
        let value = polymod(humanReadablePart: humanReadablePart, groups: groups[...], trailingZeros: checksumLength) ^ 1
        return (0..<checksumLength).map { UInt8((value >> (5 * (5 - UInt32($0)))) & 31) }
    }

    /// Regroups a bit string from `fromBits`-bit to `toBits`-bit values. Without
    /// `padding`, left-over bits must be fewer than `fromBits` and all zero (BIP 173).
    private static func regroup(
        _ input: some Collection<UInt8>, from fromBits: Int, to toBits: Int, padding: Bool
    ) -> [UInt8]? {
        var accumulator: UInt32 = 0
        var bitCount = 0
        let mask: UInt32 = (1 << toBits) - 1
        var output = [UInt8]()
        output.reserveCapacity((input.count * fromBits + toBits - 1) / toBits)
        for value in input {
            accumulator = (accumulator << fromBits | UInt32(value)) & 0xFFFF
            bitCount += fromBits
            while bitCount >= toBits {
                bitCount -= toBits
                output.append(UInt8((accumulator >> bitCount) & mask))
            }
        }
        if padding {
            if bitCount > 0 { output.append(UInt8((accumulator << (toBits - bitCount)) & mask)) }
        } else if bitCount >= fromBits || (accumulator << (toBits - bitCount)) & mask != 0 {
            output.zeroize()
            return nil
        }
        return output
    }
}
