import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Every write goes through the vault's journal in one order (DESIGN §9): the file is
/// staged from the bytes in hand, then the kernel changes, then the file is committed
/// (renamed into place). So a write the vault cannot save (a full disk, no inode left)
/// fails before the kernel changes, whichever door it came through; a writer killed at
/// the commit leaves the old value or the new one; and `kc lock` saves what the kernel
/// holds before it drops it. Each case is checked as a user meets it: the writer's
/// error, what the kernel holds, and what comes back after a reboot and `kc unlock`.
final class VaultJournalOrderTests: VaultTestCase {
    private let oldValue = "old value", newValue = "new value"
    /// The system calls a commit may rename with (glibc's rename(3) is `rename` on x86_64).
    private let renames = "rename,renameat,renameat2"

    // MARK: A full disk

    /// A vault on a 256 KiB tmpfs holding `service/token` = "old value", a mount whose
    /// daemon writes to it, and then the disk filled to its last byte.
    private func fullVaultDisk() throws -> (vault: VaultFixture, mount: MountFixture, service: String) {
        let vault = try makeVault(create: false)
        try mountTmpfs(on: vault, options: "size=256k")
        try vault.create()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        let mount = try mount(writingTo: vault)
        let fill = try fillDisk(of: vault)
        XCTAssertTrue(fill.output.contains(" 100% "), "the tmpfs is full: \(fill)")
        return (vault, mount, service)
    }

    /// Gives the full disk its space back (before a reboot, so the unlock can record itself).
    private func freeSpace(_ vault: VaultFixture) throws {
        try FileManager.default.removeItem(atPath: vault.dataHome + "/fill")
    }

    private func value(_ service: String, _ name: String = "token") throws -> String? {
        try Keychain(service: service).string(forKey: name)
    }

