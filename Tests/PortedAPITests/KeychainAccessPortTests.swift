import KCTestSupport
import KernelKeychain
import XCTest

/// Code written the way KeychainAccess's README uses its `Keychain`, ported to kc:
/// `Keychain(service:)` throws for a bad name, `set(_:key:)` is `set(_:forKey:)`,
/// `get`/`getString`/`getData` are `string(forKey:)`/`data(forKey:)`, `[data:]` is
/// `[bytes:]`, and `allItems()` is `items()`.
final class KeychainAccessPortTests: KeyringTestCase {
    private let token = "01234567-89ab-cdef-0123-456789abcdef"

    func testAPasswordSavedThroughTheSubscriptIsReadBackThroughIt() throws {
        let keychain = try Keychain(service: uniqueService())
        keychain["octocat"] = token
        XCTAssertEqual(keychain["octocat"], token)
        XCTAssertEqual(try keychain.string(forKey: "octocat"), token, "the subscript and the method see one item")
    }

    func testTheSetMethodAndTheGetMethodsRoundTripTextAndBytes() throws {
        let keychain = try Keychain(service: uniqueService())
        let account = "octocat"
        try keychain.set(token, forKey: account)
        XCTAssertEqual(try keychain.string(forKey: account), token)
        XCTAssertEqual(try keychain.data(forKey: account), Array(token.utf8))

        keychain[bytes: "secret"] = [0x00, 0x01, 0xff]
        XCTAssertEqual(keychain[bytes: "secret"], [0x00, 0x01, 0xff], "bytes come back exactly, NUL and all")
        XCTAssertNil(try keychain.string(forKey: "missing"), "a missing item is nil, not an error")
    }

    func testAssigningNilAndRemoveDeleteTheItem() throws {
        let keychain = try Keychain(service: uniqueService())
        keychain["octocat"] = token
        keychain["octocat"] = nil
        XCTAssertNil(keychain["octocat"])

        try keychain.set(token, forKey: "hubot")
        XCTAssertTrue(try keychain.remove("hubot"), "there was an item to remove")
        XCTAssertFalse(try keychain.remove("hubot"), "removing it again finds nothing")
        XCTAssertFalse(try keychain.contains("hubot"))
    }

    func testErrorsAreCaughtAsTypedKeychainErrors() throws {
        let keychain = try Keychain(service: uniqueService())
        do {
            try keychain.set(String(repeating: "x", count: 40_000), forKey: "octocat")
            XCTFail("a key holds at most 32767 bytes")
        } catch {
            XCTAssertEqual(error, .valueTooLarge(size: 40_000), "typed throws: no cast needed")
        }
        XCTAssertThrowsError(try keychain.set(token, forKey: "a/b")) { error in
            XCTAssertEqual(error as? KeychainError, .invalidName(kind: .item, problem: .containsSlash))
        }
    }

    func testAFluentAccessibilityPutsTheItemAtThatLevel() throws {
        let service = uniqueService()
        // One-shot, as KeychainAccess's README writes it.
        try Keychain(service: service).accessibility(.afterFirstUnlock).set(token, forKey: "one-shot")
        // A keychain made once and assigned through.
        let keychain = try Keychain(service: service).accessibility(.afterFirstUnlock)
        keychain["instance"] = token

        let plain = try Keychain(service: service)
        XCTAssertEqual(try plain.item("one-shot")?.accessibility, .afterFirstUnlock)
        XCTAssertEqual(try plain.item("instance")?.accessibility, .afterFirstUnlock)
        XCTAssertEqual(try Keychain(service: service)["instance"], token, "reads find an item at any level")
    }

    func testAnAppleAccessGroupIsNotAUnixGroupAndIsRefused() throws {
        XCTAssertThrowsError(try Keychain(service: uniqueService(), accessGroup: "12ABCD3E4F.shared")) { error in
            XCTAssertEqual(error as? KeychainError, .unknownGroup("12ABCD3E4F.shared"))
        }
    }

    func testAllKeysAndAllItemsListWhatWasStoredByName() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        keychain["octocat"] = token
        keychain["hubot"] = "another"

        XCTAssertEqual(try keychain.allKeys(), ["hubot", "octocat"], "sorted by their bytes")
        let items = try keychain.items()
        XCTAssertTrue(items.map(\.name) == ["hubot", "octocat"])
        for item in items {
            XCTAssertTrue(item.service == service, "\(item.service) is the service named by the String")
            XCTAssertEqual(item.accessibility, .whenUnlocked, "kc's default level")
            XCTAssertEqual(item.size, try keychain.data(forKey: item.name)?.count)
        }
    }
}
