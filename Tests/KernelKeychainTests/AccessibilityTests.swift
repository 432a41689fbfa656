import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// Where items land, checked from outside with the real `keyctl`.
final class AccessibilityTests: KeyringTestCase {
    /// The persistent keyring grants its uid only view and read, so keyctl searches it
    /// as a possessor: `get_persistent` links it into this test's own session keyring.
    private var persistentAnchor: String {
        get throws { try keyctl("get_persistent", "@s").output.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// The serial of the keyring `description` linked directly in `anchor`, if any.
    private func directRing(_ description: String, in anchor: String) throws -> String? {
        guard let serial = keyctlSearch(anchor, "keyring", description) else { return nil }
        let linked = try keyctl("rlist", anchor).output.split(whereSeparator: \.isWhitespace).map(String.init)
        return linked.contains(serial) ? serial : nil
    }

    /// The anchors ("@s", "@u", "persistent") whose service keyring holds the item.
    private func homes(of key: String, in service: String, deviceOnly: Bool = false) throws -> [String] {
        let description = (deviceOnly ? "kc.local:" : "kc:") + service
        var found: [String] = []
        for (label, anchor) in [("@s", "@s"), ("@u", "@u"), ("persistent", try persistentAnchor)] {
            if let ring = try directRing(description, in: anchor), keyctlSearch(ring, "user", key) != nil {
                found.append(label)
            }
        }
        return found
    }

    func testEachLevelLandsInItsAnchorKeyring() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .whenUnlocked).set("s", forKey: "session")
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("u", forKey: "user")
        try Keychain(service: service, accessibility: .always).set("p", forKey: "persistent")
        XCTAssertEqual(try homes(of: "session", in: service), ["@s"])
        XCTAssertEqual(try homes(of: "user", in: service), ["@u"])
        XCTAssertEqual(try homes(of: "persistent", in: service), ["persistent"])
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "persistent"), "p", "reads find an item at any level")
        XCTAssertEqual(try keychain.items().map(\.accessibility), [.always, .whenUnlocked, .afterFirstUnlock])
    }

    func testKeyctlSeesTheExactBytesAndOwnerOnlyPermissions() throws {
        let service = uniqueService()
        try Keychain(service: service).set("tok\nen", forKey: "token")
        let ring = try XCTUnwrap(try directRing("kc:" + service, in: "@s"))
        let item = try XCTUnwrap(keyctlSearch(ring, "user", "token"))
        XCTAssertEqual(try keyctl("pipe", item).output, "tok\nen")
        XCTAssertEqual(try keyctl("rdescribe", item).output, "user;\(getuid());\(getgid());003f0000;token\n")
        XCTAssertEqual(try keyctl("rdescribe", ring).output, "keyring;\(getuid());\(getgid());003f0000;kc:\(service)\n")
    }

    func testKeyctlWrittenItemsAreReadByKeychain() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("placeholder", forKey: "other")
        let ring = try XCTUnwrap(try directRing("kc:" + service, in: "@s"))
        XCTAssertEqual(try keyctl("padd", "user", "from-keyctl", ring, input: Array("bytes".utf8)).status, 0)
        XCTAssertEqual(try keychain.string(forKey: "from-keyctl"), "bytes")
    }

    func testMovingBetweenLevelsKeepsOneCopy() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        for level in [Accessibility.always, .afterFirstUnlock, .whenUnlocked, .always, .whenUnlockedThisDeviceOnly] {
            try keychain.accessibility(level).set("at \(level)", forKey: "token")
            XCTAssertEqual(try keychain.string(forKey: "token"), "at \(level)")
            let portable = try homes(of: "token", in: service)
            let local = try homes(of: "token", in: service, deviceOnly: true)
            XCTAssertEqual(portable.count + local.count, 1, "one copy after moving to \(level): \(portable) \(local)")
            XCTAssertEqual(try keychain.items().map(\.accessibility), [level])
        }
    }

    func testThisDeviceOnlySurvivesARoundTrip() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service, accessibility: .afterFirstUnlockThisDeviceOnly)
        try keychain.set("local", forKey: "k")
        XCTAssertEqual(try homes(of: "k", in: service, deviceOnly: true), ["@u"])
        XCTAssertEqual(try keychain.items().first?.accessibility, .afterFirstUnlockThisDeviceOnly)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "local")
        XCTAssertEqual(try keychain.items().first?.accessibility?.isThisDeviceOnly, true)
    }

    func testKeyctlAndLibraryAgreeOnTheKeyringLayoutDescribedInTheREADME() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("v", forKey: "token")
        let ring = try XCTUnwrap(keyctlSearch("@u", "keyring", "kc:" + service))
        let item = try XCTUnwrap(keyctlSearch("@u", "user", "token").flatMap { _ in keyctlSearch(ring, "user", "token") })
        XCTAssertEqual(try keyctl("print", item).output, "v\n")
    }
}
