import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What goes wrong on disk: a wrong passphrase, damaged or foreign files, a full disk,
/// a folder other users could read. kc says which file and why, in one line, and
/// loses nothing it still has.
final class VaultDamageTests: VaultTestCase {
    private func unlockLines(_ result: CommandResult) -> [String] {
        result.standardError.split(separator: "\n").map(String.init)
    }

    func testAWrongPassphraseLoadsNothingAndChangesNoFile() throws {
        let vault = try makeVault()
        let service = uniqueService()
        for (name, level) in [("a", "when-unlocked"), ("b", "after-first-unlock"), ("c", "always")] {
            XCTAssertEqual(try vault.set(service, name, "value " + name, options: ["--access", level]).status, 0)
        }
        simulateReboot()
        let before = try vault.digest()

        let (result, report) = try vault.unlock(passphrase: "not the passphrase")
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, "kc: wrong passphrase for the vault at \(vault.path): nothing was loaded or changed; try again\n")
        XCTAssertNil(report, "no report: \(result.output)")
        XCTAssertEqual(try vault.digest(), before, "no file changed")
        XCTAssertTrue(try vaultListedItems(KeyName(service)).isEmpty, "nothing was loaded")
        XCTAssertFalse(vault.isStashed, "the vault stays locked")
        let status = try vault.status()
        XCTAssertFalse(status.unlocked)
        XCTAssertTrue(status.lastError?.contains("wrong passphrase") == true, "kc vault status tells: \(String(describing: status.lastError))")
        XCTAssertEqual(try vault.get(service, "b").status, 1, "still locked")
    }

    func testAFileFromAnotherVaultOrOfAnotherItemOrUnsafeIsReportedByPathAndEveryOtherItemLoads() throws {
        let vault = try makeVault()
        let other = try makeVault()
        let service = uniqueService()
        for name in ["good", "foreign", "original", "overwritten", "open-to-all", "linked"] {
            XCTAssertEqual(try vault.set(service, name, "value of " + name).status, 0)
        }
        // The same item saved by another vault: encrypted to that vault's key.
        XCTAssertEqual(try other.set(service, "foreign", "the other vault's").status, 0)
        let file = { (name: String) in vault.itemFile("when-unlocked", service, name) }
        XCTAssertEqual(FileOps.rename(other.itemFile("when-unlocked", service, "foreign"), file("foreign")), 0)
        // One item's file copied over another's name.
        try FileManager.default.removeItem(atPath: file("overwritten"))
        try FileManager.default.copyItem(atPath: file("original"), toPath: file("overwritten"))
        // Files other users could read or that point elsewhere.
        XCTAssertEqual(chmod(file("open-to-all"), 0o644), 0)
        try FileManager.default.removeItem(atPath: file("linked"))
        try FileManager.default.createSymbolicLink(atPath: file("linked"), withDestinationPath: file("good"))
        simulateReboot()

        let result = try vault.kc(["unlock"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(result.status, 2, "\(result)")
        let lines = unlockLines(result)
        XCTAssertEqual(lines.first, "kc: unlocked; loaded 2 when-unlocked", "\(result)")
        let reasons = [
            "foreign": "is encrypted to another key, not this vault's; restore it from the vault it came from, or move it out of the vault folder",
            "overwritten": "holds another item (\(service)/original, when-unlocked): it was renamed or moved on disk; not loaded",
            "open-to-all": "has mode 644: other users may read or change it; run 'chmod 600 \(file("open-to-all"))' and check nothing was changed",
            "linked": "is a symbolic link; remove the link",
        ]
        for (name, reason) in reasons {
            XCTAssertTrue(lines.contains("kc: not loaded: \(file(name)) \(reason)"), "\(name) is reported by path: \(result.standardError)")
        }
        XCTAssertEqual(lines.count, 1 + reasons.count, "one line each: \(result.standardError)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "good"), "value of good")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "original"), "value of original")
        for name in reasons.keys { XCTAssertNil(try Keychain(service: service).data(forKey: name), name) }

        let again = try vault.unlock()
        XCTAssertEqual(again.result.status, 2)
        XCTAssertEqual(again.report?.unreadableFiles, reasons.keys.map(file).sorted(), "--json lists the same files")
        XCTAssertEqual(again.report?.alreadyLoaded, 2)
        XCTAssertTrue(try vault.status().lastError?.contains(file("foreign")) == true, "kc vault status shows the last problem")
        XCTAssertTrue(FileOps.exists(file("foreign")), "a file kc cannot read is left for the user to restore")
    }

    func testATruncatedOrAlteredFileIsReportedByPathAndEveryOtherItemLoads() throws {
        try requireRealAge()
        let vault = try makeVault()
        let service = uniqueService()
        let names = ["good", "truncated", "emptied", "flipped-header", "flipped-payload", "flipped-tag"]
        for name in names {
            XCTAssertEqual(try vault.set(service, name, [UInt8](repeating: 0x41, count: 300)).status, 0)
        }
        let file = { (name: String) in vault.itemFile("when-unlocked", service, name) }
        func alter(_ name: String, _ change: (inout [UInt8]) -> Void) throws {
            var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: file(name))))
            change(&bytes)
            try Data(bytes).write(to: URL(fileURLWithPath: file(name)))
            XCTAssertEqual(chmod(file(name), 0o600), 0)
        }
        try alter("truncated") { $0.removeLast($0.count / 2) }
        try alter("emptied") { $0.removeAll() }
        try alter("flipped-header") { $0[30] ^= 0x01 }
        try alter("flipped-payload") { $0[$0.count - 100] ^= 0x01 }
        try alter("flipped-tag") { $0[$0.count - 1] ^= 0x80 }
        simulateReboot()

        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(report?.loaded, ["when-unlocked": 1], "\(result)")
        XCTAssertEqual(report?.unreadableFiles, names.dropFirst().map(file).sorted(), "\(result)")
        for problem in report?.unreadable ?? [] {
            XCTAssertTrue(problem["reason"]?.hasPrefix("is damaged (") == true || problem["reason"]?.hasPrefix("is encrypted to another key") == true,
                          "\(problem)")
        }
        XCTAssertEqual(try Keychain(service: service).data(forKey: "good"), [UInt8](repeating: 0x41, count: 300))
        for name in names.dropFirst() { XCTAssertNil(try Keychain(service: service).data(forKey: name), "\(name) is not loaded with a wrong value") }
    }

    func testAFullDiskFailsTheWriteInOneLineAndKeepsTheOldValue() throws {
        let vault = try makeVault(create: false)
        try mountTmpfs(on: vault, options: "size=256k")
        try vault.create()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "old value").status, 0)
        let fill = try fillDisk(of: vault)
        XCTAssertTrue(fill.output.contains(" 100% "), "the tmpfs is full: \(fill)")
        let before = try vault.digest()

        let replaced = try vault.set(service, "token", "new value")
        XCTAssertEqual(replaced.status, 2, "\(replaced)")
        XCTAssertEqual(replaced.standardError, "kc: no room on the vault's disk to save this (\(vault.path): No space left on device); nothing was changed: free space there, then try again\n")
        XCTAssertEqual(replaced.standardError.filter { $0 == "\n" }.count, 1, "one line: \(replaced.standardError)")
        XCTAssertEqual(try vault.get(service, "token").output, "old value", "the kernel keeps the old value")
        let added = try vault.set(service, "new-item", "never stored")
        XCTAssertEqual(added.status, 2, "\(added)")
        XCTAssertNil(try Keychain(service: service).data(forKey: "new-item"), "a write that cannot be saved is not made in the kernel either")
        XCTAssertEqual(try vault.digest(), before, "the vault file is unchanged")
        XCTAssertEqual(vault.stagedFiles(), [], "no half-written file is left in tmp/")

        try FileManager.default.removeItem(atPath: vault.dataHome + "/fill")
        XCTAssertEqual(try vault.set(service, "token", "new value").status, 0, "with space again, writes work")
        simulateReboot()
        XCTAssertEqual(try vault.unlock().result.status, 0)
        XCTAssertEqual(try vault.get(service, "token").output, "new value")
    }

    func testAVaultFolderOthersCouldReadIsRefusedForEveryWriteAndUnlock() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "old value").status, 0)
        XCTAssertEqual(chmod(vault.path, 0o755), 0)
        let refusal = "kc: refusing the vault: \(vault.path) has mode 755: other users may read or change it; run 'chmod 700 \(vault.path)' and check nothing was changed\n"

        let set = try vault.set(service, "token", "new value")
        XCTAssertEqual(set.status, 2, "\(set)")
        XCTAssertEqual(set.standardError, refusal)
        let remove = try vault.remove(service, "token")
        XCTAssertEqual(remove.status, 2, "\(remove)")
        XCTAssertEqual(remove.standardError, refusal)
        XCTAssertEqual(try vault.get(service, "token").output, "old value", "the refused writes changed nothing in the kernel")
        let lock = try vault.lock()
        XCTAssertEqual(lock.status, 2, "\(lock)")
        XCTAssertEqual(lock.standardError, refusal)

        simulateReboot()
        let unlock = try vault.unlock()
        XCTAssertEqual(unlock.result.status, 2, "\(unlock.result)")
        XCTAssertEqual(unlock.result.standardError, refusal)
        XCTAssertNil(try Keychain(service: service).data(forKey: "token"), "nothing was loaded")
        let get = try vault.get(service, "token")
        XCTAssertEqual(get.status, 2, "\(get)")
        XCTAssertEqual(get.standardError, refusal)

        XCTAssertEqual(chmod(vault.path, 0o700), 0)
        XCTAssertEqual(try vault.unlock().result.status, 0, "the fix the message gives works")
        XCTAssertEqual(try vault.get(service, "token").output, "old value")
    }

    func testAVaultFolderOfAnotherUserIsRefused() throws {
        let account = try VaultAccount.require()
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "old value").status, 0)
        XCTAssertEqual(try runCommand("/bin/chown", [account.name, vault.path]).status, 0)
        addCleanup { _ = try? runCommand("/bin/chown", ["root", vault.path]) }
        let refusal = "kc: refusing the vault: \(vault.path) belongs to \(account.name), not to you; use your own vault (set XDG_DATA_HOME), or if it is yours take it back: sudo chown -R root: \(vault.path)\n"

        let set = try vault.set(service, "token", "new value")
        XCTAssertEqual(set.status, 2, "\(set)")
        XCTAssertEqual(set.standardError, refusal)
        XCTAssertEqual(try vault.get(service, "token").output, "old value")
        simulateReboot()
        let unlock = try vault.unlock()
        XCTAssertEqual(unlock.result.status, 2, "\(unlock.result)")
        XCTAssertEqual(unlock.result.standardError, refusal)
        let status = try vault.kc("vault", "status")
        XCTAssertEqual(status.status, 2, "\(status)")
        XCTAssertEqual(status.standardError, refusal)
    }
}
