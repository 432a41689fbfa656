import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// From Swift, a new value keeps what the item is (issue 25): a `Keychain` with no
/// accessibility of its own keeps an existing item's level, device-only flag and
/// deadline (`keychain["k"] = "v"` as `set`); one given an accessibility or a timeout
/// applies it. New items go to `.whenUnlocked`. With a vault, the file follows.
final class KeepWhatTheItemIsTests: VaultTestCase {
    /// Runs `body` with this process's writes going to `vault` (its `XDG_DATA_HOME`).
    private func writing<R>(to vault: VaultFixture, _ body: () throws -> R) rethrows -> R {
        setenv("XDG_DATA_HOME", vault.dataHome, 1)
        defer { setenv("XDG_DATA_HOME", Self.noVaultDataHome, 1) }
        return try body()
    }

    private func level(_ service: String, _ name: String) throws -> Accessibility? {
        try Keychain(service: service).item(name)?.accessibility
    }

    func testTheSubscriptAndSetKeepAnAlwaysItemsLevelAndDeadline() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .always, timeout: .seconds(7200)).set("old", forKey: "cron")
        let deadline = try XCTUnwrap(Keychain(service: service).deadline(forKey: "cron"))

        let plain = try Keychain(service: service)
        XCTAssertFalse(plain.choosesAccessibility)
        plain["cron"] = "by subscript"
        XCTAssertEqual(try level(service, "cron"), .always)
        XCTAssertEqual(try plain.deadline(forKey: "cron"), deadline)
        try plain.set("by set", forKey: "cron")
        XCTAssertEqual(try level(service, "cron"), .always)
        XCTAssertEqual(try plain.deadline(forKey: "cron"), deadline)
        XCTAssertEqual(try plain.string(forKey: "cron"), "by set")
    }

    func testAKeychainGivenAnAccessibilityPutsTheItemThere() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("old", forKey: "k")
        let chosen = try Keychain(service: service).accessibility(.always)
        XCTAssertTrue(chosen.choosesAccessibility)
        chosen["k"] = "new"
        XCTAssertEqual(try level(service, "k"), .always)
        try Keychain(service: service, accessibility: .whenUnlocked).set("newer", forKey: "k")
        XCTAssertEqual(try level(service, "k"), .whenUnlocked, "an explicit .whenUnlocked is a choice too")
    }

    func testATimeoutChangesTheDeadlineAndKeepsTheLevel() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .afterFirstUnlockThisDeviceOnly).set("old", forKey: "k")
        XCTAssertNil(try Keychain(service: service).deadline(forKey: "k"))
        try Keychain(service: service).timeout(.seconds(3600)).set("new", forKey: "k")
        XCTAssertEqual(try level(service, "k"), .afterFirstUnlockThisDeviceOnly)
        XCTAssertNotNil(try Keychain(service: service).deadline(forKey: "k"))
    }

    func testThisDeviceOnlyKeepsTheLevel() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .always).set("old", forKey: "k")
        try Keychain(service: service).thisDeviceOnly().set("new", forKey: "k")
        XCTAssertEqual(try level(service, "k"), .alwaysThisDeviceOnly)
        try Keychain(service: service).thisDeviceOnly(false).set("newer", forKey: "k")
        XCTAssertEqual(try level(service, "k"), .always)
    }

    func testANewItemGoesToWhenUnlocked() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        XCTAssertEqual(keychain.accessibility, .whenUnlocked, "the default, for new items")
        keychain["fresh"] = "v"
        XCTAssertEqual(try level(service, "fresh"), .whenUnlocked)
        XCTAssertNil(try keychain.deadline(forKey: "fresh"))
    }

    func testWithAVaultTheFileStaysAtTheItemsLevelOrMovesWithAChoice() throws {
        let vault = try makeVault()
        let service = uniqueService()
        try writing(to: vault) {
            try Keychain(service: service, accessibility: .always).set("old", forKey: "cron")
            try Keychain(service: service)["cron"] = "new"
        }
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/cron"])
        try writing(to: vault) {
            try Keychain(service: service).accessibility(.afterFirstUnlock).set("newer", forKey: "cron")
        }
        XCTAssertEqual(vault.itemFiles(), ["after-first-unlock/\(service)/cron"])
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.loaded, ["after-first-unlock": 1])
        XCTAssertEqual(try Keychain(service: service).string(forKey: "cron"), "newer")
    }

    func testAnImportStillCarriesTheArchivesLevel() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .always, timeout: .seconds(3600)).set("old", forKey: "k")
        let item = ExportedItem(service: KeyName(service), name: KeyName("k"), level: .afterFirstUnlock, deadline: nil, value: Array("imported".utf8))
        try Keychain.importItems([item], overwrite: true)
        XCTAssertEqual(try level(service, "k"), .afterFirstUnlock, "import restores the archive's level")
        XCTAssertNil(try Keychain(service: service).deadline(forKey: "k"), "and its deadline (none)")
    }
}
