import KCTestSupport
import KernelKeychain
import XCTest

/// Code written the way Lockbox's README uses it, ported to kc: a Lockbox with its own
/// key prefix is a `Keychain` of that service, `setString:forKey:` and `stringForKey:`
/// are `set(_:forKey:)` and `string(forKey:)`, and the array, set, dictionary, date and
/// `archiveObject:forKey:` methods are `set(json:forKey:)` and `json(_:forKey:)`.
final class LockboxPortTests: KeyringTestCase {
    private struct Session: Codable, Equatable {
        var user: String
        var scopes: [String]
        var expiresAt: Double
    }

    func testSetStringAndStringForKeyRoundTrip() throws {
        let lockbox = try Keychain(service: uniqueService())
        try lockbox.set("s3cret", forKey: "MyKeyString")
        XCTAssertEqual(try lockbox.string(forKey: "MyKeyString"), "s3cret")
        XCTAssertNil(try lockbox.string(forKey: "NoSuchKey"), "a missing key is nil")
    }

    func testArraysSetsDictionariesAndDatesRoundTrip() throws {
        let lockbox = try Keychain(service: uniqueService())
        try lockbox.set(json: ["one", "two"], forKey: "MyKeyArray")
        try lockbox.set(json: Set(["red", "green"]), forKey: "MyKeySet")
        try lockbox.set(json: ["key": "value"], forKey: "MyKeyDictionary")
        try lockbox.set(json: 1_700_000_000.5, forKey: "MyKeyDate")  // a date, as seconds since 1970

        XCTAssertEqual(try lockbox.json([String].self, forKey: "MyKeyArray"), ["one", "two"])
        XCTAssertEqual(try lockbox.json(Set<String>.self, forKey: "MyKeySet"), ["red", "green"])
        XCTAssertEqual(try lockbox.json([String: String].self, forKey: "MyKeyDictionary"), ["key": "value"])
        XCTAssertEqual(try lockbox.json(Double.self, forKey: "MyKeyDate"), 1_700_000_000.5)
    }

    func testAnArchivedObjectIsUnarchivedEqual() throws {
        let lockbox = try Keychain(service: uniqueService())
        let session = Session(user: "deploy", scopes: ["read", "write"], expiresAt: 1_700_003_600)
        try lockbox.set(json: session, forKey: "session")
        XCTAssertEqual(try lockbox.json(Session.self, forKey: "session"), session)
        XCTAssertThrowsError(try lockbox.json([Int].self, forKey: "session"), "bytes of another type are an error, not nil")
    }

    func testArchivingNilRemovesTheItem() throws {
        let lockbox = try Keychain(service: uniqueService())
        try lockbox.set(json: ["one"], forKey: "MyKeyArray")
        try lockbox.set(json: nil as [String]?, forKey: "MyKeyArray")
        XCTAssertFalse(try lockbox.contains("MyKeyArray"))
        XCTAssertNil(try lockbox.json([String].self, forKey: "MyKeyArray"))
    }

    func testAStringSetWithAnAccessibilityIsStoredAtIt() throws {
        let service = uniqueService()
        try Keychain(service: service).accessibility(.always).set("s3cret", forKey: "MyKeyString")
        let lockbox = try Keychain(service: service)
        XCTAssertEqual(try lockbox.item("MyKeyString")?.accessibility, .always)
        try lockbox.set("changed", forKey: "MyKeyString")
        XCTAssertEqual(try lockbox.item("MyKeyString")?.accessibility, .always, "a new value keeps the item's level")
        XCTAssertEqual(try lockbox.string(forKey: "MyKeyString"), "changed")
    }

    func testTwoKeyPrefixesAreTwoSeparateLockboxes() throws {
        let first = try Keychain(service: uniqueService())
        let second = try Keychain(service: uniqueService())
        try first.set("1", forKey: "MyKeyString")
        try second.set("2", forKey: "MyKeyString")
        XCTAssertEqual(try first.string(forKey: "MyKeyString"), "1")
        XCTAssertEqual(try second.string(forKey: "MyKeyString"), "2")
    }
}
