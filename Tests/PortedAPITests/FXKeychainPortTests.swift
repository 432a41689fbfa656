import KCTestSupport
import KernelKeychain
import XCTest

/// Code written the way FXKeychain's README uses it, ported to kc: `defaultKeychain` is
/// `Keychain.default`, `setObject:forKey:` and `objectForKey:` of plist values are
/// `set(json:forKey:)` and `json(_:forKey:)` of `Codable` ones (text stays plain UTF-8,
/// as FXKeychain stores strings), a nil service is `Keychain.anyService`, and
/// `accessibility` is a property that changes later writes.
final class FXKeychainPortTests: KeyringTestCase {
    func testTheDefaultKeychainStoresUnderTheProgramsOwnService() throws {
        let keychain = try Keychain.default
        let service = try XCTUnwrap(keychain.serviceName)
        servicesToRemove.append(service)
        let key = uniqueService()  // unique, so the item is this test's alone

        keychain[key] = "secret"
        XCTAssertEqual(try Keychain(service: service).string(forKey: key), "secret")
        XCTAssertEqual(try Keychain.default[key], "secret", "every use of the default keychain is the same service")
        XCTAssertTrue(try Keychain.services().contains(service))
    }

    func testObjectForKeyReturnsWhatSetObjectStored() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("secret", forKey: "password")
        XCTAssertEqual(try keychain.data(forKey: "password"), Array("secret".utf8), "text is stored as its UTF-8 bytes")

        let login = ["user": "deploy", "host": "db.example.com"]
        try keychain.set(json: login, forKey: "login")
        XCTAssertEqual(try keychain.json([String: String].self, forKey: "login"), login)

        try keychain.set(json: [1, 2, 3], forKey: "pins")
        XCTAssertEqual(try keychain.json([Int].self, forKey: "pins"), [1, 2, 3])
        XCTAssertNil(try keychain.json([Int].self, forKey: "missing"))
    }

    func testSettingANilObjectAndRemoveObjectForKeyRemoveTheItem() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set(json: ["a", "b"], forKey: "list")
        try keychain.set(json: nil as [String]?, forKey: "list")
        XCTAssertFalse(try keychain.contains("list"), "nil removes the key, as setObject:nil does")

        keychain["password"] = "secret"
        keychain["password"] = nil  // objectForKeyedSubscript's nil
        XCTAssertNil(keychain["password"])

        try keychain.set("secret", forKey: "token")
        XCTAssertTrue(try keychain.remove("token"))
        XCTAssertNil(try keychain.string(forKey: "token"))
    }

    func testAWildcardKeychainReadsFromWhicheverServiceHoldsTheKey() throws {
        let service = uniqueService()
        let key = uniqueService()  // no other service of this uid has it
        try Keychain(service: service).set("found", forKey: key)
        XCTAssertEqual(try Keychain.anyService.string(forKey: key), "found")
        XCTAssertThrowsError(try Keychain.anyService.set("x", forKey: key)) { error in
            XCTAssertEqual(error as? KeychainError, .serviceRequired, "the wildcard only reads")
        }
    }

    func testChangingAccessibilityAffectsLaterWritesOnly() throws {
        var keychain = try Keychain(service: uniqueService())
        try keychain.set("before", forKey: "early")
        keychain.accessibility = .afterFirstUnlock
        try keychain.set("after", forKey: "late")

        XCTAssertEqual(try keychain.item("early")?.accessibility, .whenUnlocked, "an item not written again stays")
        XCTAssertEqual(try keychain.item("late")?.accessibility, .afterFirstUnlock)
        try keychain.set("again", forKey: "early")
        XCTAssertEqual(try keychain.item("early")?.accessibility, .afterFirstUnlock, "re-writing it moves it")
    }

    func testThisDeviceOnlyItemsAreNeverExported() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service, accessibility: .whenUnlockedThisDeviceOnly)
        keychain["password"] = "secret"
        XCTAssertEqual(try keychain.item("password")?.accessibility, .whenUnlockedThisDeviceOnly)

        let export = try Keychain.export(services: [service])
        XCTAssertTrue(export.items.isEmpty)
        XCTAssertEqual(export.deviceOnlySkipped, 1)
    }
}
