/// Multiplication modulo an odd 1024-bit modulus p in Montgomery form, on numbers of
/// 16 little-endian 64-bit limbs in memory the caller owns.
///
/// A number a is held as a·R mod p with R = 2^1024; the product of two such numbers
/// is reduced by adding a multiple of p that clears the low 1024 bits and dropping
/// them (Montgomery's REDC), so no division is ever needed.
///
/// Pointers rather than arrays: an exponentiation makes some 300 multiplications, and
/// each must run without allocating, retaining or checking bounds. Every operation
/// takes the same time whatever the numbers' values (no branch or memory address
/// depends on them: carries and borrows are arithmetic, choices are masks behind
/// `valueBarrier`), since they are computed from a private exponent. Results may be
/// written over an operand.
struct MontgomeryArithmetic {
    /// Limbs in a number.
    static let limbCount = 16
    /// Limbs of scratch the operations use: one double-width product.
    static let scratchLimbCount = 2 * limbCount

    /// p, 16 limbs.
    let modulus: UnsafePointer<UInt64>
    /// −p⁻¹ mod 2^64.
    let inverse: UInt64
    /// R² mod p, 16 limbs, which multiplies a number into Montgomery form.
    let rSquared: UnsafePointer<UInt64>
    /// `scratchLimbCount` limbs, overwritten by every operation.
    let scratch: UnsafeMutablePointer<UInt64>

    // The loops below go two rows at a time: each limb of the double-width product is
    // loaded and stored once for two multiplications, not one; measured 20% faster.

    /// result = a·b·R⁻¹ mod p, for a, b < p.
    func multiply(_ a: UnsafePointer<UInt64>, _ b: UnsafePointer<UInt64>, into result: UnsafeMutablePointer<UInt64>) {
        let product = scratch
        product.update(repeating: 0, count: Self.scratchLimbCount)
        // Rows i and i + 1 add a·b[i] at limb i and a·b[i + 1] at limb i + 1; limbs
        // i + 16 and i + 17 are still zero when the pair starts.
        for i in stride(from: 0, to: Self.limbCount, by: 2) {
            let first = b[i], second = b[i + 1]
            var firstCarry: UInt64 = 0, secondCarry: UInt64 = 0, partial: UInt64
            (firstCarry, product[i]) = multiplyAdd(a[0], first, product[i], 0)
            for j in 1..<Self.limbCount {
                (firstCarry, partial) = multiplyAdd(a[j], first, product[i + j], firstCarry)
                (secondCarry, product[i + j]) = multiplyAdd(a[j - 1], second, partial, secondCarry)
            }
            (secondCarry, product[i + 16]) = multiplyAdd(a[15], second, firstCarry, secondCarry)
            product[i + 17] = secondCarry
        }
        reduce(into: result)
    }

    /// result = a²·R⁻¹ mod p, for a < p: each cross product a[i]·a[j] is computed once
    /// and doubled, so a square costs less than a multiplication.
    func square(_ a: UnsafePointer<UInt64>, into result: UnsafeMutablePointer<UInt64>) {
        let product = scratch
        product.update(repeating: 0, count: Self.scratchLimbCount)
        // The products a[i]·a[j] with i < j, rows i and i + 1 together: row i starts at
        // limb 2i + 1, row i + 1 two limbs later. Row 14 has one product; row 15 none.
        for i in stride(from: 0, to: Self.limbCount - 2, by: 2) {
            let first = a[i], second = a[i + 1]
            var firstCarry: UInt64 = 0, secondCarry: UInt64 = 0, partial: UInt64
            (firstCarry, product[2 * i + 1]) = multiplyAdd(a[i + 1], first, product[2 * i + 1], 0)
            (firstCarry, product[2 * i + 2]) = multiplyAdd(a[i + 2], first, product[2 * i + 2], firstCarry)
            for j in (i + 3)..<Self.limbCount {
                (firstCarry, partial) = multiplyAdd(a[j], first, product[i + j], firstCarry)
                (secondCarry, product[i + j]) = multiplyAdd(a[j - 1], second, partial, secondCarry)
            }
            (secondCarry, product[i + 16]) = multiplyAdd(a[15], second, firstCarry, secondCarry)
            product[i + 17] = secondCarry
        }
        (product[30], product[29]) = multiplyAdd(a[14], a[15], product[29], 0)
        // Doubled: the sum is at most a²/2, so no bit leaves the top limb.
        var shiftedOut: UInt64 = 0
        for i in 0..<Self.scratchLimbCount {
            let limb = product[i]
            product[i] = (limb << 1) | shiftedOut
            shiftedOut = limb >> 63
        }
        // Plus the squares a[i]² on the diagonal.
        var carry: UInt64 = 0
        for i in 0..<Self.limbCount {
            let (high, low) = a[i].multipliedFullWidth(by: a[i])
            let (lowSum, lowCarry) = addWithCarry(product[2 * i], low, carry)
            product[2 * i] = lowSum
            (product[2 * i + 1], carry) = addWithCarry(product[2 * i + 1], high, lowCarry)
        }
        reduce(into: result)
    }

