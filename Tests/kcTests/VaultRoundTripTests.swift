import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// The vault's promise: what you stored is there again after a reboot and `kc unlock`,
/// byte for byte, at its level, with the time it had left.
final class VaultRoundTripTests: VaultTestCase {
    /// One item the round trip stores and expects back.
    private struct Stored {
        var service: KeyName
        var name: KeyName
        var value: [UInt8]
        var level: String
        var thisDeviceOnly: Bool
        /// Seconds since the epoch when it expires, if it has a timeout.
        var deadline: Int64?
    }

    private static let levels = ["when-unlocked", "after-first-unlock", "always"]

    private func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Stores `item` through kc with the vault, failing the test if kc refuses.
    private func store(_ item: inout Stored, in vault: VaultFixture, timeout: Int? = nil,
                       file: StaticString = #filePath, line: UInt = #line) throws {
        var options = ["--access", item.level]
        if item.thisDeviceOnly { options.append("--this-device-only") }
        if let timeout {
            options += ["--timeout", "\(timeout)s"]
            item.deadline = wallSeconds() + Int64(timeout)
        }
        let result = try vault.set(item.service, item.name, item.value, options: options)
        XCTAssertEqual(result.status, 0, "kc set \(item.service)/\(item.name): \(result)", file: file, line: line)
    }

    func testEveryItemComesBackAfterARebootWithItsBytesLevelAndTimeLeft() throws {
        let vault = try makeVault()
        let plain = KeyName(uniqueService())
        let dotted = KeyName("." + uniqueService())
        servicesToRemove.append(dotted)
        let odd = uniqueServiceName(endingWith: [0x20, 0x0a, 0xff, 0xfe])
        let base = uniqueService()
        let longest = KeyName(base + String(repeating: "s", count: 255 - KeyName(base).bytes.count))
        servicesToRemove.append(longest)
        XCTAssertEqual(longest.bytes.count, 255)

        var items: [Stored] = []
        // The six accessibilities, each with and without a timeout.
        let allBytes: [UInt8] = (0...255).map { UInt8($0) }
        for (index, level) in Self.levels.enumerated() {
            for deviceOnly in [false, true] {
                let label = level + (deviceOnly ? "+this-device-only" : "")
                let rotation = index * 2 + (deviceOnly ? 1 : 0)
                var untimed = Stored(service: plain, name: KeyName(label), value: Array(allBytes[rotation...] + allBytes[..<rotation]),
                                     level: level, thisDeviceOnly: deviceOnly)
                try store(&untimed, in: vault)
                var timed = Stored(service: plain, name: KeyName(label + ".timed"), value: randomBytes(100 + rotation),
                                   level: level, thisDeviceOnly: deviceOnly)
                try store(&timed, in: vault, timeout: 3600 + 600 * rotation)
                items += [untimed, timed]
            }
        }
        // The largest value (where the uid's key quota holds it: an ordinary user's whole
        // quota is 20,000 bytes), names with a space, a newline, bytes that are not UTF-8,
        // 255 bytes, a leading dot; and services named so.
        let largest = TestQuota.hasRoom(forValueOf: KeychainError.maximumValueSize + 8000) ? KeychainError.maximumValueSize : 4000
        var awkward = [
            Stored(service: plain, name: "largest", value: allBytes + randomBytes(largest - 256), level: "when-unlocked", thisDeviceOnly: false),
            Stored(service: plain, name: "with space", value: Array("space".utf8), level: "after-first-unlock", thisDeviceOnly: false),
            Stored(service: plain, name: "new\nline", value: Array("newline\n".utf8), level: "always", thisDeviceOnly: false),
            Stored(service: plain, name: KeyName(bytes: [0x61, 0xff, 0xfe, 0x62]), value: [0xff, 0x00, 0xfe], level: "when-unlocked", thisDeviceOnly: false),
            Stored(service: plain, name: KeyName(String(repeating: "n", count: 255)), value: Array("long name".utf8), level: "after-first-unlock", thisDeviceOnly: true),
            Stored(service: plain, name: ".hidden", value: Array("dot".utf8), level: "when-unlocked", thisDeviceOnly: false),
            Stored(service: dotted, name: ".dot", value: Array("x".utf8), level: "always", thisDeviceOnly: false),
            Stored(service: odd, name: "in odd service", value: Array("odd".utf8), level: "after-first-unlock", thisDeviceOnly: false),
            Stored(service: longest, name: "in longest service", value: Array("longest".utf8), level: "when-unlocked", thisDeviceOnly: false),
        ]
        for index in awkward.indices {
            try store(&awkward[index], in: vault, timeout: index == 2 ? 7200 : nil)
        }
        items += awkward

        simulateReboot()
        let locked = try vault.get(plain, "when-unlocked")
        XCTAssertEqual(locked.status, 1, "\(locked)")
        XCTAssertEqual(locked.standardError, "kc: no item 'when-unlocked' in service '\(plain)' in the kernel: the vault holds it but is locked; run 'kc unlock'\n")
        XCTAssertTrue(try vaultListedItems(plain).isEmpty, "the reboot emptied the kernel")

        let (unlocked, report) = try vault.unlock()
        XCTAssertEqual(unlocked.status, 0, "\(unlocked)")
        var expected: [String: Int] = [:]
        for item in items { expected[item.level, default: 0] += 1 }
        XCTAssertEqual(report?.loaded, expected, "\(unlocked)")
        XCTAssertEqual(report?.unreadable.count, 0)

        var listings: [KeyName: [VaultListedItem]] = [:]
        for item in items {
            let what = "\(item.service)/\(item.name)"
            XCTAssertEqual(try Keychain(service: item.service).data(forKey: item.name), item.value, "the exact bytes of \(what)")
            if listings[item.service] == nil { listings[item.service] = try vaultListedItems(item.service) }
            guard let listed = listings[item.service]?.first(where: { $0.nameBytes == item.name.bytes }) else {
                XCTFail("kc ls does not list \(what)")
                continue
            }
            XCTAssertEqual(listed.access, item.level, what)
            XCTAssertEqual(listed.thisDeviceOnly ?? false, item.thisDeviceOnly, what)
            if let deadline = item.deadline {
                let left = try XCTUnwrap(listed.secondsLeft, "\(what) has its timeout again")
                XCTAssertLessThanOrEqual(abs(wallSeconds() + left - deadline), 2, "\(what): the same deadline, not a new full timeout")
            } else {
                XCTAssertNil(listed.secondsLeft, "\(what) has no timeout")
            }
        }
    }

