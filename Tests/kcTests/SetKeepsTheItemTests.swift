import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// `kc set` of a new value keeps what the item is (issue 25): its level, device-only flag
/// and deadline, as a save through the mount does; only an option given changes one.
/// Without a vault and with one, where the item's file must stay in (or move to) its
/// level's folder.
final class SetKeepsTheItemTests: VaultTestCase {
    /// The item as the kernel has it now: level and exact deadline (kc's record).
    private func kernelItem(_ service: String, _ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> (level: String?, deadline: Int64?) {
        let keychain = try Keychain(service: service)
        let item = try XCTUnwrap(keychain.item(name), "\(service)/\(name) is in the kernel", file: file, line: line)
        return (item.accessibility?.name, try keychain.deadline(forKey: name)?.secondsSinceEpoch)
    }

    private func assertKeepsAlwaysAndItsDeadline(vault: VaultFixture, saved: Bool) throws {
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always", "--timeout", "2h"]).status, 0)
        let before = try kernelItem(service, "cron")
        XCTAssertEqual(before.level, "always")
        XCTAssertNotNil(before.deadline)

        let changed = try vault.set(service, "cron", "new")
        XCTAssertEqual(changed.status, 0, "\(changed)")
        XCTAssertEqual(changed.standardError, "", "no note: the level was not chosen")
        let after = try kernelItem(service, "cron")
        XCTAssertEqual(after.level, "always", "a new value without --access keeps the item always")
        XCTAssertEqual(after.deadline, before.deadline, "and its deadline, exactly")
        XCTAssertEqual(try vault.get(service, "cron").output, "new")
        if saved {
            XCTAssertEqual(vault.itemFiles(), ["always/\(service)/cron"], "the file stays in the always folder")
        } else {
            XCTAssertEqual(vault.itemFiles(), [])
        }
    }

    func testANewValueKeepsAnAlwaysItemsLevelAndDeadlineWithoutAVault() throws {
        try assertKeepsAlwaysAndItsDeadline(vault: makeVault(create: false), saved: false)
    }

    func testANewValueKeepsAnAlwaysItemsLevelAndDeadlineWithAVault() throws {
        try assertKeepsAlwaysAndItsDeadline(vault: makeVault(), saved: true)
    }

    func testTheKeptLevelSurvivesARebootWithAVault() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always"]).status, 0)
        XCTAssertEqual(try vault.set(service, "cron", "new").status, 0)
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.loaded, ["always": 1])
        XCTAssertEqual(try kernelItem(service, "cron").level, "always")
        XCTAssertEqual(try vault.get(service, "cron").output, "new")
    }

    /// A vault and an item `token` at always with a 2h deadline, as the kernel has it.
    private func alwaysTokenWithADeadline() throws -> (VaultFixture, String, (level: String?, deadline: Int64?)) {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "old", options: ["--access", "always", "--timeout", "2h"]).status, 0)
        return (vault, service, try kernelItem(service, "token"))
    }

    func testAnExplicitAccessMovesTheItemAndKeepsItsDeadline() throws {
        let (vault, service, before) = try alwaysTokenWithADeadline()

        XCTAssertEqual(try vault.set(service, "token", "new", options: ["--access", "after-first-unlock"]).status, 0)
        let after = try kernelItem(service, "token")
        XCTAssertEqual(after.level, "after-first-unlock", "--access changes the level")
        XCTAssertEqual(after.deadline, before.deadline, "only --timeout changes the deadline")
        XCTAssertEqual(vault.itemFiles(), ["after-first-unlock/\(service)/token"], "the file moved with it")

        XCTAssertEqual(try vault.set(service, "token", "newer", options: ["--access", "when-unlocked"]).status, 0)
        XCTAssertEqual(try kernelItem(service, "token").level, "when-unlocked", "an explicit when-unlocked is a choice too")
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/token"])
    }

    func testATimeoutChangesTheDeadlineOnly() throws {
        let (vault, service, before) = try alwaysTokenWithADeadline()

        XCTAssertEqual(try vault.set(service, "token", "new", options: ["--timeout", "5h"]).status, 0)
        let after = try kernelItem(service, "token")
        XCTAssertEqual(after.level, "always", "--timeout alone keeps the level")
        let deadline = try XCTUnwrap(after.deadline)
        XCTAssertGreaterThan(deadline - (before.deadline ?? 0), 2 * 3600, "the deadline is 5h from now, not 2h")
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/token"])
    }

    func testTimeoutNoneTakesTheDeadlineAwayAndKeepsTheLevel() throws {
        let (vault, service, before) = try alwaysTokenWithADeadline()
        XCTAssertNotNil(before.deadline)
        for spelling in [["--timeout", "none"], ["--timeout=none"]] {
            XCTAssertEqual(try vault.set(service, "token", "new", options: spelling).status, 0, "\(spelling)")
            let after = try kernelItem(service, "token")
            XCTAssertEqual(after.level, "always", "\(spelling) keeps the level")
            XCTAssertNil(after.deadline, "\(spelling): no deadline any more")
            XCTAssertEqual(procKeysExpiry(serial: try XCTUnwrap(Keychain(service: service).item("token")).serial.rawValue), "perm")
            XCTAssertEqual(try vault.get(service, "token").output, "new")
            XCTAssertEqual(vault.itemFiles(), ["always/\(service)/token"])
            XCTAssertEqual(try vault.set(service, "token", "old", options: ["--timeout", "2h"]).status, 0)
        }
        let refused = try vault.set(service, "token", "newer", options: ["--timeout", "never"])
        XCTAssertEqual(refused.status, 64, "\(refused)")
        XCTAssertTrue(refused.standardError.contains("--timeout must be a positive duration such as 90s, 15m, 2h, 7d or 1h30m (at most 136 years), or 'none'; not 'never'"), refused.standardError)
        XCTAssertEqual(try vault.get(service, "token").output, "old", "a refused timeout changes nothing")
    }

    func testThisDeviceOnlyAloneKeepsTheLevel() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "old", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.set(service, "token", "new", options: ["--this-device-only"]).status, 0)
        XCTAssertEqual(try kernelItem(service, "token").level, "after-first-unlock+this-device-only")
        XCTAssertEqual(vault.itemFiles(), ["after-first-unlock+this-device-only/\(service)/token"])
        XCTAssertEqual(try vault.set(service, "token", "newer").status, 0)
        XCTAssertEqual(try kernelItem(service, "token").level, "after-first-unlock+this-device-only", "and a plain set keeps the flag")
    }

    func testANewItemIsWhenUnlockedWithNoDeadline() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "fresh", "v").status, 0)
        let item = try kernelItem(service, "fresh")
        XCTAssertEqual(item.level, "when-unlocked")
        XCTAssertNil(item.deadline)
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/fresh"])
    }

    func testTheParsedSpellingKeepsTheLevelToo() throws {
        // `--timeout=5h` is left to the parser (FastPath reads `--timeout 5h` only).
        let vault = try makeVault(create: false)
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always"]).status, 0)
        let parsed = try vault.set(service, "cron", "new", options: ["--timeout=5h"])
        XCTAssertEqual(parsed.status, 0, "\(parsed)")
        let item = try kernelItem(service, "cron")
        XCTAssertEqual(item.level, "always")
        XCTAssertNotNil(item.deadline)
    }

    func testAnEphemeralValueKeepsTheLevelAndDropsTheSavedCopy() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always", "--timeout", "2h"]).status, 0)
        let before = try kernelItem(service, "cron")
        XCTAssertEqual(try vault.set(service, "cron", "kernel only", options: ["--ephemeral"]).status, 0)
        let after = try kernelItem(service, "cron")
        XCTAssertEqual(after.level, "always")
        XCTAssertEqual(after.deadline, before.deadline)
        XCTAssertEqual(vault.itemFiles(), [], "--ephemeral still removes the saved copy")
    }

    func testAnEphemeralItemSetAgainIsSavedAtItsLevel() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always", "--ephemeral"]).status, 0)
        XCTAssertEqual(vault.itemFiles(), [])
        XCTAssertEqual(try vault.set(service, "cron", "new").status, 0)
        XCTAssertEqual(try kernelItem(service, "cron").level, "always")
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/cron"], "a set without --ephemeral is saved, as before")
    }

    func testASavedItemTheKernelLacksKeepsItsLevelWhileTheVaultIsLocked() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always"]).status, 0)
        simulateReboot()  // the kernel lost it; the vault is locked
        let changed = try vault.set(service, "cron", "new")
        XCTAssertEqual(changed.status, 0, "a locked vault never blocks kc set: \(changed)")
        XCTAssertEqual(try kernelItem(service, "cron").level, "always", "its file's level")
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/cron"])
    }

    func testASavedItemTheKernelLacksIsLoadedFirstWhenUnlocked() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always", "--timeout", "2h"]).status, 0)
        let before = try kernelItem(service, "cron")
        XCTAssertEqual(try vault.unlock().result.status, 0)
        removeServiceKeyrings(KeyName(service))  // the persistent keyring expired, say
        XCTAssertEqual(try vault.set(service, "cron", "new").status, 0)
        let after = try kernelItem(service, "cron")
        XCTAssertEqual(after.level, "always")
        XCTAssertEqual(after.deadline, before.deadline, "the deadline in its file is kept")
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/cron"])
    }

    func testAValueOverAPageReplacesAnExistingItemAndKeepsIt() throws {
        // The save keeps the key in place with keyctl_update, which takes at most a page.
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "blob", "small", options: ["--access", "after-first-unlock"]).status, 0)
        // Over two pages, as far as an ordinary user's key quota (20,000 bytes) has room.
        let free = KeyQuota.current()?.freeBytes ?? 40_000
        let large = [UInt8](repeating: 0x42, count: max(4200, min(10_000, free - 3000)))
        let changed = try vault.set(service, "blob", large)
        XCTAssertEqual(changed.status, 0, "\(changed)")
        XCTAssertEqual(try Keychain(service: service).data(forKey: "blob"), large)
        XCTAssertEqual(try kernelItem(service, "blob").level, "after-first-unlock")
        XCTAssertEqual(vault.itemFiles(), ["after-first-unlock/\(service)/blob"])
    }

    // MARK: Bad input

    func testAnUnknownLevelOrBadTimeoutChangesNothing() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always"]).status, 0)
        let before = try vault.digest()
        for options in [["--access", "sometimes"], ["--access", ""], ["--timeout", "0"], ["--timeout", "soon"]] {
            let refused = try vault.set(service, "cron", "new", options: options.map { "'\($0)'" })
            XCTAssertEqual(refused.status, 64, "\(options): \(refused)")
            XCTAssertTrue(refused.standardError.hasPrefix("kc: "), refused.standardError)
        }
        XCTAssertEqual(try vault.get(service, "cron").output, "old")
        XCTAssertEqual(try kernelItem(service, "cron").level, "always")
        XCTAssertEqual(try vault.digest(), before, "the file is untouched")
    }

    func testAnEmptyValueKeepsTheItemsLevelAndFile() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "cron", "old", options: ["--access", "always"]).status, 0)
        let emptied = try vault.set(service, "cron", "")
        XCTAssertEqual(emptied.status, 0, "\(emptied)")
        XCTAssertEqual(try vault.get(service, "cron").output, "")
        XCTAssertEqual(try kernelItem(service, "cron").level, "always")
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/cron"])
    }
}