    /// A write through the mount on a full vault disk: `write` makes it and says whether it
    /// failed and how. It must fail, change no vault file and leave nothing in tmp/.
    /// `inKernel` then checks the kernel (given the mount, the service and how the write
    /// failed); the space is given back, and after a reboot and `kc unlock` (every file
    /// readable) `afterReboot` checks what came back.
    private func refusedOnAFullDisk(_ write: (MountFixture, String) throws -> (failed: Bool, how: String),
                                    inKernel: (MountFixture, String, String) throws -> Void,
                                    afterReboot: (String) throws -> Void) throws {
        let (vault, mount, service) = try fullVaultDisk()
        let before = try vault.digest()
        let (failed, how) = try write(mount, service)
        XCTAssertTrue(failed, "the write is refused: \(how)")
        try inKernel(mount, service, how)
        XCTAssertEqual(try vault.digest(), before, "no vault file changed")
        XCTAssertEqual(vault.stagedFiles(), [], "no half-written file is left in tmp/")

        try freeSpace(vault)
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.unreadableFiles, [])
        try afterReboot(service)
    }

    /// open, write and close of `path` through the mount on the full disk: the writer is
    /// told at write(2) with ENOSPC (a shell ignores what close says), or at open for a
    /// new file, and its close fails too.
    private func refusedSave(of value: String, to path: String, flags: Int32) -> (failed: Bool, how: String) {
        let (fd, opened) = FileOps.open(path, flags)
        guard fd >= 0 else {
            XCTAssertEqual(errnoName(opened), errnoName(ENOSPC), "open is refused only as a new file on a full disk")
            return (true, "open gave \(errnoName(opened))")
        }
        let written = FileOps.write(fd, value)
        let closed = FileOps.close(fd)
        XCTAssertEqual(errnoName(written), errnoName(ENOSPC), "the write itself is refused")
        XCTAssertNotEqual(closed, 0, "and so is the close")
        return (written != 0 && closed != 0, "write gave \(errnoName(written)), close gave \(errnoName(closed))")
    }

    /// `setfattr -n NAME -v VALUE` of the item `token` through the mount.
    private func setfattr(_ name: String, _ value: String, _ mount: MountFixture, _ service: String) throws -> (failed: Bool, how: String) {
        let change = try runCommand("/usr/bin/setfattr", ["-n", name, "-v", value, mount.file(service, "token")])
        return (change.status != 0, "\(change)")
    }

    func testASaveThroughTheMountOnAFullDiskFailsAtTheWriteAndTheKernelKeepsTheOldValue() throws {
        var kernel: String?
        try refusedOnAFullDisk({ mount, service in
            refusedSave(of: newValue, to: mount.file(service, "token"), flags: O_WRONLY | O_TRUNC)
        }, inKernel: { _, service, how in
            kernel = try value(service)
            XCTAssertEqual(kernel, oldValue, "a save the vault cannot hold is not made in the kernel either (\(how))")
        }, afterReboot: { service in
            let after = try value(service)
            XCTAssertEqual(after, oldValue, "the old value comes back after a reboot")
            XCTAssertEqual(after, kernel, "what comes back after a reboot is what the kernel held: they agreed")
        })
    }

    func testANewFileSavedThroughTheMountOnAFullDiskIsRefusedAndIsNowhere() throws {
        try refusedOnAFullDisk({ mount, service in
            refusedSave(of: "never stored", to: mount.file(service, "new-item"), flags: O_WRONLY | O_CREAT | O_TRUNC)
        }, inKernel: { mount, service, how in
            XCTAssertNil(try Keychain(service: service).data(forKey: "new-item"), "a new item the vault cannot hold is not made in the kernel either (\(how))")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mount.file(service)), ["token"],
                           "ls of the mount does not show it once it is closed")
        }, afterReboot: { service in
            XCTAssertEqual(try Keychain(service: service).allKeys(), ["token"], "after a reboot: only the item that was saved")
            XCTAssertEqual(try value(service), oldValue)
        })
    }

    func testALevelChangeBySetfattrOnAFullDiskIsRefusedAndTheKernelKeepsTheLevel() throws {
        var kernel: Accessibility?
        try refusedOnAFullDisk({ mount, service in
            try setfattr("user.kc.access", "after-first-unlock", mount, service)
        }, inKernel: { _, service, how in
            kernel = try Keychain(service: service).item("token")?.accessibility
            XCTAssertEqual(kernel, .whenUnlocked, "a level move the vault cannot save is not made in the kernel either (\(how))")
            XCTAssertEqual(try value(service), oldValue)
        }, afterReboot: { service in
            let after = try Keychain(service: service).item("token")?.accessibility
            XCTAssertEqual(after, .whenUnlocked, "after a reboot the item is at its old level")
            XCTAssertEqual(after, kernel, "what comes back after a reboot is the level the kernel held: they agreed")
            XCTAssertEqual(try value(service), oldValue)
        })
    }

    func testATimeoutChangeBySetfattrOnAFullDiskIsRefusedAndTheKernelKeepsNoDeadline() throws {
        var kernel: UInt64?
        try refusedOnAFullDisk({ mount, service in
            try setfattr("user.kc.timeout", "600", mount, service)
        }, inKernel: { _, service, how in
            kernel = try XCTUnwrap(try Keychain(service: service).item("token")).secondsLeft
            XCTAssertNil(kernel, "a deadline the vault cannot save is not set in the kernel either (\(how))")
        }, afterReboot: { service in
            let after = try XCTUnwrap(try Keychain(service: service).item("token")).secondsLeft
            XCTAssertNil(after, "after a reboot the item has no deadline, as before")
            XCTAssertEqual(after == nil, kernel == nil,
                           "what comes back after a reboot is what the kernel held: they agreed (kernel: \(String(describing: kernel)) s left)")
        })
    }

    // MARK: No inode left

    /// `mv` of an item to another service through the mount when the vault's disk has no
    /// inode left: it fails and the item stays where it was, or it succeeds; either way
    /// the kernel and the vault hold it in the same service, and a reboot brings it back
    /// exactly once.
    func testAMoveAcrossServicesThroughTheMountWithNoInodeLeftNeverLosesTheItem() throws {
        let vault = try makeVault(create: false)
        try mountTmpfs(on: vault, options: "size=1m,nr_inodes=64")
        try vault.create()
        let from = uniqueService(), to = uniqueService()
        // A second item keeps the old service's folder (and its inode) in the vault.
        XCTAssertEqual(try vault.set(from, "moved", "moved value").status, 0)
        XCTAssertEqual(try vault.set(from, "stays", "stays value").status, 0)
        let mount = try mount(writingTo: vault)
        XCTAssertEqual(errnoName(FileOps.mkdir(mount.file(to))), errnoName(0), "mkdir of the target service in the mount")
        let fill = try runShell("i=0; while touch '\(vault.dataHome)/inode-'$i 2>/dev/null; do i=$((i+1)); done; df -i '\(vault.dataHome)' | tail -1")
        XCTAssertTrue(fill.output.contains(" 100% "), "no inode is left: \(fill)")

        let moved = FileOps.rename(mount.file(from, "moved"), mount.file(to, "moved"))
        let services = [from, to]
        let inKernel = try services.filter { try value($0, "moved") != nil }
        let inVault = vault.itemFiles().filter { $0.hasSuffix("/moved") }.map { String($0.split(separator: "/")[1]) }
        XCTAssertEqual(inKernel, moved == 0 ? [to] : [from],
                       "mv gave \(errnoName(moved)): the kernel holds the item in the \(moved == 0 ? "new" : "old") service")
        XCTAssertEqual(inVault, inKernel, "the vault holds the item where the kernel does (mv gave \(errnoName(moved)); files: \(vault.itemFiles()))")
        XCTAssertEqual(vault.stagedFiles(), [], "no half-written file is left in tmp/")

        XCTAssertEqual(try runShell("rm -f '\(vault.dataHome)'/inode-*").status, 0)
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.unreadableFiles, [])
        let afterReboot = try services.filter { try value($0, "moved") != nil }
        XCTAssertEqual(afterReboot.count, 1, "after a reboot the item exists exactly once: never lost, never doubled (in \(afterReboot))")
        XCTAssertEqual(afterReboot, inKernel, "in the service the kernel held it in")
        for service in afterReboot { XCTAssertEqual(try value(service, "moved"), "moved value") }
        XCTAssertEqual(try value(from, "stays"), "stays value")
    }

    // MARK: A failed fsync

    /// The staged file's fsync fails (EIO, injected by strace): `kc set` and a save
    /// through the mount are refused before the kernel changes, and nothing is left.
    func testAWriteWhoseFileCannotBeFlushedIsRefusedBeforeTheKernelChanges() throws {
        try requireStraceInjection()
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        let before = try vault.digest()

        let set = try runCommand("/usr/bin/env", ["strace", "-f", "-o", "/dev/null", "-e", "trace=fsync", "-e", "inject=fsync:error=EIO:when=1",
                                                  builtKC, "set", service, "token"],
                                 input: Array(newValue.utf8), environment: vault.environment)
        XCTAssertEqual(set.status, 2, "\(set)")
        XCTAssertTrue(set.standardError.hasPrefix("kc: cannot write \(vault.path)/tmp/new-") && set.standardError.hasSuffix(": Input/output error; nothing was changed (free space or fix the folder, then try again)\n"),
                      set.standardError)
        XCTAssertEqual(try value(service), oldValue, "kc set: the kernel keeps the old value")

        let mount = try mount(writingTo: vault)
        let daemon = try XCTUnwrap(daemonProcess(serving: mount.path), "the mount's daemon")
        let tracer = try faultingTracer(of: daemon, at: "fsync", fault: "error=EIO:when=1")
        addCleanup { if tracer.isRunning { kill(tracer.pid, SIGTERM) }; _ = tracer.wait() }
        let (fd, opened) = FileOps.open(mount.file(service, "token"), O_WRONLY | O_TRUNC)
        XCTAssertEqual(errnoName(opened), errnoName(0))
        XCTAssertEqual(errnoName(FileOps.write(fd, newValue)), errnoName(0), "the disk has room: the write is taken")
        XCTAssertEqual(errnoName(FileOps.close(fd)), errnoName(EIO), "close says the value was not stored")
        usleep(300_000)  // the last release comes after close returned: it must not store the value after all
        XCTAssertEqual(try value(service), oldValue, "a save through the mount: the kernel keeps the old value")
        XCTAssertEqual(try vault.digest(), before, "no vault file changed")
        XCTAssertEqual(vault.stagedFiles(), [], "no half-written file is left in tmp/")
    }

    // MARK: A writer killed at the commit

    /// XCTSkip unless strace can trace here and knows `-e inject` (strace 4.16 on).
    private func requireStraceInjection() throws {
        guard programExists("strace") else { throw XCTSkip("strace is not installed") }
        let probe = try runCommand("/usr/bin/env", ["strace", "-f", "-o", "/dev/null", "-e", "inject=\(renames):error=EIO", "/bin/true"])
        guard probe.status == 0 else {
            throw XCTSkip("strace cannot inject faults here (ptrace refused, or no -e inject): \(probe.standardError)")
        }
    }

    /// A vault holding `service/token` = "old value", then `kc set SERVICE token` of "new
    /// value" killed (SIGKILL) as it enters its first rename: the vault file's commit
    /// (strace dies of the same signal). Returns the vault, the service and what the
    /// kernel holds then, which must be the old or the new value.
    private func setKilledAtTheCommit() throws -> (vault: VaultFixture, service: String, kernel: String?) {
        try requireStraceInjection()
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        let killed = try runCommand("/usr/bin/env", ["strace", "-f", "-o", "/dev/null", "-e", "trace=" + renames,
                                                     "-e", "inject=\(renames):signal=SIGKILL", builtKC, "set", service, "token"],
                                    input: Array(newValue.utf8), environment: vault.environment)
        XCTAssertEqual(killed.status, SIGKILL, "kc set was killed at its rename: \(killed)")
        let kernel = try value(service)
        XCTAssertTrue([oldValue, newValue].contains(kernel), "the kernel holds the old or the new value: \(String(describing: kernel))")
        return (vault, service, kernel)
    }

    func testKcLockAfterAKcSetKilledAtTheCommitKeepsTheKernelsValue() throws {
        let (vault, service, kernel) = try setKilledAtTheCommit()
        XCTAssertEqual(kernel, newValue, "killed at its commit, after the kernel change: the kernel holds the new value")
        XCTAssertEqual(vault.stagedFiles().count, 1, "and the new file is still in tmp/, not in place")
        let lock = try vault.lock()
        XCTAssertEqual(lock.status, 0, "\(lock)")
        XCTAssertNil(try Keychain(service: service).data(forKey: "token"), "kc lock dropped the when-unlocked item")
        let (unlock, report) = try vault.unlock()
        XCTAssertEqual(unlock.status, 0, "\(unlock)")
        XCTAssertEqual(report?.unreadableFiles, [])
        XCTAssertEqual(try value(service), kernel, "kc unlock gives back what the kernel held before kc lock: lock saved it first")
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/token"])
    }

    func testAKcSetKilledAtTheCommitLeavesTheOldOrTheNewValueAfterAReboot() throws {
        let (vault, service, _) = try setKilledAtTheCommit()
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.unreadableFiles, [], "the vault is readable")
        XCTAssertEqual(report?.loadedCount, 1)
        let after = try value(service)
        XCTAssertTrue([oldValue, newValue].contains(after), "after a reboot: the old or the new value, \(String(describing: after))")
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/token"])
        XCTAssertEqual(vault.stagedFiles(), [], "unlock removed the file the killed writer staged")
    }

    /// Whether `pid` is still a live process (not gone, not a zombie).
    private func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = readWholeFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].dropFirst().first != "Z"
    }

    /// Waits (up to 5 s) until every thread of `pid` has a tracer.
    /// open, write and close of `path` in a child (bounded by `timeout`, so a mount that
    /// stopped answering cannot hang the test); prints 0 or close's errno.
    private static let writer = """
        import os, sys
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
        os.write(fd, sys.argv[2].encode())
        try:
            os.close(fd)
            print(0)
        except OSError as error:
            print(error.errno)
        """

    func testASaveThroughTheMountKilledAtTheCommitLeavesTheOldOrTheNewValueInBoth() throws {
        try requireStraceInjection()
        guard programExists("python3") else { throw XCTSkip("python3 is not installed") }
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        let mount = try mount(writingTo: vault)
        addCleanup { forceUnmount(mount.path) }  // a daemon killed leaves its mount behind
        guard let daemon = daemonProcess(serving: mount.path) else { return XCTFail("no kc-mountd serves \(mount.path)") }
        let tracer = try killingTracer(of: daemon, at: renames)
        var traced = true
        addCleanup {
            guard traced else { return }
            if tracer.isRunning { kill(tracer.pid, SIGTERM) }
            _ = tracer.wait()
        }
        usleep(100_000)

        let write = try runCommand("/usr/bin/timeout", ["20", "python3", "-c", Self.writer, mount.file(service, "token"), newValue])
        XCTAssertNotEqual(write.status, 124, "the writer hung: \(write)")
        let closed = Int32(write.output.trimmingCharacters(in: .whitespacesAndNewlines))
        for _ in 0..<200 where isAlive(daemon) { usleep(10_000) }
        let died = !isAlive(daemon)
        if !died { kill(tracer.pid, SIGTERM) }
        _ = tracer.wait()
        traced = false
        let outcome = "close gave \(closed.map(errnoName) ?? write.description); the daemon \(died ? "was killed at its rename" : "lives")"
        let kernel = try value(service)
        XCTAssertTrue([oldValue, newValue].contains(kernel), "the kernel holds the old or the new value: \(String(describing: kernel)); \(outcome)")
        if closed == 0 { XCTAssertEqual(kernel, newValue, "close succeeded, so the new value is stored; \(outcome)") }
        if died {
            XCTAssertEqual(kernel, newValue, "killed at its commit, after the kernel change: the kernel holds the new value; \(outcome)")
            XCTAssertEqual(vault.stagedFiles().count, 1, "and the new file is still in tmp/, not in place; \(outcome)")
        }

        XCTAssertEqual(try vault.lock().status, 0)
        let (unlock, unlockReport) = try vault.unlock()
        XCTAssertEqual(unlock.status, 0, "\(unlock)")
        XCTAssertEqual(unlockReport?.unreadableFiles, [])
        let unlocked = try value(service)
        XCTAssertEqual(unlocked, kernel, "kc lock then kc unlock gives back what the kernel held: lock saved it first; \(outcome)")

        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.unreadableFiles, [], "the vault is readable")
        let after = try value(service)
        XCTAssertTrue([oldValue, newValue].contains(after), "after a reboot: the old or the new value, \(String(describing: after)); \(outcome)")
        XCTAssertEqual(after, unlocked, "the vault holds what the kernel held")
        if closed == 0 { XCTAssertEqual(after, newValue, "close succeeded, so the new value survives a reboot; \(outcome)") }
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/token"])
        XCTAssertEqual(vault.stagedFiles(), [])
    }
}
