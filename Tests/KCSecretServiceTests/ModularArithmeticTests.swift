@testable import KCSecretService
import XCTest

/// The 1024-bit arithmetic under the key agreement, against python3's `pow`: the
/// group's constants, the comb for 2^x, and the windowed power for y^x, at random and
/// at the edges.
final class ModularArithmeticTests: XCTestCase {
    /// Reads "base exponent" lines in hex and prints pow(base, exponent, p) as 256 hex
    /// digits, p being the first argument.
    static let powScript = """
        import sys
        p = int(sys.argv[1], 16)
        for line in sys.stdin:
            base, exponent = line.split()
            print(format(pow(int(base, 16), int(exponent, 16), p), '0256x'))
        """

    var generator = SystemRandomNumberGenerator()

    var primeLimbs: [UInt64] { OakleyGroup2.modulus.limbs }

    func testThePrimeIsRFC2409sSecondOakleyGroup() throws {
        let bytes = primeLimbs.withUnsafeBufferPointer { OakleyGroup2.bigEndianBytes($0.baseAddress!) }
        XCTAssertEqual(bytes.hex, PythonReference.primeHex.lowercased())
        // And secretstorage's copy of it, the client these sessions are for.
        let printed = try PythonReference.run(
            "from secretstorage.dhcrypto import DH_PRIME_1024; print(format(DH_PRIME_1024, '0256x'))",
            lines: [], requiring: ["secretstorage.dhcrypto"])
        XCTAssertEqual(printed, [bytes.hex])
    }

    func testMontgomeryConstantsMatchPython() throws {
        let modulus = OakleyGroup2.modulus
        XCTAssertEqual(modulus.inverse &* modulus.limbs[0], UInt64.max, "-p^-1 · p ≡ -1 mod 2^64")
        let printed = try PythonReference.run("""
            import sys
            p = int(sys.argv[1], 16)
            print(format(pow(2, 1024, p), '0256x'))
            print(format(pow(2, 2048, p), '0256x'))
            """, arguments: [PythonReference.primeHex], lines: [])
        XCTAssertEqual(printed, [hex(limbs: modulus.one), hex(limbs: modulus.rSquared)])
    }

    func testPowerMatchesPythonForRandomAndEdgeBasesAndExponents() throws {
        let pMinusOne = primeLimbs.replacingLimb(0, with: primeLimbs[0] - 1)
        let pMinusTwo = primeLimbs.replacingLimb(0, with: primeLimbs[0] - 2)
        let small: [[UInt64]] = [[0], [1], [2], [3]].map { $0.padded(to: 16) }
        let edgeBases = small + [pMinusOne, pMinusTwo, [UInt64](repeating: 0, count: 15) + [1 << 63]]
        let edgeExponents: [[UInt64]] = [
            [], [0], [1], [2], [15], [16], [UInt64.max],
            [1, 0, 0, 0], [0, 0, 0, 1 << 63], [0, 0, 1, 0, 0, 0],    // leading zero limbs
            [UInt64](repeating: UInt64.max, count: 4),
            pMinusOne, pMinusTwo,                                      // Fermat: y^(p−1) = 1
        ]
        var cases: [(base: [UInt64], exponent: [UInt64])] = []
        for base in edgeBases {
            for exponent in edgeExponents { cases.append((base, exponent)) }
        }
        for index in 0..<260 {
            // Exponents of 1 to 17 limbs; every fourth with zero limbs on top.
            var exponent = randomLimbs(count: 1 + index % 17)
            if index % 4 == 0 { exponent += [0, 0] }
            cases.append((randomBelowPrime(), exponent))
        }
        // The bases a session meets: 2^k for k across a limb boundary, and p − 2^k.
        for shift in [1, 63, 64, 65, 1000, 1023] {
            cases.append((powerOfTwoLimbs(shift), randomLimbs(count: 4)))
        }

        let lines = cases.map { "\(hex(limbs: $0.base)) \(hex(limbs: $0.exponent))" }
        let expected = try PythonReference.run(Self.powScript, arguments: [PythonReference.primeHex], lines: lines)
        XCTAssertEqual(expected.count, cases.count)
        for (testCase, python) in zip(cases, expected) {
            let swift = testCase.exponent.withUnsafeBufferPointer { OakleyGroup2.power(base: testCase.base, exponent: $0) }
            XCTAssertEqual(swift.count, 128)
            XCTAssertEqual(swift.hex, python, "base \(hex(limbs: testCase.base)) exponent \(hex(limbs: testCase.exponent))")
        }
    }