    /// result = 2·a mod p, for a < p. In Montgomery form as outside it, since
    /// 2·(a·R) = (2·a)·R.
    func double(_ a: UnsafePointer<UInt64>, into result: UnsafeMutablePointer<UInt64>) {
        let doubled = scratch
        var shiftedOut: UInt64 = 0
        for i in 0..<Self.limbCount {
            let limb = a[i]
            doubled[i] = (limb << 1) | shiftedOut
            shiftedOut = limb >> 63
        }
        subtractModulusIfNeeded(doubled, topBit: shiftedOut,
                                difference: scratch + Self.limbCount, into: result)
    }

    /// result = a·R mod p: a (< p) in Montgomery form.
    func toMontgomery(_ a: UnsafePointer<UInt64>, into result: UnsafeMutablePointer<UInt64>) {
        multiply(a, rSquared, into: result)
    }

    /// result = a·R⁻¹ mod p: a out of Montgomery form.
    func fromMontgomery(_ a: UnsafePointer<UInt64>, into result: UnsafeMutablePointer<UInt64>) {
        scratch.update(from: a, count: Self.limbCount)
        (scratch + Self.limbCount).update(repeating: 0, count: Self.limbCount)
        reduce(into: result)
    }

    /// result = table[index] from a table of `count` consecutive numbers, reading every
    /// entry so that the memory touched does not tell which one was wanted.
    static func select(from table: UnsafePointer<UInt64>, count: Int, index: UInt64,
                       into result: UnsafeMutablePointer<UInt64>) {
        result.update(repeating: 0, count: limbCount)
        for entry in 0..<count {
            let mask = valueBarrier(equalityMask(UInt64(truncatingIfNeeded: entry), index))
            let limbs = table + entry * limbCount
            for i in 0..<limbCount {
                result[i] |= limbs[i] & mask
            }
        }
    }

    /// Montgomery reduction of the double-width product in `scratch` (below p·R): adds
    /// m·p·2^(64·i) for each limb i so that limb becomes zero, leaving the product
    /// divided by R, below 2p, in the upper half.
    private func reduce(into result: UnsafeMutablePointer<UInt64>) {
        let product = scratch
        var pending: UInt64 = 0  // the carry out of limb i + 15, for limb i + 16
        for i in stride(from: 0, to: Self.limbCount, by: 2) {
            // first and second are the m of rows i and i + 1. Row i's first two limbs
            // give limb i + 1 as row i + 1 sees it, and so its m.
            let first = product[i] &* inverse
            var firstCarry: UInt64, secondCarry: UInt64, partial: UInt64
            (firstCarry, _) = multiplyAdd(first, modulus[0], product[i], 0)
            (firstCarry, partial) = multiplyAdd(first, modulus[1], product[i + 1], firstCarry)
            let second = partial &* inverse
            (secondCarry, _) = multiplyAdd(second, modulus[0], partial, 0)
            for j in 2..<Self.limbCount {
                (firstCarry, partial) = multiplyAdd(first, modulus[j], product[i + j], firstCarry)
                (secondCarry, product[i + j]) = multiplyAdd(second, modulus[j - 1], partial, secondCarry)
            }
            let (sum, overflow) = addWithCarry(product[i + 16], firstCarry, pending)
            (secondCarry, product[i + 16]) = multiplyAdd(second, modulus[15], sum, secondCarry)
            (product[i + 17], pending) = addWithCarry(product[i + 17], secondCarry, overflow)
        }
        subtractModulusIfNeeded(product + Self.limbCount, topBit: pending,
                                difference: product, into: result)
    }

