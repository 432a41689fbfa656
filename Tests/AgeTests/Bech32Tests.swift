import XCTest
@testable import Age

/// Keys as text: `age1…` recipients and `AGE-SECRET-KEY-1…` identities in Bech32.
final class Bech32Tests: XCTestCase {
    /// The X25519 example from the age specification.
    static let specIdentity = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"
    static let specRecipient = "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj"

    func testTheSpecificationsExampleKeysParseAndEncodeBack() throws {
        let identity = try AgeX25519Identity(parsing: Self.specIdentity)
        XCTAssertEqual(identity.encoded, Self.specIdentity)
        XCTAssertEqual(identity.secretKey, [UInt8](repeating: 0x42, count: 32))
        XCTAssertEqual(identity.recipient.encoded, Self.specRecipient)
        XCTAssertEqual(try AgeX25519Recipient(parsing: Self.specRecipient), identity.recipient)
        XCTAssertEqual("\(identity.recipient)", Self.specRecipient)
    }

    func testGeneratedKeysRoundTripThroughTheirText() throws {
        for _ in 0..<20 {
            let identity = AgeX25519Identity.generate()
            XCTAssertTrue(identity.encoded.hasPrefix("AGE-SECRET-KEY-1"))
            XCTAssertEqual(identity.encoded, identity.encoded.uppercased())
            let parsed = try AgeX25519Identity(parsing: identity.encoded)
            XCTAssertEqual(parsed.secretKey, identity.secretKey)
            XCTAssertEqual(parsed.recipient, identity.recipient)
            XCTAssertEqual(try AgeX25519Identity(secretKey: identity.secretKey).recipient, identity.recipient)
            XCTAssertTrue(identity.recipient.encoded.hasPrefix("age1"))
            XCTAssertEqual(try AgeX25519Recipient(parsing: identity.recipient.encoded), identity.recipient)
        }
    }

    func testBech32RoundTripsAnyDataLongerThanBIP173Allows() throws {
        for count in [0, 1, 5, 32, 100] {
            let data = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 37) }
            let text = Bech32.encode(humanReadablePart: Array("test".utf8), data: data)
            let decoded = try Bech32.decode(text[...])
            XCTAssertEqual(decoded.humanReadablePart, Array("test".utf8))
            XCTAssertEqual(decoded.data, data)
        }
    }

    func testBIP173ValidChecksumsDecode() throws {
        // Valid strings from BIP 173's test vectors (data ignored, checksum checked).
        for text in ["A12UEL5L", "a12uel5l", "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw", "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w", "?1ezyfcl"] {
            XCTAssertNoThrow(try Bech32.decode(Array(text.utf8)[...]), text)
        }
    }

    func testABadChecksumIsRefused() {
        var text = Array(Self.specRecipient.utf8)
        text[10] = text[10] == UInt8(ascii: "q") ? UInt8(ascii: "p") : UInt8(ascii: "q")
        XCTAssertThrowsError(try AgeX25519Recipient(parsing: String(decoding: text, as: UTF8.self))) { error in
            guard case .invalidKey(let reason) = error as? AgeError else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("checksum"), reason)
        }
        // The same data under the Bech32m constant is not Bech32.
        XCTAssertThrowsError(try Bech32.decode(Array("a1lqfn3a".utf8)[...]))
    }

    func testMixedCaseIsRefused() {
        let mixed = "AGE-SECRET-KEY-1gfpyysjzgfpyysjzgfpyysjzgfpyysjzgfpyysjzgfpyysjzgfpq4egaex"
        XCTAssertThrowsError(try AgeX25519Identity(parsing: mixed)) { error in
            XCTAssertEqual(error as? AgeError, .invalidKey("mixed upper and lower case"))
        }
        XCTAssertThrowsError(try AgeX25519Recipient(parsing: "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwJ"))
    }

    func testKeysInTheWrongCaseOrOfTheWrongKindAreRefused() {
        // age takes identities upper case and recipients lower case only.
        XCTAssertThrowsError(try AgeX25519Identity(parsing: Self.specIdentity.lowercased()))
        XCTAssertThrowsError(try AgeX25519Recipient(parsing: Self.specRecipient.uppercased()))
        XCTAssertThrowsError(try AgeX25519Recipient(parsing: Self.specIdentity))
        XCTAssertThrowsError(try AgeX25519Identity(parsing: Self.specRecipient))
        XCTAssertThrowsError(try AgeX25519Recipient(parsing: ""))
        XCTAssertThrowsError(try AgeX25519Recipient(parsing: "age1"))
        XCTAssertThrowsError(try AgeX25519Identity(secretKey: [1, 2, 3]))
        // Bech32 of 31 bytes under "age".
        let short = String(decoding: Bech32.encode(humanReadablePart: Array("age".utf8), data: [UInt8](repeating: 1, count: 31)), as: UTF8.self)
        XCTAssertThrowsError(try AgeX25519Recipient(parsing: short))
    }

    func testIdentityFilesSkipCommentsAndBlankLines() throws {
        let first = AgeX25519Identity.generate()
        let second = AgeX25519Identity.generate()
        let text = """
        # created: 2024-01-01T00:00:00Z
        # public key: \(first.recipient)
        \(first.encoded)

        # another\r
        \(second.encoded)\r

        """
        let identities = try Age.identities(inIdentityFile: Array(text.utf8))
        XCTAssertEqual(identities.map(\.recipient), [first.recipient, second.recipient])
    }

    func testIdentityFilesNameTheBadLineButNotItsText() {
        let text = "# comment\n\(AgeX25519Identity.generate().encoded)\nAGE-SECRET-KEY-1NOTAKEY\n"
        XCTAssertThrowsError(try Age.identities(inIdentityFile: Array(text.utf8))) { error in
            guard case .invalidKey(let reason) = error as? AgeError else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.hasPrefix("identity file line 3:"), reason)
            XCTAssertFalse(reason.contains("NOTAKEY"), reason)
        }
        XCTAssertThrowsError(try Age.identities(inIdentityFile: Array("# only a comment\n\n".utf8))) { error in
            guard case .invalidKey = error as? AgeError else { return XCTFail("\(error)") }
        }
    }

    func testCanonicalBase64RefusesPaddingAndStrayBits() {
        XCTAssertEqual(CanonicalBase64.decode(Array("QUFB".utf8)[...]), Array("AAA".utf8))
        XCTAssertEqual(CanonicalBase64.decode(Array("QUE".utf8)[...]), Array("AA".utf8))
        XCTAssertEqual(CanonicalBase64.decode(Array("QQ".utf8)[...]), Array("A".utf8))
        XCTAssertEqual(CanonicalBase64.decode([][...]), [])
        for text in ["QUE=", "QQ==", "QUF", "QR", "Q", "QU\nE", "QU E", "QUE\r"] {
            XCTAssertNil(CanonicalBase64.decode(Array(text.utf8)[...]), text)
        }
        for count in 0..<70 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 101 &+ 13) }
            let text = CanonicalBase64.encode(bytes)
            XCTAssertEqual(text.count, CanonicalBase64.encodedLength(ofByteCount: count))
            XCTAssertEqual(CanonicalBase64.decode(text[...]), bytes)
        }
    }
}
