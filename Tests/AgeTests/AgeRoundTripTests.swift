import XCTest
@testable import Age

/// Encrypting and decrypting with kc's own age code, and the failures a user can
/// meet: a wrong key or passphrase, a damaged header or payload, a costly file.
final class AgeRoundTripTests: XCTestCase {
    static let payloadSizes = [0, 1, 65535, 65536, 65537, 200_000]

    func testFilesEncryptedToOneRecipientDecryptWithItsIdentity() throws {
        let identity = AgeX25519Identity.generate()
        for size in Self.payloadSizes {
            let plaintext = Self.pattern(count: size)
            let file = try Age.encrypt(plaintext, to: [identity.recipient])
            XCTAssertEqual(try Age.decrypt(file, identities: [identity]), plaintext, "size \(size)")
            XCTAssertEqual(file.count, Self.headerLength(of: file) + AgePayload.encryptedSize(ofPlaintextCount: size))
        }
    }

    func testFilesEncryptedToThreeRecipientsDecryptWithEachIdentity() throws {
        let identities = (0..<3).map { _ in AgeX25519Identity.generate() }
        for size in Self.payloadSizes {
            let plaintext = Self.pattern(count: size)
            let file = try Age.encrypt(plaintext, to: identities.map(\.recipient))
            for identity in identities {
                XCTAssertEqual(try Age.decrypt(file, identities: [identity]), plaintext, "size \(size)")
            }
            let stranger = AgeX25519Identity.generate()
            XCTAssertEqual(try Age.decrypt(file, identities: [stranger, identities[2]]), plaintext)
        }
    }

    func testTheUnsafeBufferFormEncryptsTheSameBytes() throws {
        let identity = AgeX25519Identity.generate()
        let plaintext = Self.pattern(count: 1000)
        let file = try plaintext.withUnsafeBytes { bytes in try Age.encrypt(bytes, to: [identity.recipient]) }
        XCTAssertEqual(try Age.decrypt(file, identities: [identity]), plaintext)
    }

    func testPassphraseFilesDecryptWithThePassphrase() throws {
        let passphrase = Array("correct horse battery staple".utf8)
        for size in Self.payloadSizes {
            let plaintext = Self.pattern(count: size)
            let file = try Age.encrypt(plaintext, passphrase: passphrase, logN: 10)
            XCTAssertEqual(try Age.decrypt(file, passphrase: passphrase), plaintext, "size \(size)")
            XCTAssertEqual(try Age.scryptWorkFactor(of: file), 10)
        }
    }

    func testAWrongIdentityFindsNoMatch() throws {
        let file = try Age.encrypt(Self.pattern(count: 100), to: [AgeX25519Identity.generate().recipient])
        XCTAssertThrowsError(try Age.decrypt(file, identities: [AgeX25519Identity.generate()])) { error in
            XCTAssertEqual(error as? AgeError, .noMatchingIdentity)
        }
        XCTAssertThrowsError(try Age.decrypt(file, identities: [])) { error in
            XCTAssertEqual(error as? AgeError, .noMatchingIdentity)
        }
    }

    func testAWrongPassphraseFindsNoMatch() throws {
        let file = try Age.encrypt(Self.pattern(count: 100), passphrase: Array("right".utf8), logN: 10)
        XCTAssertThrowsError(try Age.decrypt(file, passphrase: Array("wrong".utf8))) { error in
            XCTAssertEqual(error as? AgeError, .noMatchingIdentity)
        }
    }

    func testIdentitiesNeverOpenAPassphraseFileNorAPassphraseAnX25519File() throws {
        let identity = AgeX25519Identity.generate()
        let passphraseFile = try Age.encrypt(Self.pattern(count: 10), passphrase: Array("pass".utf8), logN: 10)
        XCTAssertThrowsError(try Age.decrypt(passphraseFile, identities: [identity])) { error in
            XCTAssertEqual(error as? AgeError, .noMatchingIdentity)
        }
        let x25519File = try Age.encrypt(Self.pattern(count: 10), to: [identity.recipient])
        XCTAssertThrowsError(try Age.decrypt(x25519File, passphrase: Array("pass".utf8))) { error in
            XCTAssertEqual(error as? AgeError, .noMatchingIdentity)
        }
        XCTAssertNil(try Age.scryptWorkFactor(of: x25519File))
    }

