/// The Diffie-Hellman group of the Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7`
/// transport: the 1024-bit MODP group of RFC 2409 §6.2 ("Oakley group 2"), generator 2.
///
/// p = 2^1024 − 2^960 − 1 + 2^64·(⌊2^894·π⌋ + 129093) is a safe prime: p = 2q + 1 with q
/// prime, and 2 generates the subgroup of order q. Numbers cross the wire as big-endian
/// unsigned bytes.
enum OakleyGroup2 {
    /// Bytes in a number of the group, as the server sends it.
    static let byteCount = 128

    /// p, as RFC 2409 prints it: most significant limb first.
    private static let primeMostSignificantFirst: [UInt64] = [
        0xFFFF_FFFF_FFFF_FFFF, 0xC90F_DAA2_2168_C234, 0xC4C6_628B_80DC_1CD1, 0x2902_4E08_8A67_CC74,
        0x020B_BEA6_3B13_9B22, 0x514A_0879_8E34_04DD, 0xEF95_19B3_CD3A_431B, 0x302B_0A6D_F25F_1437,
        0x4FE1_356D_6D51_C245, 0xE485_B576_625E_7EC6, 0xF44C_42E9_A637_ED6B, 0x0BFF_5CB6_F406_B7ED,
        0xEE38_6BFB_5A89_9FA5, 0xAE9F_2411_7C4B_1FE6, 0x4928_6651_ECE6_5381, 0xFFFF_FFFF_FFFF_FFFF,
    ]

    /// p and its Montgomery constants, computed on first use.
    static let modulus = MontgomeryModulus(limbs: primeMostSignificantFirst.reversed())

    /// The number that `bytes` (big-endian, any length) encode, as 16 limbs, if it is a
    /// public key of the group: 2 ≤ y ≤ p − 2.
    ///
    /// 1 and p − 1 generate subgroups of order 1 and 2 and would force the shared secret
    /// to 1 or ±1; 0 and numbers ≥ p are not in the group. Because p is a safe prime,
    /// every other number has order q or 2q, so no small subgroup remains.
    static func publicValue(bigEndian bytes: [UInt8]) throws(SecretCryptoError) -> [UInt64] {
        let significant = bytes.drop(while: { $0 == 0 })
        guard significant.count <= byteCount else { throw .invalidPublicKey }
        let value = limbs(bigEndian: significant)
        var pMinusOne = modulus.limbs
        pMinusOne[0] -= 1  // p is odd
        guard !isLess(value, than: [2]), isLess(value, than: pMinusOne) else { throw .invalidPublicKey }
        return value
    }

    /// Teeth of the comb in `powerOfTwo`: one for each limb of a private exponent.
    static let combTeeth = PrivateExponent.limbCount
    /// Entries of the comb's table, one per choice of teeth.
    private static let combEntries = 1 << combTeeth

    /// The comb's table in Montgomery form, 16 numbers of 16 limbs: entry b is the
    /// product of the bases gᵢ = 2^(2^(64·i)) mod p whose bit i is set in b. Public
    /// numbers, computed once: 192 squarings and 15 multiplications.
    private static let combTable: [UInt64] = {
        let count = MontgomeryArithmetic.limbCount
        return modulus.withArithmetic(freeLimbs: (combEntries + 1) * count) { arithmetic, free in
            let table = free, base = free + combEntries * count
            table.update(from: modulus.one, count: count)
            arithmetic.double(table, into: base)  // g₀ = 2
            for tooth in 0..<combTeeth {
                if tooth > 0 {
                    for _ in 0..<64 { arithmetic.square(base, into: base) }  // gᵢ = gᵢ₋₁^(2^64)
                }
                let bit = 1 << tooth
                for entry in 0..<bit {
                    arithmetic.multiply(table + entry * count, base, into: table + (entry | bit) * count)
                }
            }
            return Array(UnsafeBufferPointer(start: table, count: combEntries * count))
        }
    }()

