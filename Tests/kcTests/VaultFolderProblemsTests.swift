import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A folder or file inside the vault that kc will not use (open to other users, another
/// user's) is never passed over in silence (issue 25): `kc unlock` names it with what is
/// wrong and the fix, loads every other item and exits 2; `kc vault status` counts what
/// is there; a write into it says the same fix; nothing is ever removed, and no message
/// advises removing saved items.
final class VaultFolderProblemsTests: VaultTestCase {
    private struct Broken {
        let vault: VaultFixture
        let broken: String
        let good: String
        /// `items/LEVEL/SERVICE` of the broken service.
        let folder: String
        let digest: String
    }

    /// Two services with two items each at `level`, the first one's folder then changed
    /// by `breakIt`, and a reboot.
    private func vaultWithABrokenServiceFolder(level: String = "when-unlocked", _ breakIt: (String) throws -> Void) throws -> Broken {
        let vault = try makeVault()
        let broken = uniqueService("broken"), good = uniqueService("good")
        for service in [broken, good] {
            for name in ["a", "b"] {
                XCTAssertEqual(try vault.set(service, name, "\(service) \(name)", options: ["--access", level]).status, 0)
            }
        }
        let folder = "\(vault.path)/items/\(level)/\(broken)"
        try breakIt(folder)
        simulateReboot()
        return Broken(vault: vault, broken: broken, good: good, folder: folder, digest: try vault.itemDigest())
    }

    /// The unlock reports the folder in one line, exits 2, loads the good service, and
    /// leaves every file; status counts all four; a write there gives the same fix.
    private func assertReported(_ setup: Broken, reason: String, fix: String, level: String = "when-unlocked",
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let vault = setup.vault
        let result = try vault.kc(["unlock"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(result.status, 2, "anything skipped makes the unlock exit 2: \(result)", file: file, line: line)
        let expected = "kc: not loaded, folder skipped: \(setup.folder) \(reason); \(fix)"
        let lines = result.standardError.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, ["kc: unlocked; loaded 2 \(level)", expected], file: file, line: line)
        XCTAssertFalse(result.standardError.lowercased().contains("remove"), "no advice to remove anything: \(result.standardError)", file: file, line: line)
        for name in ["a", "b"] {
            XCTAssertEqual(try vault.get(setup.good, name).output, "\(setup.good) \(name)", "the other service loads", file: file, line: line)
            XCTAssertNil(try Keychain(service: setup.broken).data(forKey: name), "the skipped folder's items are not loaded", file: file, line: line)
        }
        XCTAssertEqual(try vault.itemDigest(), setup.digest, "no file was removed or changed", file: file, line: line)

        let json = try vault.unlock()
        XCTAssertEqual(json.result.status, 2, file: file, line: line)
        XCTAssertTrue(json.result.output.contains("\"skippedFolders\""), "--json names it too: \(json.result.output)", file: file, line: line)

        let status = try vault.status()
        XCTAssertEqual(status.items[level], 4, "kc vault status counts what is there: \(status)", file: file, line: line)
        XCTAssertTrue(status.lastError?.contains(setup.folder) == true, "and shows the problem: \(String(describing: status.lastError))", file: file, line: line)

        let set = try vault.set(setup.broken, "c", "new", options: ["--access", level])
        XCTAssertEqual(set.status, 2, "\(set)", file: file, line: line)
        XCTAssertEqual(set.standardError, "kc: refusing the vault: \(setup.folder) \(reason); \(fix)\n", file: file, line: line)
        XCTAssertEqual(try vault.itemDigest(), setup.digest, "the refused write changed no file", file: file, line: line)
    }

    func testAServiceFolderOpenToOthersIsNamedWithChmodAndTheRestLoad() throws {
        let setup = try vaultWithABrokenServiceFolder { XCTAssertEqual(chmod($0, 0o755), 0) }
        try assertReported(setup, reason: "has mode 755: other users may read or change it",
                           fix: "run 'chmod 700 \(setup.folder)' and check nothing was changed")
        XCTAssertEqual(chmod(setup.folder, 0o700), 0)
        let (fixed, report) = try setup.vault.unlock()
        XCTAssertEqual(fixed.status, 0, "the fix the message gives works: \(fixed)")
        XCTAssertEqual(report?.loaded, ["when-unlocked": 2])
        XCTAssertEqual(try setup.vault.get(setup.broken, "a").output, "\(setup.broken) a")
    }

    func testKcLockNamesAFolderWhoseItemsItCouldNotDrop() throws {
        let vault = try makeVault()
        let broken = uniqueService("broken"), good = uniqueService("good")
        for service in [broken, good] {
            XCTAssertEqual(try vault.set(service, "a", "\(service) a").status, 0)
        }
        let folder = "\(vault.path)/items/when-unlocked/\(broken)"
        XCTAssertEqual(chmod(folder, 0o755), 0)
        let locked = try vault.lock()
        XCTAssertEqual(locked.status, 2, "\(locked)")
        XCTAssertEqual(locked.standardError.split(separator: "\n").map(String.init), [
            "kc: locked; dropped 1 items from the kernel",
            "kc: not dropped, folder skipped: \(folder) has mode 755: other users may read or change it; run 'chmod 700 \(folder)' and check nothing was changed, then run 'kc lock' again",
        ])
        XCTAssertFalse(vault.isStashed, "the vault's key is forgotten all the same")
        XCTAssertNil(try Keychain(service: good).data(forKey: "a"), "the other service's item is dropped")
        XCTAssertEqual(try Keychain(service: broken).string(forKey: "a"), "\(broken) a", "this one is still in the kernel, as the message says")
        XCTAssertEqual(chmod(folder, 0o700), 0)
        XCTAssertEqual(try vault.lock().status, 0)
        XCTAssertNil(try Keychain(service: broken).data(forKey: "a"), "after the fix a lock drops it")
    }

    func testAServiceFolderTheGroupMayWriteIsNamedToo() throws {
        let setup = try vaultWithABrokenServiceFolder(level: "after-first-unlock") { XCTAssertEqual(chmod($0, 0o770), 0) }
        try assertReported(setup, reason: "has mode 770: other users may read or change it",
                           fix: "run 'chmod 700 \(setup.folder)' and check nothing was changed", level: "after-first-unlock")
    }

    func testAServiceFolderOfAnotherUserIsNamedWithTheOwner() throws {
        let account = try VaultAccount.require()
        let setup = try vaultWithABrokenServiceFolder { folder in
            XCTAssertEqual(try runCommand("/bin/chown", ["-R", account.name, folder]).status, 0)
        }
        addCleanup { _ = try? runCommand("/bin/chown", ["-R", "root", setup.folder]) }
        try assertReported(setup, reason: "belongs to \(account.name), not to you",
                           fix: "check what is in it (another user put it there or changed it), then take it back: sudo chown -R root: \(setup.folder)")
    }

    func testALevelFolderOpenToOthersIsNamed() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "kept", "k", options: ["--access", "always"]).status, 0)
        XCTAssertEqual(try vault.set(service, "loads", "l").status, 0)
        let level = "\(vault.path)/items/always"
        XCTAssertEqual(chmod(level, 0o755), 0)
        simulateReboot()
        let result = try vault.kc(["unlock"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertTrue(result.standardError.contains("kc: not loaded, folder skipped: \(level) has mode 755: other users may read or change it; run 'chmod 700 \(level)' and check nothing was changed\n"), result.standardError)
        XCTAssertEqual(try vault.get(service, "loads").output, "l")
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/kept", "when-unlocked/\(service)/loads"])
    }

    func testAFileOpenToOthersIsNamedWithChmodAndTheRestLoad() throws {
        let vault = try makeVault()
        let service = uniqueService()
        for name in ["loose", "fine"] { XCTAssertEqual(try vault.set(service, name, name).status, 0) }
        let file = vault.itemFile("when-unlocked", service, "loose")
        XCTAssertEqual(chmod(file, 0o644), 0)
        simulateReboot()
        let before = try vault.itemDigest()
        let result = try vault.kc(["unlock"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, """
            kc: unlocked; loaded 1 when-unlocked
            kc: not loaded: \(file) has mode 644: other users may read or change it; run 'chmod 600 \(file)' and check nothing was changed

            """)
        XCTAssertEqual(try vault.get(service, "fine").output, "fine")
        XCTAssertEqual(try vault.itemDigest(), before, "nothing was removed")
        XCTAssertEqual(try vault.status().items["when-unlocked"], 2)
    }

    func testAStrayFileWhereAServiceFolderBelongsIsNamedAndKept() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "fine", "f").status, 0)
        let stray = "\(vault.path)/items/when-unlocked/stray-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: stray, contents: Data("x".utf8), attributes: [.posixPermissions: 0o600]))
        simulateReboot()
        let result = try vault.kc(["unlock"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertTrue(result.standardError.contains("kc: not loaded, folder skipped: \(stray) is not a folder (a link or a file); move it out of the vault folder (kc makes what it needs again)\n"), result.standardError)
        XCTAssertEqual(try vault.get(service, "fine").output, "f")
        XCTAssertTrue(FileOps.exists(stray), "kc leaves it")
    }
}
