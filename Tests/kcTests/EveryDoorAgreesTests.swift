import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What a service holds is the kernel's items and the vault's, locked or not, at every
/// door (issue 35): no door deletes vault files it did not show the user.
final class EveryDoorAgreesTests: VaultTestCase {
    /// `rmdir` of a service whose items a locked vault keeps: the folder lists empty (the
    /// kernel holds nothing), but it is not empty, and after `kc unlock` the item is back.
    func testRmdirOfAServiceALockedVaultKeepsIsRefusedAndLosesNothing() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "precious", options: ["--access", "after-first-unlock"]).status, 0)
        let mount = try mount(writingTo: vault)
        XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0)
        XCTAssertFalse(try Keychain(service: service).contains("token"), "locked: the kernel holds nothing of it")
        XCTAssertEqual(errnoName(FileOps.rmdir(mount.file(service))), errnoName(ENOTEMPTY), "the vault keeps its item")
        XCTAssertTrue(FileOps.exists(vault.itemFile("after-first-unlock", service, "token")), "the file is kept")
        XCTAssertEqual(try vault.unlock().result.status, 0)
        XCTAssertEqual(try vault.get(service, "token").output, "precious")
        // Emptied for real, it goes.
        XCTAssertEqual(try vault.remove(service, "token").status, 0)
        XCTAssertEqual(errnoName(FileOps.rmdir(mount.file(service))), errnoName(0))
        XCTAssertFalse(try Keychain(service: service).serviceExists())
    }

    /// `kc rm SERVICE` asks the same question: it names the locked vault's items too.
    func testKcRmOfAServiceCountsWhatALockedVaultKeeps() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "precious", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0)
        let asked = try vault.kc("rm", service)
        XCTAssertEqual(asked.status, 64)
        XCTAssertTrue(asked.standardError.contains("its 1 item"), asked.standardError)
    }

    /// A vault folder the user cannot look into (another user's, mode 0700) is not "no
    /// vault": status, every write and a read that misses (which would look in the
    /// vault) say what is wrong and how to fix it, and nothing is stored unsaved.
    func testAVaultFolderAnotherUserOwnsIsRefusedLoudlyByStatusAndEveryWrite() throws {
        _ = try VaultAccount.require()
        let vault = try makeVault(create: false)
        XCTAssertEqual(chmod(vault.dataHome, 0o755), 0)
        XCTAssertEqual(mkdir(vault.path, 0o700), 0)
        XCTAssertTrue(FileManager.default.createFile(atPath: vault.path + "/recipient", contents: Data("age1x\n".utf8)))
        let service = uniqueService()
        let result = try VaultAccount.run("""
            "$KC" vault status; echo "status=$?"
            printf v | "$KC" set \(service) token; echo "set=$?"
            "$KC" get \(service) token; echo " get=$?"
            """, vault: vault)
        let refusal = "kc: refusing the vault: \(vault.path) belongs to root, not to you; use your own vault (set XDG_DATA_HOME), or if it is yours take it back: sudo chown -R \(VaultAccount.name): \(vault.path)"
        XCTAssertEqual(result.output, "status=2\nset=2\n get=2\n", "\(result)")
        XCTAssertEqual(result.standardError.split(separator: "\n").filter { $0.hasPrefix("kc: refusing the vault") }.count, 3, "\(result)")
        XCTAssertTrue(result.standardError.hasPrefix(refusal), "\(result)")
    }
}
