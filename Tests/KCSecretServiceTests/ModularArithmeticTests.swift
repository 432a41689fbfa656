@testable import KCSecretService
import XCTest

/// The 1024-bit modular powers under the key agreement (libgcrypt's, through
/// `OakleyGroup2`), against python3's `pow`: the group's prime, 2^x and y^x at random
/// and at the edges, and the 128-byte encoding of the results.
final class ModularArithmeticTests: XCTestCase {
    /// Reads "base exponent" lines in hex and prints pow(base, exponent, p) as 256 hex
    /// digits, p being the first argument.
    static let powScript = """
        import sys
        p = int(sys.argv[1], 16)
        for line in sys.stdin:
            parts = line.split() + ['0']  # an empty exponent is 0
            print(format(pow(int(parts[0], 16), int(parts[1], 16), p), '0256x'))
        """

    var generator = SystemRandomNumberGenerator()

    func testThePrimeIsRFC2409sSecondOakleyGroup() throws {
        XCTAssertEqual(OakleyGroup2.prime.hex, PythonReference.primeHex.lowercased())
        // And secretstorage's copy of it, the client these sessions are for.
        let printed = try PythonReference.run(
            "from secretstorage.dhcrypto import DH_PRIME_1024; print(format(DH_PRIME_1024, '0256x'))",
            lines: [], requiring: ["secretstorage.dhcrypto"])
        XCTAssertEqual(printed, [OakleyGroup2.prime.hex])
    }

    func testPowerMatchesPythonForRandomAndEdgeBasesAndExponents() throws {
        let p = OakleyGroup2.prime
        let edgeBases: [[UInt8]] = [[0], [1], [2], [3], p.subtracting(1), p.subtracting(2), [0x80] + [UInt8](repeating: 0, count: 127)]
        let edgeExponents: [[UInt8]] = [
            [], [0], [1], [2], [15], [16], [UInt8](repeating: 0xFF, count: 8),
            [0, 0, 0, 1], [0x80] + [UInt8](repeating: 0, count: 31), [0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 16),  // leading zeros
            [UInt8](repeating: 0xFF, count: 32),
            p.subtracting(1), p.subtracting(2),                                   // Fermat: y^(p−1) = 1
        ]
        var cases: [(base: [UInt8], exponent: [UInt8])] = []
        for base in edgeBases {
            for exponent in edgeExponents { cases.append((base, exponent)) }
        }
        for index in 0..<260 {
            // Exponents of 1 to 136 bytes; every fourth with zero bytes on top.
            var exponent = randomBytes(count: 1 + (index * 8) % 136)
            if index % 4 == 0 { exponent = [0, 0] + exponent }
            cases.append((randomBelowPrime(), exponent))
        }
        // The bases a session meets: 2^k across a byte boundary, and near p.
        for shift in [1, 7, 8, 9, 63, 64, 1000, 1023] {
            cases.append((powerOfTwo(shift), randomBytes(count: 32)))
        }

        let lines = cases.map { "\(OakleyGroup2.padded($0.base).hex) \($0.exponent.hex)" }
        let expected = try PythonReference.run(Self.powScript, arguments: [PythonReference.primeHex], lines: lines)
        XCTAssertEqual(expected.count, cases.count)
        for (testCase, python) in zip(cases, expected) {
            let result = testCase.exponent.withUnsafeBufferPointer { OakleyGroup2.power(base: testCase.base, exponent: $0) }
            XCTAssertEqual(result.count, 128)
            XCTAssertEqual(result.hex, python, "base \(testCase.base.hex) exponent \(testCase.exponent.hex)")
        }
    }

    func testPowerOfTwoMatchesPythonForRandomAndEdgeExponents() throws {
        var exponents: [[UInt8]] = [
            [UInt8](repeating: 0, count: 32), [1], [2], [0x03, 0xFF], [0x04, 0x00],
            [UInt8](repeating: 0xFF, count: 32), [0x80] + [UInt8](repeating: 0, count: 31),
            [0, 0, 0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF],   // leading zero bytes
        ]
        for index in 0..<250 {
            var exponent = randomBytes(count: 32)
            // Some with the top bytes cleared, as a random exponent may have.
            if index % 5 == 0 { exponent[0] = 0 }
            if index % 7 == 0 { exponent[0...2] = [0, 0, 0] }
            exponents.append(exponent)
        }
        let lines = exponents.map { "2 \($0.hex)" }
        let expected = try PythonReference.run(Self.powScript, arguments: [PythonReference.primeHex], lines: lines)
        XCTAssertEqual(expected.count, exponents.count)
        for (exponent, python) in zip(exponents, expected) {
            let result = exponent.withUnsafeBufferPointer { OakleyGroup2.powerOfTwo(exponent: $0) }
            XCTAssertEqual(result.hex, python, "exponent \(exponent.hex)")
        }
    }

    /// Small results come out as 128 bytes with their zeros in front: what the key
    /// derivation hashes, and what the server sends as its public key.
    func testResultsAreLeftPaddedTo128Bytes() {
        XCTAssertEqual([UInt8(1)].withUnsafeBufferPointer { OakleyGroup2.power(base: [2], exponent: $0) },
                       [UInt8](repeating: 0, count: 127) + [2])
        XCTAssertEqual([UInt8(0)].withUnsafeBufferPointer { OakleyGroup2.power(base: [2], exponent: $0) },
                       [UInt8](repeating: 0, count: 127) + [1])
        XCTAssertEqual([UInt8(9)].withUnsafeBufferPointer { OakleyGroup2.powerOfTwo(exponent: $0) },
                       [UInt8](repeating: 0, count: 126) + [2, 0])
        XCTAssertEqual([UInt8(0x03), 0xF7].withUnsafeBufferPointer { OakleyGroup2.powerOfTwo(exponent: $0) },
                       [0, 0x80] + [UInt8](repeating: 0, count: 126), "2^1015")
    }

    // MARK: - Numbers

    func randomBytes(count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// A random number below p: a top byte below 0xFF keeps it below p, whose top byte is 0xFF.
    func randomBelowPrime() -> [UInt8] {
        var bytes = randomBytes(count: 128)
        bytes[0] = min(bytes[0], 0xFE)
        return bytes
    }

    func powerOfTwo(_ shift: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 128)
        bytes[127 - shift / 8] = 1 << UInt8(shift % 8)
        return bytes
    }
}
