import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// `kc import` of an archive that names one item twice: which value would win is a
/// guess, so the archive is refused whole, as a dotenv file that sets a name twice is.
final class ImportDuplicateTests: KeyringTestCase {
    private func archive(_ entries: [(service: String, name: String, value: String)]) -> [UInt8] {
        let items = entries.map { entry in
            #"{"service": "\#(entry.service)", "name": "\#(entry.name)", "access": "when-unlocked", "#
                + #""secondsLeft": null, "value": "\#(Data(entry.value.utf8).base64EncodedString())"}"#
        }
        return Array(#"{"format": "kc-export", "version": 1, "items": [\#(items.joined(separator: ",\n"))]}"#.utf8)
    }

    func testAnArchiveNamingAnItemTwiceIsRefusedAndChangesNothing() throws {
        let service = uniqueService()
        try Keychain(service: service).set("untouched", forKey: "token")
        let input = archive([
            (service, "fresh", "f"),
            (service, "token", "first"),
            (service, "token", "second"),
        ])
        for arguments in [["import"], ["import", "--overwrite"], ["import", "--dry-run"], ["import", "--service", service]] {
            let result = try kc(arguments, input: input)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result)")
            XCTAssertEqual(result.standardError,
                           "kc: nothing imported: items[2]: names item '\(service)/token' again (first in items[1]); remove one of them\n",
                           "\(arguments)")
            XCTAssertEqual(result.output, "", "\(arguments)")
            XCTAssertEqual(try Keychain(service: service).allKeys(), ["token"], "\(arguments): nothing added")
            XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "untouched", "\(arguments)")
        }
    }

    func testTheSameNameInTwoServicesIsNotADuplicate() throws {
        let first = uniqueService(), second = uniqueService()
        let result = try kc(["import"], input: archive([(first, "token", "1"), (second, "token", "2")]))
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try Keychain(service: first).string(forKey: "token"), "1")
        XCTAssertEqual(try Keychain(service: second).string(forKey: "token"), "2")
    }

    func testNamesThatDifferInBytesButNotInSwiftEqualityAreTwoItems() throws {
        // NFC and NFD "café" are equal to Swift's == but are two keys to the kernel.
        let service = uniqueService()
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        let result = try kc(["import"], input: archive([(service, composed, "nfc"), (service, decomposed, "nfd")]))
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertTrue(result.standardError.contains("2 added"), result.standardError)
        XCTAssertEqual(try Keychain(service: service).string(forKey: composed), "nfc")
        XCTAssertEqual(try Keychain(service: service).string(forKey: decomposed), "nfd")
    }

    func testImportOfOneServiceMatchesItsNameByteForByte() throws {
        // `--service` picks the service whose name has exactly these bytes.
        let base = uniqueService()
        let composed = base + ".caf\u{E9}", decomposed = base + ".cafe\u{301}"
        servicesToRemove += [KeyName(composed), KeyName(decomposed)]
        let input = archive([(composed, "token", "nfc"), (decomposed, "token", "nfd")])
        let result = try kc(["import", "--service", decomposed], input: input)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertTrue(result.standardError.contains("imported 1 item(s): 1 added"), result.standardError)
        XCTAssertEqual(try Keychain(service: decomposed).string(forKey: "token"), "nfd")
        XCTAssertNil(try Keychain(service: composed).string(forKey: "token"), "the other service is left out")
    }
}
