import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// Names are bytes (DESIGN §3): kept exactly, compared byte for byte, whatever they are.
final class ByteNameTests: KeyringTestCase {
    private let withFF = KeyName(bytes: Array("a".utf8) + [0xff] + Array("b".utf8))
    private let withFE = KeyName(bytes: Array("a".utf8) + [0xfe] + Array("b".utf8))

    func testItemNamesThatAreNotUTF8AreTwoItemsKeptExactly() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("first", forKey: withFF)
        try keychain.set("second", forKey: withFE)
        XCTAssertEqual(try keychain.string(forKey: withFF), "first", "the second name did not overwrite the first")
        XCTAssertEqual(try keychain.string(forKey: withFE), "second")
        XCTAssertEqual(try keychain.allKeyNames(), [withFE, withFF], "listed byte for byte, in byte order")
        XCTAssertEqual(try keychain.items().map(\.name), [withFE, withFF])
        XCTAssertTrue(try keychain.remove(withFF))
        XCTAssertEqual(try keychain.allKeyNames(), [withFE], "removing one leaves the other")
        XCTAssertNil(try keychain.data(forKey: withFF))
    }

    func testAServiceNameThatIsNotUTF8IsItsOwnService() throws {
        let first = uniqueServiceName(endingWith: [0xff])
        let second = KeyName(bytes: first.bytes.dropLast() + [0xfe])
        servicesToRemove.append(second)
        try Keychain(service: first).set("1", forKey: "k")
        try Keychain(service: second).set("2", forKey: "k")
        XCTAssertEqual(try Keychain(service: first).string(forKey: "k"), "1")
        XCTAssertEqual(try Keychain(service: second).string(forKey: "k"), "2")
        let services = try Keychain.services()
        XCTAssertTrue(services.contains(first) && services.contains(second), "\(services)")
        XCTAssertNotEqual(try Keychain(service: first), try Keychain(service: second))
        XCTAssertEqual(try keyctlSearchBytes(KeyName("kc:") + first), true, "the keyring is described kc:<the exact bytes>")
    }

    func testAnItemKeyctlAddedWithANameThatIsNotUTF8CanBeReadAndRemoved() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("x", forKey: "seed")  // makes the service keyring
        let ring = try XCTUnwrap(keyctlSearch("@s", "keyring", "kc:\(service)"))
        let added = try runCommand("/bin/bash", ["-c", "printf 'from keyctl' | keyctl padd user $'a\\xffb' \(ring)"])
        XCTAssertEqual(added.status, 0, "\(added)")
        XCTAssertEqual(try keychain.string(forKey: withFF), "from keyctl")
        XCTAssertNil(try keychain.data(forKey: withFE), "a\\xfeb is another name")
        XCTAssertTrue(try keychain.allKeyNames().contains(withFF))
        XCTAssertTrue(try keychain.remove(withFF))
        XCTAssertNotEqual(try runCommand("/bin/bash", ["-c", "keyctl search \(ring) user $'a\\xffb'"]).status, 0, "removed in the kernel")
    }

    func testNamesCompareByteForByteNotBySwiftStringEquality() throws {
        let composed = "caf\u{e9}", decomposed = "cafe\u{301}"
        XCTAssertEqual(composed, decomposed, "Swift calls the two spellings equal")
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("nfc", forKey: composed)
        try keychain.set("nfd", forKey: decomposed)
        XCTAssertEqual(try keychain.string(forKey: composed), "nfc")
        XCTAssertEqual(try keychain.string(forKey: decomposed), "nfd")
        XCTAssertEqual(try keychain.allKeyNames().count, 2)
        let service = uniqueService()
        XCTAssertNotEqual(try Keychain(service: service + composed), try Keychain(service: service + decomposed),
                          "keychains of the two spellings are two keychains")
        XCTAssertEqual(Set([try Keychain(service: service + composed), try Keychain(service: service + decomposed)]).count, 2)
    }

    func testBadBytesInANameAreRefusedBeforeAnyKernelCall() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("kept", forKey: withFF)
        for (name, problem) in [(KeyName(bytes: [0x61, 0x2f, 0xff]), NameProblem.containsSlash),
                                (KeyName(bytes: [0x61, 0x00, 0xff]), .containsNUL),
                                (KeyName(bytes: [0x2e, 0x2e]), .reserved("..")),
                                (KeyName(bytes: [UInt8](repeating: 0xff, count: 256)), .tooLong(bytes: 256))] {
            XCTAssertThrowsError(try keychain.set("x", forKey: name)) { error in
                XCTAssertEqual(error as? KeychainError, .invalidName(kind: .item, problem: problem))
            }
        }
        XCTAssertEqual(try keychain.allKeyNames(), [withFF], "nothing stored was harmed")
        XCTAssertEqual(try keychain.string(forKey: withFF), "kept")
    }

    func testMessagesShowBytesThatAreNotUTF8AsEscapes() {
        XCTAssertEqual(withFF.description, "a\\xffb")
        XCTAssertEqual(KeyName(bytes: [0xe2, 0x9c, 0x93, 0xc3]).description, "✓\\xc3", "valid sequences stay text")
        XCTAssertEqual(KeyName("plain").description, "plain")
        XCTAssertNil(withFF.text)
    }

    func testAnArchiveCarriesNamesThatAreNotUTF8Exactly() throws {
        let service = uniqueServiceName(endingWith: [0xfe])
        let item = ExportedItem(service: service, name: withFF, level: .afterFirstUnlock, secondsLeft: nil, value: [1, 2])
        let plain = ExportedItem(service: "svc", name: "token", level: .whenUnlocked, secondsLeft: nil, value: [3])
        let json = KeychainArchive.encodeJSON([item, plain])
        let text = String(decoding: json, as: UTF8.self)
        XCTAssertTrue(text.contains("\"nameBase64\" : \"Yf9i\""), text)
        XCTAssertTrue(text.contains("\"serviceBase64\""), text)
        XCTAssertEqual(text.components(separatedBy: "Base64").count - 1, 2, "only the names that need it: \(text)")
        XCTAssertEqual(try KeychainArchive.decodeJSON(json), [item, plain])
    }

    func testExportAndImportKeepNamesThatAreNotUTF8() throws {
        let service = uniqueServiceName(endingWith: [0xff])
        try Keychain(service: service).set("v", forKey: withFE)
        let exported = try Keychain.export(services: [service]).items
        XCTAssertEqual(exported.map(\.name), [withFE])
        try Keychain(service: service).removeAll()
        try Keychain.importItems(exported, overwrite: false)
        XCTAssertEqual(try Keychain(service: service).string(forKey: withFE), "v")
    }

    /// Whether `keyctl search @s keyring` finds this exact description (passed as bytes).
    private func keyctlSearchBytes(_ description: KeyName) throws -> Bool {
        let escaped = description.bytes.map { String(format: "\\x%02x", $0) }.joined()
        return try runCommand("/bin/bash", ["-c", "keyctl search @s keyring $'\(escaped)' >/dev/null"]).status == 0
    }
}