    /// result = value − p if value (16 limbs plus `topBit` · 2^1024, below 2p) is at
    /// least p, else value; `difference` is 16 limbs of room, which may not overlap
    /// `value` or `result`.
    private func subtractModulusIfNeeded(_ value: UnsafePointer<UInt64>, topBit: UInt64,
                                         difference: UnsafeMutablePointer<UInt64>,
                                         into result: UnsafeMutablePointer<UInt64>) {
        var borrow: UInt64 = 0
        for i in 0..<Self.limbCount {
            (difference[i], borrow) = subtractWithBorrow(value[i], modulus[i], borrow)
        }
        // value < p exactly when the subtraction borrowed past a clear top bit.
        let valueIsReduced = borrow & ~topBit
        if UnsafePointer(result) != value { result.update(from: value, count: Self.limbCount) }
        Self.copy(from: difference, into: result, if: valueIsReduced ^ 1)
    }

    /// destination = source if `condition` is 1, unchanged if it is 0: the same loads
    /// and stores either way.
    private static func copy(from source: UnsafePointer<UInt64>, into destination: UnsafeMutablePointer<UInt64>,
                             if condition: UInt64) {
        let mask = valueBarrier(0 &- condition)
        for i in 0..<limbCount {
            destination[i] = (source[i] & mask) | (destination[i] & ~mask)
        }
    }
}

/// (high, low) of a·b + c + d, which cannot overflow 128 bits.
@inline(__always)
private func multiplyAdd(_ a: UInt64, _ b: UInt64, _ c: UInt64, _ d: UInt64) -> (high: UInt64, low: UInt64) {
    let (high, low) = a.multipliedFullWidth(by: b)
    let (partial, firstCarry) = low.addingReportingOverflow(c)
    let (sum, secondCarry) = partial.addingReportingOverflow(d)
    return (high &+ (firstCarry ? 1 : 0) &+ (secondCarry ? 1 : 0), sum)
}

/// (sum, carry out) of a + b + carry, for a carry in of 0 or 1.
@inline(__always)
private func addWithCarry(_ a: UInt64, _ b: UInt64, _ carry: UInt64) -> (sum: UInt64, carry: UInt64) {
    let (partial, firstCarry) = a.addingReportingOverflow(b)
    let (sum, secondCarry) = partial.addingReportingOverflow(carry)
    return (sum, (firstCarry ? 1 : 0) | (secondCarry ? 1 : 0))
}

/// (difference, borrow out) of a − b − borrow, for a borrow in of 0 or 1. The borrow
/// comes from the operands' top bits (Hacker's Delight §2-16) rather than from a
/// comparison, which the compiler turned into a branch.
@inline(__always)
private func subtractWithBorrow(_ a: UInt64, _ b: UInt64, _ borrow: UInt64) -> (difference: UInt64, borrow: UInt64) {
    let difference = a &- b &- borrow
    return (difference, ((~a & b) | (~(a ^ b) & difference)) >> 63)
}

/// All ones if a == b, else zero, without a branch.
@inline(__always)
private func equalityMask(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let difference = a ^ b
    // The top bit of difference | −difference is set exactly when difference ≠ 0.
    return ((difference | (0 &- difference)) >> 63) &- 1
}

/// `value`, in a way the optimiser cannot see through: a function it may neither inline
/// nor analyse. Without it, LLVM recognised the masks above as comparisons and turned
/// the selections into branches and conditional loads, whose timing and memory access
/// depend on the secret exponent (the idea of Botan's `CT::value_barrier`; the Swift
/// standard library's benchmarks block the optimiser the same way).
@inline(never) @_optimize(none)
func valueBarrier(_ value: UInt64) -> UInt64 {
    value
}
