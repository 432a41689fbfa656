/// An odd 1024-bit modulus p (top bit set) and the constants its Montgomery arithmetic
/// needs, computed once when the value is made.
struct MontgomeryModulus: Sendable {
    /// p, 16 little-endian limbs.
    let limbs: [UInt64]
    /// −p⁻¹ mod 2^64.
    let inverse: UInt64
    /// R mod p (R = 2^1024): the number 1 in Montgomery form.
    let one: [UInt64]
    /// R² mod p.
    let rSquared: [UInt64]

    init(limbs: [UInt64]) {
        let count = MontgomeryArithmetic.limbCount
        precondition(limbs.count == count && limbs[0] & 1 == 1 && limbs[count - 1] >> 63 == 1,
                     "a Montgomery modulus is odd and exactly 1024 bits long")
        self.limbs = limbs
        // Newton's step x ← x·(2 − p·x) doubles the low bits in which x agrees with
        // p⁻¹; x = p starts with three (an odd square is 1 mod 8): 3, 6, 12, 24, 48, 96.
        var reciprocal = limbs[0]
        for _ in 0..<5 { reciprocal = reciprocal &* (2 &- limbs[0] &* reciprocal) }
        inverse = 0 &- reciprocal
        // R mod p = 2^1024 − p, since p > 2^1023: p's two's complement.
        var one = [UInt64](repeating: 0, count: count)
        var borrow: UInt64 = 0
        for i in 0..<count {
            let (partial, firstBorrow) = UInt64(0).subtractingReportingOverflow(limbs[i])
            let (limb, secondBorrow) = partial.subtractingReportingOverflow(borrow)
            one[i] = limb
            borrow = (firstBorrow || secondBorrow) ? 1 : 0
        }
        self.one = one
        // R² mod p = (R mod p)·2^1024 mod p: 1024 doublings, which need no R² yet.
        let unused = [UInt64](repeating: 0, count: count)
        rSquared = Self.withArithmetic(limbs: limbs, inverse: inverse, rSquared: unused, freeLimbs: count) { arithmetic, value in
            value.update(from: one, count: count)
            for _ in 0..<1024 { arithmetic.double(value, into: value) }
            return Array(UnsafeBufferPointer(start: value, count: count))
        }
    }

    /// Runs `body` with the arithmetic modulo p and `freeLimbs` limbs of its own, in one
    /// workspace that is zeroed when `body` returns (it held secret intermediates).
    func withArithmetic<Result>(freeLimbs: Int,
                                _ body: (MontgomeryArithmetic, UnsafeMutablePointer<UInt64>) -> Result) -> Result {
        Self.withArithmetic(limbs: limbs, inverse: inverse, rSquared: rSquared, freeLimbs: freeLimbs, body)
    }

    private static func withArithmetic<Result>(limbs: [UInt64], inverse: UInt64, rSquared: [UInt64], freeLimbs: Int,
                                               _ body: (MontgomeryArithmetic, UnsafeMutablePointer<UInt64>) -> Result) -> Result {
        let count = MontgomeryArithmetic.limbCount
        let constantLimbs = 2 * count
        let total = constantLimbs + MontgomeryArithmetic.scratchLimbCount + freeLimbs
        // On the stack when small enough, so an exponentiation allocates nothing.
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: total) { workspace in
            defer { zeroBytes(UnsafeMutableRawBufferPointer(workspace)) }
            // A temporary allocation of at least one element always has an address.
            workspace.initialize(repeating: 0)
            let base = workspace.baseAddress.unsafelyUnwrapped
            base.update(from: limbs, count: count)
            (base + count).update(from: rSquared, count: count)
            let scratch = base + constantLimbs
            let arithmetic = MontgomeryArithmetic(modulus: base, inverse: inverse, rSquared: base + count,
                                                  scratch: scratch)
            return body(arithmetic, scratch + MontgomeryArithmetic.scratchLimbCount)
        }
    }
}
