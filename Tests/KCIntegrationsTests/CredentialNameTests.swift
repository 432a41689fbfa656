@testable import KCIntegrations
import Keyrings
import XCTest

/// How the credential helpers write URLs and user names as service and item names:
/// `/` as `%2F`, `%` as `%25`, exactly and reversibly.
final class CredentialNameTests: XCTestCase {
    private func encoded(_ text: String, escapingColon: Bool = false) -> String {
        String(decoding: CredentialName.encode(Array(text.utf8), escapingColon: escapingColon), as: UTF8.self)
    }

    private func decoded(_ text: String) -> String? {
        CredentialName.decode(Array(text.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    func testSlashAndPercentAreEscapedAndNothingElse() {
        XCTAssertEqual(encoded("https://index.docker.io/v1/"), "https:%2F%2Findex.docker.io%2Fv1%2F")
        XCTAssertEqual(encoded("100%/x"), "100%25%2Fx")
        XCTAssertEqual(encoded("127.0.0.1:5000"), "127.0.0.1:5000", "names stay readable")
        XCTAssertEqual(encoded("a:b", escapingColon: true), "a%3Ab")
        XCTAssertEqual(encoded("é ?#@"), "é ?#@")
    }

    func testEscapesReadBackExactly() {
        XCTAssertEqual(decoded("https:%2F%2Findex.docker.io%2Fv1%2F"), "https://index.docker.io/v1/")
        XCTAssertEqual(decoded("100%25%2Fx"), "100%/x")
        XCTAssertEqual(decoded("a%3Ab"), "a:b")
        XCTAssertEqual(decoded("%2E%2E"), "..")
        XCTAssertEqual(decoded(""), "")
    }

    /// Every `%` in an encoded name starts one of the escapes, so the helpers' own
    /// records (git's `%latest`, `alice%oauth_refresh_token`) are never taken for users.
    func testANameWithAnyOtherPercentIsNotAnEncodedPart() {
        for name in ["%latest", "alice%oauth_refresh_token", "%41", "%2f", "%2", "%", "a%2", "%G0", "%20"] {
            XCTAssertNil(decoded(name), name)
        }
    }

    func testEveryPartReadsBackAsItWasWritten() {
        var samples: [[UInt8]] = [Array(0...255), Array("%2F".utf8), Array("%25%2F/%".utf8), Array("..".utf8)]
        for _ in 0..<200 {
            samples.append((0..<Int.random(in: 0...24)).map { _ in
                [UInt8(ascii: "%"), UInt8(ascii: "/"), UInt8(ascii: "2"), UInt8(ascii: "F"), UInt8(ascii: "5"), UInt8.random(in: 0...255)]
                    .randomElement()!
            })
        }
        for sample in samples {
            XCTAssertEqual(CredentialName.decode(CredentialName.encode(sample)), sample, "\(sample)")
            if let item = CredentialName.item(sample) {
                XCTAssertEqual(CredentialName.decode(item.bytes), sample, "\(sample)")
                XCTAssertFalse(item.bytes.contains(UInt8(ascii: "/")))
            }
        }
    }

    func testAnItemNameIsNeverDotDotOrEmptyOrTooLong() {
        XCTAssertEqual(CredentialName.item(Array(".".utf8)), "%2E")
        XCTAssertEqual(CredentialName.item(Array("..".utf8)), "%2E%2E")
        XCTAssertEqual(CredentialName.item(Array("...".utf8)), "...", "only a name that would be . or ..")
        XCTAssertNil(CredentialName.item([]))
        XCTAssertNotNil(CredentialName.item(Array(repeating: UInt8(ascii: "a"), count: 255)))
        XCTAssertNil(CredentialName.item(Array(repeating: UInt8(ascii: "a"), count: 256)))
        XCTAssertNil(CredentialName.item(Array(repeating: UInt8(ascii: "/"), count: 86)), "258 bytes once escaped")
    }
}