    func testEveryFlippedHeaderByteIsCaught() throws {
        let identity = AgeX25519Identity.generate()
        let file = try Age.encrypt(Self.pattern(count: 100), to: [identity.recipient])
        for index in 0..<Self.headerLength(of: file) {
            var damaged = file
            damaged[index] ^= 0x01
            XCTAssertThrowsError(try Age.decrypt(damaged, identities: [identity]), "byte \(index)") { error in
                switch error as? AgeError {
                case .headerMACMismatch, .malformedHeader, .noMatchingIdentity: break
                default: XCTFail("byte \(index): \(error)")
                }
            }
        }
        // A flip in the MAC itself, kept canonical, is a MAC mismatch.
        var damaged = file
        let macStart = Self.headerLength(of: file) - 44
        damaged[macStart] = damaged[macStart] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        XCTAssertThrowsError(try Age.decrypt(damaged, identities: [identity])) { error in
            XCTAssertEqual(error as? AgeError, .headerMACMismatch)
        }
    }

    func testAFlippedOrTruncatedPayloadIsDamage() throws {
        let identity = AgeX25519Identity.generate()
        let plaintext = Self.pattern(count: 70000)
        let file = try Age.encrypt(plaintext, to: [identity.recipient])
        let payloadStart = Self.headerLength(of: file)
        for index in [payloadStart, payloadStart + 20, payloadStart + 16 + 65536 + 3, file.count - 1] {
            var damaged = file
            damaged[index] ^= 0x80
            XCTAssertThrowsError(try Age.decrypt(damaged, identities: [identity]), "byte \(index)") { error in
                guard case .malformedPayload = error as? AgeError else { return XCTFail("\(error)") }
            }
        }
        for cut in [1, 17, 70000 - 65536 + 16, 70000 - 65536 + 17] {
            let truncated = Array(file.dropLast(cut))
            XCTAssertThrowsError(try Age.decrypt(truncated, identities: [identity]), "cut \(cut)") { error in
                guard case .malformedPayload = error as? AgeError else { return XCTFail("cut \(cut): \(error)") }
            }
        }
        XCTAssertThrowsError(try Age.decrypt(file + [0], identities: [identity])) { error in
            guard case .malformedPayload = error as? AgeError else { return XCTFail("\(error)") }
        }
    }

    func testAFileCutInsideItsNonceIsAHeaderFailure() throws {
        let identity = AgeX25519Identity.generate()
        let file = try Age.encrypt([], to: [identity.recipient])
        let truncated = Array(file.prefix(Self.headerLength(of: file) + 10))
        XCTAssertThrowsError(try Age.decrypt(truncated, identities: [identity])) { error in
            guard case .malformedHeader = error as? AgeError else { return XCTFail("\(error)") }
        }
    }

    func testAWorkFactorAboveTheMaximumIsRefusedBeforeAnyWork() throws {
        // A real logN 23 file would take seconds to make; rewrite the header of a
        // logN 10 file instead (its MAC no longer matches, but the refusal comes first).
        let file = try Age.encrypt(Self.pattern(count: 10), passphrase: Array("pass".utf8), logN: 10)
        let text = Array(String(decoding: file.prefix(Self.headerLength(of: file)), as: UTF8.self)
            .replacingOccurrences(of: " 10\n", with: " 23\n").utf8)
        let costly = text + file.dropFirst(Self.headerLength(of: file))
        XCTAssertEqual(try Age.scryptWorkFactor(of: costly), 23)
        XCTAssertThrowsError(try Age.decrypt(costly, passphrase: Array("pass".utf8), maximumLogN: 22)) { error in
            XCTAssertEqual(error as? AgeError, .workFactorTooHigh(logN: 23, maximum: 22))
        }
        XCTAssertThrowsError(try Age.decrypt(costly, passphrase: Array("pass".utf8))) { error in
            XCTAssertEqual(error as? AgeError, .workFactorTooHigh(logN: 23, maximum: 22))
        }
        XCTAssertThrowsError(try Age.decrypt(file, passphrase: Array("pass".utf8), maximumLogN: 9)) { error in
            XCTAssertEqual(error as? AgeError, .workFactorTooHigh(logN: 10, maximum: 9))
        }
    }

