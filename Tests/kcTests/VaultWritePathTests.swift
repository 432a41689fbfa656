import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Every way of changing an item keeps its saved copy in step: kc rm, a level move,
/// and through the mount removals, renames, an editor's save by rename and a level
/// change by extended attribute. Each is checked the way a user would meet it: after a
/// reboot and `kc unlock`.
final class VaultWritePathTests: VaultTestCase {
    func testRemovingAnItemOrAServiceAndMovingALevelKeepTheVaultInStep() throws {
        let vault = try makeVault()
        let mount = try mount(writingTo: vault)
        let kept = uniqueService(), removed = uniqueService()
        for name in ["removed", "moved", "kept"] { XCTAssertEqual(try vault.set(kept, name, "v " + name).status, 0) }
        for name in ["x", "y"] { XCTAssertEqual(try vault.set(removed, name, "v " + name, options: ["--access", "always"]).status, 0) }

        XCTAssertEqual(try vault.remove(kept, "removed").status, 0)
        XCTAssertFalse(FileOps.exists(vault.itemFile("when-unlocked", kept, "removed")), "kc rm removes the file")
        let move = try vault.set(kept, "moved", "v moved again", options: ["--access", "after-first-unlock", "--timeout", "1h"])
        XCTAssertEqual(move.status, 0, "\(move)")
        XCTAssertEqual(vault.itemFiles().filter { $0.hasSuffix("/\(kept)/moved") }, ["after-first-unlock/\(kept)/moved"], "one file, at the new level")
        let removal = try runShell("rm -r '\(mount.file(removed))'")
        XCTAssertEqual(removal.status, 0, "rm -r of a service through the mount: \(removal)")
        XCTAssertEqual(vault.itemFiles().filter { $0.contains("/\(removed)/") }, [], "the service's files are gone")

        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.loaded, ["when-unlocked": 1, "after-first-unlock": 1])
        XCTAssertEqual(try Keychain(service: kept).allKeys().sorted(), ["kept", "moved"])
        XCTAssertEqual(try Keychain(service: kept).string(forKey: "moved"), "v moved again")
        let moved = try XCTUnwrap(try Keychain(service: kept).item("moved"))
        XCTAssertEqual(moved.accessibility, .afterFirstUnlock)
        XCTAssertTrue((3590...3600).contains(moved.secondsLeft ?? 0), "\(String(describing: moved.secondsLeft))")
        XCTAssertEqual(try Keychain(service: removed).allKeys(), [])
    }

    func testRenamesAndAnEditorsSaveThroughTheMountKeepTheVaultInStep() throws {
        let vault = try makeVault()
        let mount = try mount(writingTo: vault)
        let service = uniqueService(), renamedService = uniqueService()
        XCTAssertEqual(try vault.set(service, "old-name", "renamed value", options: ["--access", "after-first-unlock", "--timeout", "2h"]).status, 0)
        XCTAssertEqual(try vault.set(service, "edited", "first draft", options: ["--access", "always"]).status, 0)
        XCTAssertEqual(try vault.set(service, "by-attribute", "moved by setfattr").status, 0)
        XCTAssertEqual(try vault.set(service, "unlinked", "rm through the mount").status, 0)

        let directory = mount.file(service)
        XCTAssertEqual(errnoName(FileOps.rename(directory + "/old-name", directory + "/new-name")), errnoName(0), "mv in the mount")
        // An editor's save: a new file beside it, written whole, renamed over the item.
        XCTAssertEqual(errnoName(writeFile(directory + "/.edited.swp", Array("second draft".utf8))), errnoName(0))
        XCTAssertEqual(errnoName(FileOps.rename(directory + "/.edited.swp", directory + "/edited")), errnoName(0))
        let attribute = try runCommand("/usr/bin/setfattr", ["-n", "user.kc.access", "-v", "always", directory + "/by-attribute"])
        XCTAssertEqual(attribute.status, 0, "\(attribute)")
        XCTAssertEqual(errnoName(FileOps.unlink(directory + "/unlinked")), errnoName(0))
        XCTAssertEqual(errnoName(writeFile(directory + "/created", Array("made in the mount".utf8))), errnoName(0))

        XCTAssertEqual(vault.itemFiles(), [
            "after-first-unlock/\(service)/new-name", "always/\(service)/by-attribute", "always/\(service)/edited",
            "when-unlocked/\(service)/created",
        ], "the files follow at once")

        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.loadedCount, 4)
        XCTAssertEqual(try Keychain(service: service).allKeys().sorted(), ["by-attribute", "created", "edited", "new-name"])
        let renamed = try XCTUnwrap(try Keychain(service: service).item("new-name"))
        XCTAssertEqual(try Keychain(service: service).string(forKey: "new-name"), "renamed value")
        XCTAssertEqual(renamed.accessibility, .afterFirstUnlock)
        XCTAssertTrue((7190...7200).contains(renamed.secondsLeft ?? 0), "the rename kept the deadline: \(String(describing: renamed.secondsLeft))")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "edited"), "second draft")
        XCTAssertEqual(try Keychain(service: service).item("edited")?.accessibility, .always, "the save kept the item's level")
        XCTAssertEqual(try Keychain(service: service).item("by-attribute")?.accessibility, .always)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "created"), "made in the mount")

        // A whole service renamed in the mount.
        XCTAssertEqual(errnoName(FileOps.rename(directory, mount.file(renamedService))), errnoName(0))
        XCTAssertEqual(vault.itemFiles(), [
            "after-first-unlock/\(renamedService)/new-name", "always/\(renamedService)/by-attribute",
            "always/\(renamedService)/edited", "when-unlocked/\(renamedService)/created",
        ])
        _ = try rebootAndUnlock(vault)
        XCTAssertEqual(try Keychain(service: renamedService).allKeys().sorted(), ["by-attribute", "created", "edited", "new-name"])
        XCTAssertEqual(try Keychain(service: service).allKeys(), [])
    }

    func testImportedItemsAndANewTimeoutThroughTheMountAreSaved() throws {
        let vault = try makeVault()
        let mount = try mount(writingTo: vault)
        let service = uniqueService()
        let archive = KeychainArchive.encodeJSON([
            ExportedItem(service: KeyName(service), name: "imported", level: .always, secondsLeft: 5400, value: [0, 1, 2, 255]),
            ExportedItem(service: KeyName(service), name: "plain", level: .whenUnlocked, secondsLeft: nil, value: Array("plain".utf8)),
        ])
        let imported = try vault.kc(["import"], input: archive)
        XCTAssertEqual(imported.status, 0, "\(imported)")
        XCTAssertEqual(vault.itemFiles(), ["always/\(service)/imported", "when-unlocked/\(service)/plain"])
        let timeout = try runCommand("/usr/bin/setfattr", ["-n", "user.kc.timeout", "-v", "600", mount.file(service, "plain")])
        XCTAssertEqual(timeout.status, 0, "\(timeout)")

        _ = try rebootAndUnlock(vault)
        XCTAssertEqual(try Keychain(service: service).data(forKey: "imported"), [0, 1, 2, 255])
        let importedItem = try XCTUnwrap(try Keychain(service: service).item("imported"))
        XCTAssertEqual(importedItem.accessibility, .always)
        XCTAssertTrue((5390...5400).contains(importedItem.secondsLeft ?? 0), "\(String(describing: importedItem.secondsLeft))")
        let plain = try XCTUnwrap(try Keychain(service: service).item("plain"))
        XCTAssertTrue((590...600).contains(plain.secondsLeft ?? 0), "the timeout set through the mount was saved: \(String(describing: plain.secondsLeft))")
    }

    /// `kc lock` drops the saved when-unlocked items from the kernel, not from the vault:
    /// renaming their service in the mount meanwhile must not lose them. It is refused
    /// (EACCES) until an unlock brings them back, then carries them all.
    func testRenamingAServiceWhileTheVaultIsLockedLosesNothing() throws {
        let vault = try makeVault()
        let mount = try mount(writingTo: vault)
        let service = uniqueService(), renamed = uniqueService()
        XCTAssertEqual(try vault.set(service, "session", "dropped at lock").status, 0)
        XCTAssertEqual(try vault.set(service, "user", "stays loaded", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.lock().status, 0)
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["user"], "the when-unlocked item left the kernel")
        let files = vault.itemFiles()

        let refused = FileOps.rename(mount.file(service), mount.file(renamed))
        XCTAssertEqual(errnoName(refused), errnoName(EACCES), "refused while the vault holds items the kernel does not")
        XCTAssertEqual(vault.itemFiles(), files, "no file was lost or moved")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["user"])

        XCTAssertEqual(try vault.unlock().result.status, 0)
        XCTAssertEqual(errnoName(FileOps.rename(mount.file(service), mount.file(renamed))), errnoName(0), "unlocked, the rename works")
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.loadedCount, 2, "both items come back")
        XCTAssertEqual(try Keychain(service: renamed).string(forKey: "session"), "dropped at lock")
        XCTAssertEqual(try Keychain(service: renamed).string(forKey: "user"), "stays loaded")
        XCTAssertEqual(try Keychain(service: service).allKeys(), [])
    }

    func testRemovingAnItemWhileTheVaultIsLockedRemovesItsSavedCopy() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "session", "dropped at lock").status, 0)
        XCTAssertEqual(try vault.set(service, "user", "stays loaded", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.lock().status, 0)
        XCTAssertEqual(try vault.get(service, "session").status, 1, "locked")

        let notLoaded = try vault.remove(service, "session")
        XCTAssertEqual(notLoaded.status, 0, "an item only the vault holds is removed: \(notLoaded)")
        let loaded = try vault.remove(service, "user")
        XCTAssertEqual(loaded.status, 0, "\(loaded)")
        XCTAssertEqual(vault.itemFiles(), [])
        let missing = try vault.remove(service, "session")
        XCTAssertEqual(missing.status, 1, "\(missing)")

        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.loadedCount, 0)
        XCTAssertEqual(try vault.get(service, "session").status, 1)
        XCTAssertEqual(try vault.get(service, "user").status, 1)
    }
}
