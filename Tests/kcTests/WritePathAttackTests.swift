import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Attacks on issue 24's write path (one journal, one order; deadline records trusted
/// alone): kill -9 at exact system calls (strace's fault injection), writers racing,
/// careless users. Each test shows one problem as a user sees it; see
/// Tools/attack24/NOTES.md for what was tried and held.
final class WritePathAttackTests: VaultTestCase {
    private func requireStrace() throws {
        guard programExists("strace") else { throw XCTSkip("strace is not installed: these tests kill kc at exact system calls with strace -e inject") }
        let probe = try runCommand("/usr/bin/env", ["strace", "-qq", "-o", "/dev/null", "-e", "trace=getpid", "-e", "inject=getpid:retval=1", "/bin/true"])
        guard probe.status == 0 else { throw XCTSkip("strace cannot trace here (ptrace refused?): \(probe.standardError)") }
    }

    /// `strace -f -e inject=SET:signal=SIGKILL:when=N kc ARGS` with `input` on standard input:
    /// kc is killed as it enters the N-th system call of SET.
    private func kcKilled(at syscalls: String, call number: Int, _ arguments: [String], input: String,
                          environment: [String: String]? = nil) throws -> CommandResult {
        try runCommand("/usr/bin/env",
                       ["strace", "-qq", "-f", "-o", "/dev/null", "-e", "trace=\(syscalls)",
                        "-e", "inject=\(syscalls):signal=SIGKILL:when=\(number)", builtKC] + arguments,
                       input: Array(input.utf8), environment: environment ?? ProcessInfo.processInfo.environment)
    }

    private func listed(_ service: String, _ name: String) throws -> ListedItem? {
        try listedItems(service).first { $0.name == name }
    }

    /// The deadline record kc keeps for a key (a key described by its serial in
    /// `kc.expiry` in the user keyring), if there is one.
    private func hasDeadlineRecord(_ serial: KeySerial) -> Bool {
        guard let table = try? SpecialKeyring.user.serial.search(type: "keyring", description: KeyName("kc.expiry")) else { return false }
        return (try? table.search(type: "user", description: KeyName(String(serial.rawValue)))) != nil
    }

    // MARK: Stale deadline records

    /// `kc set --timeout 1h S K`, then `kc set --timeout none S K` (the deadline taken
    /// away) killed at each of its keyring calls: whatever the kill left, an item /proc/keys shows without expiry
    /// keeps none after the next save through the mount (which trusts kc's deadline
    /// record alone). Found when the untimed set updated the key in place (clearing its
    /// expiry) and dropped the record after: killed between, the save gave the item its
    /// old hour back and it was gone an hour later. It now displaces a key that had a
    /// record with a new key, whose serial no old record names.
    func testAnUntimedSetKilledAtAnyStepLeavesNoRecordThatASaveTurnsIntoADeadline() throws {
        try requireStrace()
        let mount = try mount()
        let service = uniqueService()
        var bad: [String] = []
        var killedAfterUpdate = 0
        for call in 1...40 {
            XCTAssertEqual(try kc(["set", "--timeout", "1h", service, "K"], input: Array("v1".utf8)).status, 0)
            let killed = try kcKilled(at: "add_key,keyctl", call: call, ["set", "--timeout", "none", service, "K"], input: "v2")
            if killed.status == 0 { break }
            XCTAssertTrue([SIGKILL, 128 + SIGKILL].contains(killed.status), "call \(call): \(killed)")
            guard let before = try listed(service, "K") else { bad.append("call \(call): the item is gone"); continue }
            if before.secondsLeft == nil {
                // The kill came after the update: the item has no deadline now.
                killedAfterUpdate += 1
                XCTAssertEqual(procKeysExpiry(serial: before.serial), "perm")
                XCTAssertEqual(writeFile(mount.file(service, "K"), Array("v3".utf8)), 0, "save through the mount")
                if let after = try listed(service, "K"), let left = after.secondsLeft {
                    bad.append("call \(call): an item without deadline got one from a save: \(left)s left, /proc/keys \(procKeysExpiry(serial: after.serial) ?? "?")")
                }
            }
            XCTAssertEqual(try kc("rm", service, "K").status, 0)
        }
        XCTAssertGreaterThan(killedAfterUpdate, 0, "some kill came between the update and the record's removal")
        XCTAssertEqual(bad, [], "a save must not give an item a deadline it does not have (README: deadlines are never lengthened or shortened by kc)")
    }