    func testEncryptionRefusesWhatNoOneCouldDecrypt() {
        XCTAssertThrowsError(try Age.encrypt([1], to: [])) { XCTAssertEqual($0 as? AgeError, .noRecipients) }
        XCTAssertThrowsError(try Age.encrypt([1], passphrase: [])) { XCTAssertEqual($0 as? AgeError, .emptyPassphrase) }
        XCTAssertThrowsError(try Age.encrypt([1], passphrase: [1], logN: 0)) {
            XCTAssertEqual($0 as? AgeError, .invalidWorkFactor(logN: 0))
        }
        XCTAssertThrowsError(try Age.encrypt([1], passphrase: [1], logN: 23)) {
            XCTAssertEqual($0 as? AgeError, .workFactorTooHigh(logN: 23, maximum: 22))
        }
    }

    func testALowOrderRecipientIsRefusedRatherThanEncryptedToInTheOpen() throws {
        // The all-zero point: every identity's shared secret with it is zero, so the
        // wrap key would be public.
        let text = Bech32.encode(humanReadablePart: Array("age".utf8), data: [UInt8](repeating: 0, count: 32))
        let lowOrder = try AgeX25519Recipient(parsing: String(decoding: text, as: UTF8.self))
        XCTAssertThrowsError(try Age.encrypt([1], to: [lowOrder])) { error in
            guard case .invalidKey = error as? AgeError else { return XCTFail("\(error)") }
        }
    }

    func testHeadersLookAsAgeWritesThem() throws {
        let file = try Age.encrypt([1, 2, 3], to: [AgeX25519Identity.generate().recipient])
        let lines = String(decoding: file.prefix(Self.headerLength(of: file)), as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, 5)
        XCTAssertEqual(lines[0], "age-encryption.org/v1")
        XCTAssertTrue(lines[1].hasPrefix("-> X25519 "))
        XCTAssertEqual(lines[1].count, 10 + 43)
        XCTAssertEqual(lines[2].count, 43)
        XCTAssertTrue(lines[3].hasPrefix("--- "))
        XCTAssertEqual(lines[3].count, 4 + 43)
        XCTAssertEqual(lines[4], "")
    }

    func testStanzaBodiesWrapAt64ColumnsAndEndWithAShortLine() throws {
        for bodySize in [0, 47, 48, 49, 96, 100] {
            let stanza = AgeStanza(type: "test", arguments: ["a", "b"], body: Self.pattern(count: bodySize))
            var text = Array(AgeHeader.versionLine) + [UInt8(ascii: "\n")]
            stanza.write(to: &text)
            let lines = text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropFirst(2).dropLast()
            XCTAssertEqual(lines.last?.count ?? 64, (bodySize * 4 + 2) / 3 % 64, "body \(bodySize)")
            XCTAssertTrue(lines.dropLast().allSatisfy { $0.count == 64 }, "body \(bodySize)")
            var reader = AgeHeader.LineReader(text)
            _ = try reader.nextLine()
            XCTAssertEqual(try AgeStanza(readingFrom: &reader), stanza, "body \(bodySize)")
            XCTAssertTrue(reader.remaining.isEmpty)
        }
    }

    // MARK: Helpers

    /// Bytes that differ from chunk to chunk, so a reordering would show.
    static func pattern(count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 16) }
    }

    /// The header's length: through the LF after the `--- ` MAC line.
    static func headerLength(of file: [UInt8]) -> Int {
        let marker = Array("\n--- ".utf8)
        for start in 0..<(file.count - marker.count) where file[start..<(start + marker.count)].elementsEqual(marker) {
            return start + 1 + 4 + 43 + 1
        }
        return 0
    }
}
