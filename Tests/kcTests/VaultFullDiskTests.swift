import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Nothing changes in the kernel that the vault could not save (DESIGN §9), whichever
/// door a write comes through: on a vault disk with no space or no inode left, every
/// write path (a save, a new file, `mv` and setfattr through the mount; `kc set`, a level
/// move and a timeout by `kc set`, `kc import`; the library's set, replace, move,
/// setTimeout and rename) is refused, the kernel and the vault's files stay as they
/// were, and the old value comes back after a reboot. Through the mount the writer is
/// told at write(2) (ENOSPC), which a shell reports, and not only at close, which it ignores.
final class VaultFullDiskTests: VaultTestCase {
    private let oldValue = "old value"

    private enum Shortage: String {
        case space = "no space left"
        case inodes = "no inode left"
    }

    /// A vault on a small tmpfs holding `SERVICE/token` = "old value" (when-unlocked, no
    /// deadline), a second service OTHER with no items (made through the mount), a mount
    /// writing to the vault, and then the tmpfs filled: to its last byte, or to its last inode.
    private func fullVault(_ shortage: Shortage) throws -> (vault: VaultFixture, mount: MountFixture, service: String, other: String) {
        let vault = try makeVault(create: false)
        try mountTmpfs(on: vault, options: shortage == .space ? "size=256k" : "size=1m,nr_inodes=64")
        try vault.create()
        let service = uniqueService(), other = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        let mount = try mount(writingTo: vault)
        XCTAssertEqual(errnoName(FileOps.mkdir(mount.file(other))), errnoName(0), "mkdir of a second service in the mount")
        switch shortage {
        case .space:
            let fill = try fillDisk(of: vault)
            XCTAssertTrue(fill.output.contains(" 100% "), "the tmpfs is full: \(fill)")
        case .inodes:
            let fill = try runShell("i=0; while touch '\(vault.dataHome)/inode-'$i 2>/dev/null; do i=$((i+1)); done; df -i '\(vault.dataHome)' | tail -1")
            XCTAssertTrue(fill.output.contains(" 100% "), "no inode is left: \(fill)")
        }
        return (vault, mount, service, other)
    }

    /// What the kernel holds of both services: names, levels, deadlines and values.
    private func kernelState(_ service: String, _ other: String) throws -> String {
        let items = try listedItems(service).map { "\($0.name) \($0.access ?? "?") \($0.secondsLeft.map { "\($0)s" } ?? "no deadline")" }
        let value = try Keychain(service: service).string(forKey: "token") ?? "none"
        let others = try listedItems(other).map(\.name)
        return "\(service): \(items) token=\(value); \(other): \(others)"
    }

    /// A library call made with this process's writes going to `vault`.
    private func library(_ vault: VaultFixture, _ body: () throws -> Void) -> (failed: Bool, how: String) {
        setenv("XDG_DATA_HOME", vault.dataHome, 1)
        defer { setenv("XDG_DATA_HOME", Self.noVaultDataHome, 1) }
        do {
            try body()
            return (false, "it succeeded")
        } catch {
            return (true, "\(error)")
        }
    }

    /// What a refused command or library call says: that the vault's disk is full, and
    /// that nothing was changed.
    private func saysDiskFull(_ text: String, _ vault: VaultFixture) -> Bool {
        text.contains("no room on the vault's disk to save this (\(vault.path): ") && text.contains("nothing was changed")
    }

