import KCSecretService
import XCTest

/// Secrets sealed with AES-128-CBC and PKCS#7 under a session key: round trips, fresh
/// IVs, and every malformed input refused with an error, never a crash.
final class SecretCipherTests: XCTestCase {
    let key: [UInt8] = (0..<16).map { UInt8($0 * 7 + 3) }

    func testSecretsOfEveryLengthComeBack() throws {
        for length in Array(0...40) + [255, 256, 4096] {
            let plain = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
            let sealed = try SecretCipher.encrypt(plain, key: key)
            XCTAssertEqual(sealed.parameters.count, 16)
            // PKCS#7 always adds 1 to 16 bytes.
            XCTAssertEqual(sealed.value.count, (length / 16 + 1) * 16, "length \(length)")
            XCTAssertEqual(try SecretCipher.decrypt(sealed.value, parameters: sealed.parameters, key: key), plain)
        }
    }

    func testEachSecretGetsAFreshIV() throws {
        let ivs = try (0..<100).map { _ in try SecretCipher.encrypt(Array("hunter2".utf8), key: key).parameters }
        XCTAssertEqual(Set(ivs).count, ivs.count)
    }

    func testTheIVIsTheSecretsParameters() throws {
        // In CBC the IV is XORed into the first block: changing its first byte changes
        // the secret's first byte, and only that.
        let sealed = try SecretCipher.encrypt(Array("password".utf8), key: key)
        var iv = sealed.parameters
        iv[0] ^= 0x20
        XCTAssertEqual(try SecretCipher.decrypt(sealed.value, parameters: iv, key: key), Array("Password".utf8))
    }

    func testRefusesCiphertextThatIsNotWholeBlocks() throws {
        let iv = [UInt8](repeating: 0, count: 16)
        for length in [0, 1, 15, 17, 31, 33] {
            XCTAssertThrowsError(try SecretCipher.decrypt([UInt8](repeating: 0xA5, count: length), parameters: iv, key: key),
                                 "length \(length)") { error in
                XCTAssertEqual(error as? SecretCryptoError, .badCiphertext)
            }
        }
    }

    func testRefusesBadPadding() throws {
        // One block holding 15 bytes and the pad byte 01. Flipping IV bits flips the same
        // bits of the decrypted block, which gives exactly the padding wanted.
        let fifteen = try SecretCipher.encrypt([UInt8](repeating: 0x41, count: 15), key: key)
        // 14 bytes and the pad 02 02.
        let fourteen = try SecretCipher.encrypt([UInt8](repeating: 0x41, count: 14), key: key)
        let cases: [(String, (parameters: [UInt8], value: [UInt8]), UInt8)] = [
            ("pad byte 0", fifteen, 0x01 ^ 0x00),
            ("pad byte 17", fifteen, 0x01 ^ 0x11),
            ("pad byte 0xFF", fifteen, 0x01 ^ 0xFF),
            ("pad 03 over 41 02", fourteen, 0x02 ^ 0x03),
            ("pad 16 over a partly filled block", fourteen, 0x02 ^ 0x10),
        ]
        for (name, sealed, flip) in cases {
            var iv = sealed.parameters
            iv[15] ^= flip
            XCTAssertThrowsError(try SecretCipher.decrypt(sealed.value, parameters: iv, key: key), name) { error in
                XCTAssertEqual(error as? SecretCryptoError, .badCiphertext, name)
            }
        }
    }

    func testRefusesIVsThatAreNot16Bytes() throws {
        let sealed = try SecretCipher.encrypt(Array("secret".utf8), key: key)
        for length in [0, 15, 17, 32] {
            XCTAssertThrowsError(try SecretCipher.decrypt(sealed.value, parameters: [UInt8](repeating: 1, count: length), key: key),
                                 "IV of \(length)") { error in
                XCTAssertEqual(error as? SecretCryptoError, .badParameters)
            }
        }
    }

    func testRefusesKeysThatAreNot16Bytes() throws {
        for length in [0, 15, 17, 32] {
            let wrong = [UInt8](repeating: 9, count: length)
            XCTAssertThrowsError(try SecretCipher.encrypt([1, 2, 3], key: wrong)) { error in
                XCTAssertEqual(error as? SecretCryptoError, .badKey)
            }
            XCTAssertThrowsError(try SecretCipher.decrypt([UInt8](repeating: 0, count: 16), parameters: [UInt8](repeating: 0, count: 16), key: wrong)) { error in
                XCTAssertEqual(error as? SecretCryptoError, .badKey)
            }
        }
    }

    func testAnotherSessionsKeyNeverOpensTheSecret() throws {
        let plain = Array("correct horse battery staple".utf8)
        for round in 0..<200 {
            let sealed = try SecretCipher.encrypt(plain, key: key)
            let other = (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ round) }
            // Mostly bad padding; a chance pad byte of 01 gives garbage, never the secret.
            if let opened = try? SecretCipher.decrypt(sealed.value, parameters: sealed.parameters, key: other) {
                XCTAssertNotEqual(opened, plain)
            }
        }
    }

    func testErrorsDescribeThemselvesInOneLine() {
        let errors: [SecretCryptoError] = [.invalidPublicKey, .badCiphertext, .badParameters, .badKey, .randomFailed]
        for error in errors {
            XCTAssertFalse(error.description.isEmpty)
            XCTAssertFalse(error.description.contains("\n"))
        }
    }
}