    func testAnItemPastItsDeadlineIsNotLoadedAndItsFileGoes() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "short", "gone soon", options: ["--timeout", "2s"]).status, 0)
        XCTAssertEqual(try vault.set(service, "lasting", "stays", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertTrue(FileOps.exists(vault.itemFile("when-unlocked", service, "short")))
        sleep(3)
        simulateReboot()

        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(report?.expiredRemoved, 1, "\(result)")
        XCTAssertEqual(report?.loaded, ["after-first-unlock": 1], "\(result)")
        XCTAssertFalse(FileOps.exists(vault.itemFile("when-unlocked", service, "short")), "the expired item's file is removed")
        XCTAssertNil(try Keychain(service: service).data(forKey: "short"))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "lasting"), "stays")
        let get = try vault.kc("get", service, "short")
        XCTAssertEqual(get.status, 1, "\(get)")
        XCTAssertFalse(get.standardError.contains("locked"), "no longer in the vault either: \(get.standardError)")
    }

    /// The kernel wins at unlock (README, design notes): a value the kernel holds that the
    /// vault's file does not (here written around the vault) is kept and saved again.
    func testUnlockKeepsTheKernelsNewerValueAndSavesItForTheNextReboot() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "saved value", options: ["--access", "after-first-unlock"]).status, 0)
        let saved = try vault.itemDigest()
        // This process has no vault: the write changes the kernel only.
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("newer value", forKey: "token")
        XCTAssertEqual(try vault.itemDigest(), saved)

        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(report?.updatedFromKernel, 1, "\(result)")
        XCTAssertEqual(report?.loadedCount, 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "newer value", "the kernel's value is kept")
        XCTAssertNotEqual(try vault.itemDigest(), saved, "and saved")
        simulateReboot()
        XCTAssertEqual(try vault.unlock().result.status, 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "newer value")
        XCTAssertEqual(try Keychain(service: service).item("token")?.accessibility, .afterFirstUnlock)
    }

    func testUnlockingTwiceLoadsNothingNewAndLeavesTheKeysAsTheyAre() throws {
        let vault = try makeVault()
        let service = uniqueService()
        for (name, level) in [("a", "when-unlocked"), ("b", "after-first-unlock"), ("c", "always")] {
            XCTAssertEqual(try vault.set(service, name, "value " + name, options: ["--access", level]).status, 0)
        }
        simulateReboot()
        let first = try vault.unlock()
        XCTAssertEqual(first.result.status, 0, "\(first.result)")
        XCTAssertEqual(first.report?.loadedCount, 3)
        let serials = try vaultListedItems(KeyName(service)).map(\.serial)
        XCTAssertEqual(serials.count, 3)

        let second = try vault.unlock()
        XCTAssertEqual(second.result.status, 0, "\(second.result)")
        XCTAssertEqual(second.report?.loadedCount, 0, "\(second.result)")
        XCTAssertEqual(second.report?.alreadyLoaded, 3, "\(second.result)")
        XCTAssertEqual(second.report?.updatedFromKernel, 0, "\(second.result)")
        XCTAssertEqual(try vaultListedItems(KeyName(service)).map(\.serial), serials, "the same keys: nothing was added again")

        let plain = try vault.kc(["unlock"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(plain.standardError, "kc: unlocked; loaded nothing new; 3 already loaded\n")
    }
}