    /// Every write path, each a name and what it does: whether it failed, how, and
    /// whether the failure is the expected one (ENOSPC through the mount; the one-line
    /// "no room" error from the CLI and the library).
    private func writePaths(_ vault: VaultFixture, _ mount: MountFixture, _ service: String, _ other: String)
        -> [(name: String, write: () throws -> (failed: Bool, how: String, expected: Bool))]
    {
        let token = mount.file(service, "token")
        let keychain = { try Keychain(service: service) }
        let oldValue = self.oldValue
        let archive = """
            {"format": "kc-export", "version": 1, "items": [
              {"service": "\(other)", "name": "imported", "access": "when-unlocked", "secondsLeft": null, "value": "dg=="}]}
            """
        func command(_ result: CommandResult) -> (Bool, String, Bool) {
            (result.status != 0, "\(result)", result.status == 2 && saysDiskFull(result.standardError, vault)
                && result.standardError.split(separator: "\n").count == 1)
        }
        func shell(_ script: String) throws -> (Bool, String, Bool) {
            let result = try runCommand("/bin/bash", ["-c", script])
            return (result.status != 0, "\(result)", result.standardError.contains("No space left on device"))
        }
        func call(_ body: () throws -> Void) -> (Bool, String, Bool) {
            let (failed, how) = library(vault, body)
            return (failed, how, saysDiskFull(how, vault))
        }
        return [
            ("a save by bash through the mount (printf new > FILE)", { try shell("printf 'new value' > '\(token)'") }),
            ("a save by open, write, close through the mount", {
                let (fd, opened) = FileOps.open(token, O_WRONLY | O_TRUNC)
                guard fd >= 0 else { return (true, "open gave \(errnoName(opened))", false) }
                let written = FileOps.write(fd, "new value")
                let closed = FileOps.close(fd)
                return (written != 0 || closed != 0, "write gave \(errnoName(written)), close gave \(errnoName(closed))",
                        written == ENOSPC && closed != 0)
            }),
            ("a new file by bash through the mount", { try shell("printf 'new value' > '\(mount.file(service, "new"))'") }),
            ("mv to a new name through the mount", {
                let moved = FileOps.rename(token, mount.file(service, "renamed"))
                return (moved != 0, "mv gave \(errnoName(moved))", moved == ENOSPC)
            }),
            ("mv to another service through the mount", {
                let moved = FileOps.rename(token, mount.file(other, "token"))
                return (moved != 0, "mv gave \(errnoName(moved))", moved == ENOSPC)
            }),
            ("setfattr user.kc.access through the mount", {
                try shell("setfattr -n user.kc.access -v after-first-unlock '\(token)'")
            }),
            ("setfattr user.kc.timeout through the mount", { try shell("setfattr -n user.kc.timeout -v 600 '\(token)'") }),
            ("kc set of the item", { command(try vault.set(service, "token", "new value")) }),
            ("kc set of a new item", { command(try vault.set(service, "new", "new value")) }),
            ("kc set of a new item in another service", { command(try vault.set(other, "new", "new value")) }),
            ("kc set --access (a level move)", { command(try vault.set(service, "token", oldValue, options: ["--access", "after-first-unlock"])) }),
            ("kc set --timeout", { command(try vault.set(service, "token", oldValue, options: ["--timeout", "1h"])) }),
            ("kc import", { command(try vault.kc(["import"], input: Array(archive.utf8))) }),
            ("the library's set", { call { try keychain().set("new value", forKey: "token") } }),
            ("the library's replace", { call { try keychain().replace(Array("new value".utf8), forKey: "token") } }),
            ("the library's move to another level", { call { try keychain().move("token", to: .afterFirstUnlock) } }),
            ("the library's setTimeout", { call { try keychain().setTimeout(.seconds(600), forKey: "token") } }),
            ("the library's rename", { call { try keychain().rename("token", to: "renamed") } }),
            ("the library's rename into another service", {
                call { try keychain().rename("token", to: "token", in: Keychain(service: other)) }
            }),
        ]
    }