    /// 2^exponent mod p as 128 big-endian bytes, for an exponent of 4 little-endian
    /// limbs (256 bits): the server's public key.
    ///
    /// A fixed-base comb (Lim and Lee): limb i of the exponent, xᵢ, is the exponent of
    /// the base gᵢ = 2^(2^(64·i)), so 2^x = ∏ gᵢ^xᵢ, and the four powers are computed
    /// together, bit k of every limb at once: square, then multiply by the entry of
    /// `combTable` that bit k of the four limbs names. 63 squarings and 63
    /// multiplications, where square-and-double (doubling being a shift) needs 256
    /// squarings: measured 36 µs against 75 µs. RFC 7919 §5.3 suggests such tables for
    /// its fixed generator 2. Entries are read with every other, so neither time nor
    /// memory access depends on the exponent.
    static func powerOfTwo(exponent: UnsafeBufferPointer<UInt64>) -> [UInt8] {
        precondition(exponent.count == combTeeth, "a 256-bit exponent")
        let count = MontgomeryArithmetic.limbCount
        return combTable.withUnsafeBufferPointer { table in
            modulus.withArithmetic(freeLimbs: 2 * count) { arithmetic, free in
                let accumulator = free, factor = free + count
                let entries = table.baseAddress.unsafelyUnwrapped
                for bit in (0..<64).reversed() {
                    var teeth: UInt64 = 0
                    for tooth in 0..<combTeeth {
                        teeth |= ((exponent[tooth] >> UInt64(bit)) & 1) << UInt64(tooth)
                    }
                    if bit == 63 {
                        // The first step starts from 1: its product is the entry itself.
                        MontgomeryArithmetic.select(from: entries, count: combEntries, index: teeth, into: accumulator)
                        continue
                    }
                    arithmetic.square(accumulator, into: accumulator)
                    MontgomeryArithmetic.select(from: entries, count: combEntries, index: teeth, into: factor)
                    arithmetic.multiply(accumulator, factor, into: accumulator)
                }
                arithmetic.fromMontgomery(accumulator, into: accumulator)
                return bigEndianBytes(accumulator)
            }
        }
    }

    /// Bits of exponent taken at a time by `power`: 4 needs a table of 16 powers and
    /// one multiplication per 4 squarings (5 would save 12 multiplications of ~320 for
    /// a 256-bit exponent, and spend 16 more on its table).
    private static let windowBits = 4

    /// base^exponent mod p as 128 big-endian bytes, for a public base < p (a client's
    /// key) and an exponent of any number of little-endian limbs.
    ///
    /// Fixed windows from the top: a table of base^0 … base^15, then per 4 exponent bits
    /// four squarings and one multiplication by the table entry the bits name, the entry
    /// read with every other so that memory access does not depend on the exponent.
    static func power(base: [UInt64], exponent: UnsafeBufferPointer<UInt64>) -> [UInt8] {
        let count = MontgomeryArithmetic.limbCount
        precondition(base.count == count && isLess(base, than: modulus.limbs), "a base below p")
        let tableSize = 1 << windowBits
        return modulus.withArithmetic(freeLimbs: (tableSize + 2) * count) { arithmetic, free in
            let table = free, accumulator = free + tableSize * count, factor = accumulator + count
            table.update(from: modulus.one, count: count)
            factor.update(from: base, count: count)
            arithmetic.toMontgomery(factor, into: table + count)
            for entry in 2..<tableSize {
                arithmetic.multiply(table + (entry - 1) * count, table + count, into: table + entry * count)
            }
            let windowsPerLimb = 64 / windowBits
            let windowMask = UInt64(tableSize - 1)
            let windows = exponent.count * windowsPerLimb
            accumulator.update(from: modulus.one, count: count)
            for window in (0..<windows).reversed() {
                let shift = UInt64((window % windowsPerLimb) * windowBits)
                let digit = (exponent[window / windowsPerLimb] >> shift) & windowMask
                if window == windows - 1 {
                    // The top window starts from 1: its power is the table entry itself.
                    MontgomeryArithmetic.select(from: table, count: tableSize, index: digit, into: accumulator)
                    continue
                }
                for _ in 0..<windowBits { arithmetic.square(accumulator, into: accumulator) }
                MontgomeryArithmetic.select(from: table, count: tableSize, index: digit, into: factor)
                arithmetic.multiply(accumulator, factor, into: accumulator)
            }
            arithmetic.fromMontgomery(accumulator, into: accumulator)
            return bigEndianBytes(accumulator)
        }
    }

    /// 16 limbs as 128 big-endian bytes, left-padded with zeros: the shared secret's
    /// encoding for the key derivation, and the server's public key on the wire.
    static func bigEndianBytes(_ limbs: UnsafePointer<UInt64>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: byteCount) { bytes, initialized in
            for index in 0..<byteCount {
                let limb = limbs[(byteCount - 1 - index) / 8]
                bytes[index] = UInt8(truncatingIfNeeded: limb >> UInt64(8 * ((byteCount - 1 - index) % 8)))
            }
            initialized = byteCount
        }
    }

    /// Big-endian bytes (at most 128) as 16 little-endian limbs.
    static func limbs(bigEndian bytes: some BidirectionalCollection<UInt8>) -> [UInt64] {
        precondition(bytes.count <= byteCount, "a number of at most 1024 bits")
        var limbs = [UInt64](repeating: 0, count: MontgomeryArithmetic.limbCount)
        for (position, byte) in bytes.reversed().enumerated() {
            limbs[position / 8] |= UInt64(byte) << UInt64(8 * (position % 8))
        }
        return limbs
    }

    /// a < b, for little-endian limbs (the shorter one padded with zero limbs). Not in
    /// constant time: only for public numbers.
    private static func isLess(_ a: [UInt64], than b: [UInt64]) -> Bool {
        for i in (0..<max(a.count, b.count)).reversed() {
            let left = i < a.count ? a[i] : 0, right = i < b.count ? b[i] : 0
            if left != right { return left < right }
        }
        return false
    }
}