    /// Without a vault nothing serialises writers: `Keychain.setTimeout` (setfattr
    /// user.kc.timeout) writes the record, then sets the key's timeout, while untimed
    /// `set`s of the same item run. A key with a kernel timeout must never be left
    /// without its record, which the next save would take for no deadline and make the
    /// timed item permanent (it was, when the untimed set updated the key in place and
    /// dropped the record in between).
    func testATimeoutRacingAnUntimedSetNeverLeavesATimedItemWithoutItsRecord() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("v0", forKey: "K")
        var bad: [String] = []
        var rounds = 0
        let end = Date().addingTimeInterval(20)
        while Date() < end && bad.isEmpty {
            rounds += 1
            let value = "v\(rounds)"
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if index == 0 { _ = try? keychain.setTimeout(.seconds(3600), forKey: "K") } else { try? keychain.set(value, forKey: "K") }
            }
            guard let item = try keychain.item("K") else { bad.append("round \(rounds): the item is gone"); break }
            let shown = procKeysExpiry(serial: item.serial.rawValue) ?? "?"
            if shown != "perm" && !hasDeadlineRecord(item.serial) {
                // What a user sees: a save through the mount is Keychain.replace.
                XCTAssertTrue(try keychain.replace(Array("saved".utf8), forKey: "K"))
                let after = try XCTUnwrap(try keychain.item("K"))
                bad.append("round \(rounds): the key expires (\(shown)) but has no deadline record; after a save /proc/keys shows \(procKeysExpiry(serial: after.serial.rawValue) ?? "?")")
            }
            _ = try keychain.setTimeout(nil, forKey: "K")
        }
        XCTAssertEqual(bad, [], "after \(rounds) rounds: every timeout kc set must have its record (README), or a save erases it")
    }

    // MARK: A killed write the vault never learns of

    /// `kc set S K` of a new item killed after its kernel change and before the commit
    /// (at its first rename(2), strace -e inject=rename:signal=SIGKILL:when=1): the
    /// kernel holds the item, the vault only its staged file in tmp/. `kc lock` commits
    /// a staged file whose value the kernel holds, then drops the item; `kc unlock` and a
    /// reboot bring it back (DESIGN §9: "a crash leaves old or new, in both, and unlock
    /// and lock reconcile"). Before, both went by the files alone and deleted the staged
    /// one unread: the lock left the secret readable and a reboot lost it.
    func testANewItemWhoseSetWasKilledBeforeItsCommitIsSavedByTheNextLock() throws {
        try requireStrace()
        let vault = try makeVault()
        let service = uniqueService()
        let killed = try kcKilled(at: "rename", call: 1, ["set", service, "K"], input: "v-new", environment: vault.environment)
        XCTAssertTrue([SIGKILL, 128 + SIGKILL].contains(killed.status), "killed: \(killed)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "K"), "v-new", "the kernel changed before the kill")
        XCTAssertEqual(vault.stagedFiles().count, 1, "the new value's staged file is in tmp/")

        XCTAssertEqual(try vault.lock().status, 0)
        let afterLock = try vault.get(service, "K")
        XCTAssertNotEqual(afterLock.status, 0, "kc lock left a when-unlocked item of the vault's readable: \(afterLock.output)")

        XCTAssertEqual(try vault.unlock().result.status, 0)
        let inKernel = try Keychain(service: service).string(forKey: "K")
        if inKernel != nil {
            XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/K"], "after kc lock; kc unlock the kernel holds the item and the vault does not")
        }
        _ = try rebootAndUnlock(vault)
        XCTAssertEqual(try vault.get(service, "K").output, inKernel ?? "", "after a reboot the item is not what the kernel held before it")
    }

    // MARK: A commit that fails after the kernel changed

    /// A careless user left a folder where the item's file goes (for an ordinary user a
    /// `chmod 500` of the service's folder is the same): the commit's rename(2) could
    /// not be made. That is found when the file is staged, so `kc set` fails before the
    /// kernel changes, and its "nothing was changed" is true.
    func testAWriteTheVaultCannotCommitIsRefusedBeforeTheKernelChanges() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "K", "v1").status, 0)
        let file = vault.itemFile("when-unlocked", service, "K")
        XCTAssertEqual(FileOps.unlink(file), 0)
        XCTAssertEqual(FileOps.mkdir(file), 0)
        let result = try vault.set(service, "K", "v2")
        if result.status != 0 {
            XCTAssertEqual(try Keychain(service: service).string(forKey: "K"), "v1",
                           "kc set failed (\(result.standardError.trimmingCharacters(in: .newlines))) yet the kernel holds the new value")
        }
        XCTAssertEqual(FileOps.rmdir(file), 0)
    }

    // MARK: kc lock reconciles values, levels and deadlines

    /// A deadline change through the mount (setfattr user.kc.timeout, a seven-day item
    /// cut to five minutes) whose daemon is killed after the kernel change and before the
    /// commit: the kernel holds the five-minute deadline, the file seven days. `kc lock`
    /// compares the deadline as well as the value and level, saves the kernel's, and
    /// after `kc unlock` the item has five minutes left (it had seven days again when
    /// only value and level were compared: a lock and an unlock lengthened a deadline).
    func testKcLockKeepsADeadlineChangeKilledBeforeItsCommit() throws {
        try requireStrace()
        let vault = try makeVault()
        let mount = try mount(writingTo: vault)
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "K", "v1", options: ["--access", "after-first-unlock", "--timeout", "7d"]).status, 0)
        XCTAssertTrue(FileOps.exists(mount.file(service, "K")))
        let daemon = try XCTUnwrap(daemonProcess(serving: mount.path), "the mount's daemon")
        let tracer = try killingTracer(of: daemon, at: "rename", when: "1")
        usleep(100_000)
        let setfattr = try runCommand("/usr/bin/setfattr", ["-n", "user.kc.timeout", "-v", "300", mount.file(service, "K")])
        _ = tracer.wait()
        XCTAssertNotEqual(setfattr.status, 0, "the daemon was killed at the commit's rename")
        let killed = try XCTUnwrap(try listed(service, "K"))
        let left = try XCTUnwrap(killed.secondsLeft)
        XCTAssertLessThanOrEqual(left, 300, "the kernel changed before the kill")

        XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.unlock().result.status, 0)
        let relocked = try XCTUnwrap(try listed(service, "K"))
        XCTAssertLessThanOrEqual(relocked.secondsLeft ?? .max, 300,
                                 "after kc lock; kc unlock the item's deadline is the file's old one, not the kernel's: \(relocked.secondsLeft.map { "\($0)s" } ?? "none") left")
    }
}