    private func everyWriteIsRefused(_ shortage: Shortage) throws {
        let (vault, mount, service, other) = try fullVault(shortage)
        let kernel = try kernelState(service, other)
        let files = try vault.digest()
        for (name, write) in writePaths(vault, mount, service, other) {
            let (failed, how, expected) = try write()
            XCTAssertTrue(failed, "\(shortage.rawValue): \(name) is refused: \(how)")
            XCTAssertTrue(expected, "\(shortage.rawValue): \(name) fails saying the vault's disk has no room (ENOSPC through the mount): \(how)")
            XCTAssertEqual(try kernelState(service, other), kernel, "\(shortage.rawValue): \(name) changed nothing in the kernel (\(how))")
            XCTAssertEqual(try vault.digest(), files, "\(shortage.rawValue): \(name) changed no vault file")
            XCTAssertEqual(vault.stagedFiles(), [], "\(shortage.rawValue): \(name) left no half-written file in tmp/")
        }

        XCTAssertEqual(try runShell("rm -f '\(vault.dataHome)'/fill* '\(vault.dataHome)'/inode-*").status, 0)
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.unreadableFiles, [])
        XCTAssertEqual(try kernelState(service, other), kernel, "after a reboot: what the kernel held, the old value")
    }

    func testOnAFullVaultDiskEveryWritePathIsRefusedAndChangesNothing() throws {
        try everyWriteIsRefused(.space)
    }

    func testWithNoInodeLeftOnTheVaultDiskEveryWritePathIsRefusedAndChangesNothing() throws {
        try everyWriteIsRefused(.inodes)
    }

    /// With room again, the same writes go through the mount: the check at write(2) does
    /// not refuse a disk with space left.
    func testWithRoomAgainASaveByBashThroughTheMountSucceedsAndIsSaved() throws {
        let (vault, mount, service, _) = try fullVault(.space)
        XCTAssertNotEqual(try runShell("printf 'new value' > '\(mount.file(service, "token"))'").status, 0)
        XCTAssertEqual(try runShell("rm -f '\(vault.dataHome)'/fill*").status, 0)
        let saved = try runShell("printf 'new value' > '\(mount.file(service, "token"))'")
        XCTAssertEqual(saved.status, 0, "\(saved)")
        XCTAssertEqual(try rebootAndUnlock(vault)?.unreadableFiles, [])
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "new value")
    }

    /// The kernel holds a newer value than the item's file (a write killed after its
    /// kernel change) and the disk is full, so `kc unlock` cannot write the file again:
    /// the item is loaded (the kernel keeps its value), and unlock says exactly that,
    /// not that it was not loaded.
    func testAnUnlockThatCannotSaveTheKernelsNewerValueSaysItIsLoadedButNotSaved() throws {
        let vault = try makeVault(create: false)
        try mountTmpfs(on: vault, options: "size=256k")
        try vault.create()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        try Keychain(service: service).set("newer value", forKey: "token")  // this process has no vault: the kernel only
        vault.dropStash()
        let fill = try fillDisk(of: vault)
        XCTAssertTrue(fill.output.contains(" 100% "), "the tmpfs is full: \(fill)")

        let text = try vault.kc(["unlock"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(text.status, 2, "\(text)")
        XCTAssertFalse(text.standardError.contains("not loaded"), "\(text.standardError)")
        XCTAssertTrue(text.standardError.split(separator: "\n").contains {
            $0.hasPrefix("kc: loaded, but not saved again: \(service)/token: the kernel holds a newer value than its vault file, which could not be written (")
        }, "\(text.standardError)")
        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(report?.failed.count, 0, "the item is not reported as failed to load: \(result)")
        XCTAssertEqual(report?.notSavedAgain?.map { $0["item"] }, ["\(service)/token"], "\(result)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "newer value", "the kernel keeps its newer value")

        XCTAssertEqual(try runShell("rm -f '\(vault.dataHome)'/fill*").status, 0)
        let again = try vault.unlock()
        XCTAssertEqual(again.result.status, 0, "\(again.result)")
        XCTAssertEqual(again.report?.updatedFromKernel, 1, "with room, unlock saves the kernel's value")
        XCTAssertEqual(try rebootAndUnlock(vault)?.unreadableFiles, [])
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "newer value")
    }
}
