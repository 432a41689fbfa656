import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// What users of FXKeychain, Lockbox and KeychainAccess rely on when they switch: the
/// subscripts and `set(json:)` never leave a stale secret behind, and errors read well
/// wherever Foundation shows them.
final class WrapperPromisesTests: KeyringTestCase {
    private struct Credentials: Codable, Equatable {
        var user: String
        var port: Int
    }

    func testAssigningAnEmptyStringStoresItAsApplesKeychainDoes() throws {
        let keychain = try Keychain(service: uniqueService())
        keychain["token"] = "old secret"
        keychain["token"] = ""  // an emptied text field, as in FXKeychain's example apps
        XCTAssertEqual(keychain["token"], "", "the old secret is not served after assigning \"\"")
        XCTAssertTrue(try keychain.contains("token"))
        XCTAssertEqual(try keychain.item("token")?.size, 0)
        keychain["token"] = nil
        XCTAssertFalse(try keychain.contains("token"), "nil removes it")
    }

    func testAssigningNoBytesStoresAnEmptyValue() throws {
        let keychain = try Keychain(service: uniqueService())
        keychain[bytes: "blob"] = [0x01, 0x02]
        keychain[bytes: "blob"] = []
        XCTAssertEqual(keychain[bytes: "blob"], [])
        keychain[bytes: "blob"] = [0]
        XCTAssertEqual(keychain[bytes: "blob"], [0], "one NUL byte is a value of its own, not the empty one")
    }

    func testAnOversizeAssignmentRemovesTheOldValueInsteadOfServingIt() throws {
        let keychain = try Keychain(service: uniqueService())
        keychain["token"] = "old secret"
        keychain["token"] = String(repeating: "x", count: KeychainError.maximumValueSize + 1)
        XCTAssertNil(keychain["token"], "a write that cannot be stored leaves no stale value")
        XCTAssertFalse(try keychain.contains("token"))

        keychain[bytes: "blob"] = [0x01]
        keychain[bytes: "blob"] = [UInt8](repeating: 0x78, count: KeychainError.maximumValueSize + 1)
        XCTAssertNil(keychain[bytes: "blob"])

        keychain["edge"] = "old"
        let largestFits = TestQuota.hasRoom(forValueOf: KeychainError.maximumValueSize)
        keychain["edge"] = String(repeating: "y", count: KeychainError.maximumValueSize)
        if largestFits {
            XCTAssertEqual(keychain["edge"]?.utf8.count, KeychainError.maximumValueSize, "the largest value still fits")
        } else {
            XCTAssertNil(keychain["edge"], "over this uid's key quota, no stale value is served either")
        }
    }

    func testTheThrowingSettersStoreEmptyValuesToo() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("old", forKey: "token")
        try keychain.set("", forKey: "token")
        XCTAssertEqual(try keychain.string(forKey: "token"), "")
        XCTAssertEqual(try keychain.replace(Array("again".utf8), forKey: "token"), true)
        XCTAssertEqual(try keychain.string(forKey: "token"), "again")
        XCTAssertEqual(try keychain.replace([UInt8](), forKey: "token"), true, "a save of an empty file")
        XCTAssertEqual(try keychain.data(forKey: "token"), [])
    }

    func testSettingNilJSONRemovesTheItem() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set(json: Credentials(user: "deploy", port: 5432), forKey: "db")
        try keychain.set(json: nil as Credentials?, forKey: "db")
        XCTAssertFalse(try keychain.contains("db"), "nil removes the item, as in Lockbox and FXKeychain")
        XCTAssertNil(try keychain.data(forKey: "db"), "not the four bytes null")

        // Through generic code that does not know its value is optional.
        func save<Value: Encodable>(_ value: Value, as key: String) throws { try keychain.set(json: value, forKey: key) }
        try keychain.set(json: Credentials(user: "u", port: 1), forKey: "generic")
        try save(nil as Credentials?, as: "generic")
        XCTAssertFalse(try keychain.contains("generic"))
        try save(Credentials??.some(nil), as: "generic")
        XCTAssertFalse(try keychain.contains("generic"), "a nested nil is nil too")

        // Removing what is not there is not an error.
        try keychain.set(json: nil as Credentials?, forKey: "never")

        let present: Credentials? = Credentials(user: "ops", port: 22)
        try keychain.set(json: present, forKey: "db")
        XCTAssertEqual(try keychain.json(Credentials.self, forKey: "db"), present, "a present optional stores its value")
    }

    func testLocalizedDescriptionIsTheOneLineDescription() throws {
        var errors: [KeychainError] = [.emptyValue, .valueTooLarge(size: 40000), .serviceRequired]
        do {
            _ = try Keychain(service: "a/b")
            XCTFail("a service name with '/' is refused")
        } catch {
            errors.append(error)
        }
        for error in errors {
            XCTAssertEqual((error as any Error).localizedDescription, error.description)
            XCTAssertEqual(error.localizedDescription, error.description)
        }
    }

    func testNamesCompareByteForByte() throws {
        let keychain = try Keychain(service: uniqueService())
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        XCTAssertEqual(composed, decomposed, "Swift's == calls them equal")
        try keychain.set("composed", forKey: composed)
        try keychain.set("decomposed", forKey: decomposed)
        XCTAssertEqual(try keychain.string(forKey: composed), "composed")
        XCTAssertEqual(try keychain.string(forKey: decomposed), "decomposed")
        XCTAssertEqual(try keychain.allKeys().count, 2, "two items, as the kernel compares bytes")
    }
}