    func testPowerOfTwoMatchesPythonForRandomAndEdgeExponents() throws {
        var exponents: [[UInt64]] = [
            [0, 0, 0, 0], [1, 0, 0, 0], [2, 0, 0, 0], [1023, 0, 0, 0], [1024, 0, 0, 0],
            [UInt64.max, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1 << 63],
            [UInt64](repeating: UInt64.max, count: 4), [1, 1, 1, 1],
            [0x0123_4567_89AB_CDEF, 0, 0, 0],                       // leading zero bytes
            [UInt64.max, UInt64.max, UInt64.max, 0x00FF_FFFF_FFFF_FFFF],
        ]
        for index in 0..<250 {
            var exponent = randomLimbs(count: 4)
            // Some with the top limbs or bytes cleared, as a random exponent may have.
            if index % 5 == 0 { exponent[3] = 0 }
            if index % 7 == 0 { exponent[3] >>= 8 }
            exponents.append(exponent)
        }
        let two = [UInt64(2)].padded(to: 16)
        let lines = exponents.map { "2 \(hex(limbs: $0))" }
        let expected = try PythonReference.run(Self.powScript, arguments: [PythonReference.primeHex], lines: lines)
        XCTAssertEqual(expected.count, exponents.count)
        for (exponent, python) in zip(exponents, expected) {
            let comb = exponent.withUnsafeBufferPointer { OakleyGroup2.powerOfTwo(exponent: $0) }
            XCTAssertEqual(comb.hex, python, "exponent \(hex(limbs: exponent))")
            // The windowed power agrees with the comb.
            let windowed = exponent.withUnsafeBufferPointer { OakleyGroup2.power(base: two, exponent: $0) }
            XCTAssertEqual(windowed, comb, "exponent \(hex(limbs: exponent))")
        }
    }

    /// Small results come out as 128 bytes with their zeros in front: what the key
    /// derivation hashes, and what the server sends as its public key.
    func testResultsAreLeftPaddedTo128Bytes() {
        let two = [UInt64(2)].padded(to: 16)
        let twoToTheOne = [UInt64(1)].withUnsafeBufferPointer { OakleyGroup2.power(base: two, exponent: $0) }
        XCTAssertEqual(twoToTheOne, [UInt8](repeating: 0, count: 127) + [2])
        let one = [UInt64(0)].withUnsafeBufferPointer { OakleyGroup2.power(base: two, exponent: $0) }
        XCTAssertEqual(one, [UInt8](repeating: 0, count: 127) + [1])
        let twoToTheNine = [UInt64(9), 0, 0, 0].withUnsafeBufferPointer { OakleyGroup2.powerOfTwo(exponent: $0) }
        XCTAssertEqual(twoToTheNine, [UInt8](repeating: 0, count: 126) + [2, 0])
        let twoToThe1015 = [UInt64(1015), 0, 0, 0].withUnsafeBufferPointer { OakleyGroup2.powerOfTwo(exponent: $0) }
        XCTAssertEqual(twoToThe1015, [0, 0x80] + [UInt8](repeating: 0, count: 126))
        // And bytes to limbs, the other way.
        XCTAssertEqual(OakleyGroup2.limbs(bigEndian: [1, 2, 3, 4, 5, 6, 7, 8, 9]),
                       [0x0203_0405_0607_0809, 1].padded(to: 16))
        XCTAssertEqual(OakleyGroup2.limbs(bigEndian: []), [UInt64](repeating: 0, count: 16))
    }

    // MARK: - Numbers

    func randomLimbs(count: Int) -> [UInt64] {
        (0..<count).map { _ in generator.next() }
    }

    /// A random number below p: any top limb but all ones keeps it below p, whose top
    /// limb is all ones.
    func randomBelowPrime() -> [UInt64] {
        var limbs = randomLimbs(count: 16)
        limbs[15] = min(limbs[15], UInt64.max - 1)
        return limbs
    }

    func powerOfTwoLimbs(_ shift: Int) -> [UInt64] {
        var limbs = [UInt64](repeating: 0, count: 16)
        limbs[shift / 64] = 1 << UInt64(shift % 64)
        return limbs
    }
}

extension Array where Element == UInt64 {
    func padded(to count: Int) -> [UInt64] {
        self + [UInt64](repeating: 0, count: count - self.count)
    }

    func replacingLimb(_ index: Int, with limb: UInt64) -> [UInt64] {
        var copy = self
        copy[index] = limb
        return copy
    }
}
