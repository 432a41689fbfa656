import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `kc vault boot` cannot be held up by one user (issue 26, finding 5). Two throwaway
/// accounts with vaults of `always` items at the default place in their homes; the
/// first mounts its own `kc mount` in its vault folder and stops the daemon
/// (`kill -STOP`), which makes every call that reaches that filesystem wait. The boot
/// load, as root with a host key, must still end, name that user, and load the other's
/// items. Root only, with FUSE; real kernel, real mount, real users.
final class VaultBootDeadlineTests: VaultTestCase {
    private static let stuck = TestAccount("kc-test-boot-stuck", groups: [])
    private static let next = TestAccount("kc-test-boot-next", groups: [])

    func testAMountStoppedInsideAVaultIsRefusedAndEveryOtherItemLoads() throws {
        let hostKey = try makeHostKey()
        let stuckHome = try accountWithVault(Self.stuck, hostKey: hostKey, items: ["kept": "first user value"])
        _ = try accountWithVault(Self.next, hostKey: hostKey, items: ["token": "second user value"])
        // A service folder of the first user's always items, with a stopped filesystem on it.
        let mountPoint = stuckHome.path + "/items/always/kc-test-mounted"
        try stoppedMount(by: Self.stuck, at: mountPoint, home: stuckHome) {
            let started = Date()
            let boot = try bootLoad([Self.stuck.name, Self.next.name], hostKey: hostKey)
            let elapsed = Date().timeIntervalSince(started)

            XCTAssertLessThan(elapsed, 20, "refused, not waited for until the 30 s deadline: \(boot)")
            XCTAssertEqual(boot.status, 2, "a folder was not loaded: \(boot)")
            XCTAssertEqual(boot.output, """
                kc: \(Self.stuck.name): loaded 1 always items, 0 already loaded, 0 wait for an unlock
                kc: \(Self.next.name): loaded 1 always items, 0 already loaded, 0 wait for an unlock

                """, "\(boot)")
            XCTAssertEqual(boot.standardError, "kc: \(Self.stuck.name): not loaded: \(mountPoint): is a mount point: another filesystem is mounted "
                + "in the vault folder, and kc does not look into it (a filesystem whose daemon is stopped would make kc wait for ever); "
                + "unmount it ('fusermount3 -u \(mountPoint)', or as root 'umount \(mountPoint)'), then try again\n")
            XCTAssertEqual(try itemValue(of: Self.stuck, "kept"), "first user value", "the first user's other items load")
            XCTAssertEqual(try itemValue(of: Self.next, "token"), "second user value", "the next user's items load")
        }
    }

    func testAUserWhoseVaultDoesNotAnswerIsStoppedAtTheDeadlineAndTheNextUserStillLoads() throws {
        let hostKey = try makeHostKey()
        let stuckHome = try accountWithVault(Self.stuck, hostKey: hostKey, items: ["kept": "first user value"])
        _ = try accountWithVault(Self.next, hostKey: hostKey, items: ["token": "second user value"])
        // On the vault folder itself: the load cannot look at the vault without asking it.
        try stoppedMount(by: Self.stuck, at: stuckHome.path, home: stuckHome) {
            let deadline = 3
            let started = Date()
            let boot = try bootLoad([Self.stuck.name, Self.next.name], hostKey: hostKey, deadline: deadline)
            let elapsed = Date().timeIntervalSince(started)

            XCTAssertGreaterThanOrEqual(elapsed, Double(deadline), "\(boot)")
            XCTAssertLessThan(elapsed, Double(deadline) + 12, "the deadline, a moment to kill, and the next user: \(boot)")
            XCTAssertEqual(boot.status, 2, "\(boot)")
            XCTAssertEqual(boot.output, "kc: \(Self.next.name): loaded 1 always items, 0 already loaded, 0 wait for an unlock\n", "\(boot)")
            XCTAssertEqual(boot.standardError, "kc: \(Self.stuck.name): not loaded: the load did not end within 3 seconds and was stopped; "
                + "something in or above \(stuckHome.path) does not answer, such as a filesystem mounted there whose daemon is stopped (a stopped 'kc mount'); "
                + "unmount it, then run 'sudo kc vault boot --user \(Self.stuck.name)' (or 'kc unlock' as \(Self.stuck.name)); the other users' items still load\n")
            XCTAssertEqual(try itemValue(of: Self.next, "token"), "second user value", "the next user's items load")
        }
    }

    func testALoadTheKernelCannotEndIsLeftBehindAndTheNextUserStillLoads() throws {
        guard programExists("strace") else { throw XCTSkip("strace is needed to stop the daemon as it answers") }
        let hostKey = try makeHostKey()
        let stuckHome = try accountWithVault(Self.stuck, hostKey: hostKey, items: ["kept": "first user value"])
        _ = try accountWithVault(Self.next, hostKey: hostKey, items: ["token": "second user value"])
        // The daemon takes the load's first request and never answers it: the kernel
        // waits for that answer even after SIGKILL (state D), until the daemon dies.
        try stoppedMount(by: Self.stuck, at: stuckHome.path, home: stuckHome, stop: .asItAnswers) {
            let deadline = 3
            let output = stuckHome.dataHome + "/boot"
            let started = Date()
            // Output into files, and started without Foundation's Process: the process
            // left behind keeps open what kc was given (Process's pipes, and the socket
            // by which it tells that a child ended), and runCommand would wait for it.
            let boot = try SpawnedProcess("/usr/bin/timeout", ["-s", "KILL", "120", "/usr/bin/env", "-i", "KC_HOST_KEY_DIR=\(hostKey)", "PATH=/usr/bin:/bin",
                                                               "/bin/sh", "-c", "exec \"$0\" \"$@\" >'\(output).out' 2>'\(output).err'",
                                                               builtKC, "vault", "boot", "--user", Self.stuck.name, "--user", Self.next.name,
                                                               "--deadline", String(deadline)]).wait()
            let elapsed = Date().timeIntervalSince(started)

            XCTAssertGreaterThanOrEqual(elapsed, Double(deadline + 5), "the deadline, then 5 s for the killed process to end: \(boot)")
            XCTAssertLessThan(elapsed, Double(deadline + 5) + 10, "and no longer: \(boot)")
            XCTAssertEqual(boot.status, 2, "\(boot)")
            XCTAssertEqual(readWholeFile(output + ".out"), "kc: \(Self.next.name): loaded 1 always items, 0 already loaded, 0 wait for an unlock\n")
            XCTAssertEqual(readWholeFile(output + ".err"), "kc: \(Self.stuck.name): not loaded: the load did not end within 3 seconds and was stopped "
                + "(its process is stuck in the kernel and was left behind); "
                + "something in or above \(stuckHome.path) does not answer, such as a filesystem mounted there whose daemon is stopped (a stopped 'kc mount'); "
                + "unmount it, then run 'sudo kc vault boot --user \(Self.stuck.name)' (or 'kc unlock' as \(Self.stuck.name)); the other users' items still load\n")
            XCTAssertNotNil(bootStep(of: Self.stuck), "its load is still there, waiting in the kernel")
            XCTAssertEqual(try itemValue(of: Self.next, "token"), "second user value", "the next user's items load")
        }
        // Unmounted and its daemon killed: the kernel ends the request, and the load.
        var waited = 0
        while bootStep(of: Self.stuck) != nil && waited < 100 {
            usleep(100_000)
            waited += 1
        }
        XCTAssertNil(bootStep(of: Self.stuck), "once the daemon is gone, the process left behind ends")
    }

    func testTheLoadOfEveryAccountPassesOverAUserWithoutAVaultInSilence() throws {
        let hostKey = try makeHostKey()
        guard Self.next.ensure() else { throw XCTSkip("could not create the test account \(Self.next.name)") }
        let home = try makeVault(owner: Self.next.name, inHome: true)
        try pointHome(of: Self.next, at: home.dataHome)
        let step = try runCommand(builtKC, ["vault", "boot", "--step", Self.next.name, "--only-if-any"],
                                  environment: ["KC_HOST_KEY_DIR": hostKey, "PATH": "/usr/bin:/bin"])
        XCTAssertEqual(step.status, 0, "\(step)")
        XCTAssertEqual(step.output + step.standardError, "", "nothing to load, nothing to say")
    }

    func testTheBootUnitHasAStartTimeoutAboveManyUsersDeadlines() throws {
        let unit = try String(contentsOfFile: Self.repository + "/Tools/systemd/kc-vault-boot.service", encoding: .utf8)
        let lines = unit.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("Type=oneshot"), unit)
        XCTAssertTrue(lines.contains("ExecStart=/usr/local/bin/kc vault boot"), unit)
        // A oneshot unit has no start timeout unless it names one: a load that hung
        // would keep it starting for ever, and its timer would never fire again.
        let timeout = lines.first { $0.hasPrefix("TimeoutStartSec=") }.map { String($0.dropFirst("TimeoutStartSec=".count)) }
        XCTAssertEqual(timeout, "20min", unit)
        let perUser = 30 + 5  // kc vault boot's default --deadline, and the wait after the kill
        XCTAssertGreaterThanOrEqual(20 * 60 / perUser, 30, "room for 30 users who each hit the deadline")
        if programExists("systemd-analyze") {
            let parsed = try runCommand("/usr/bin/env", ["systemd-analyze", "timespan", timeout ?? ""])
            XCTAssertTrue(parsed.output.contains("μs: 1200000000"), "systemd reads it as 20 minutes: \(parsed)")
        }
    }

    // MARK: - Helpers

    /// The repository (this file is Tests/kcTests/VaultBootDeadlineTests.swift).
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// A host key of the test's own (`kc vault host-init` with `KC_HOST_KEY_DIR`).
    private func makeHostKey() throws -> String {
        guard getuid() == 0 else { throw XCTSkip("needs root: the host key is root's, and the test acts as two users") }
        let folder = try makeVault(create: false)
        XCTAssertEqual(chmod(folder.dataHome, 0o755), 0)
        let hostKey = folder.dataHome + "/host"
        let made = try runCommand(builtKC, ["vault", "host-init"], environment: ["KC_HOST_KEY_DIR": hostKey, "PATH": "/usr/bin:/bin"])
        guard made.status == 0 else { throw XCTSkip("kc vault host-init failed: \(made)") }
        return hostKey
    }

    /// Points the account's home at `home` (the boot load finds the vault there); put
    /// back to /nonexistent, its keyrings emptied, at tearDown.
    private func pointHome(of account: TestAccount, at home: String) throws {
        let moved = try runCommand("/usr/sbin/usermod", ["-d", home, account.name])
        guard moved.status == 0 else { throw XCTSkip("usermod -d failed: \(moved)") }
        addCleanup {
            _ = try? account.run("keyctl clear @u; keyctl clear \"$(keyctl get_persistent @s)\"; true")
            _ = try? runCommand("/usr/sbin/usermod", ["-d", "/nonexistent", account.name])
        }
    }

    /// The account with a fresh home holding a vault whose always items (service
    /// `kc-test.boot`) are encrypted to the host key too; then emptied keyrings, as
    /// after a reboot.
    private func accountWithVault(_ account: TestAccount, hostKey: String, items: [String: String]) throws -> VaultFixture {
        guard account.ensure() else { throw XCTSkip("could not create the test account \(account.name)") }
        let home = try makeVault(owner: account.name, inHome: true)
        try pointHome(of: account, at: home.dataHome)
        let sets = items.map { name, value in "printf '%s' '\(value)' | \"$KC\" set --access always kc-test.boot \(name) || echo 'set failed'" }
        let made = try account.run("""
            HOME='\(home.dataHome)'; KC_HOST_KEY_DIR='\(hostKey)'; export HOME KC_HOST_KEY_DIR; unset XDG_DATA_HOME
            printf '%s' '\(VaultFixture.passphrase)' | "$KC" vault init --work-factor \(VaultFixture.workFactor) 2>/dev/null || echo 'init failed'
            \(sets.joined(separator: "\n"))
            keyctl clear @u; keyctl clear "$(keyctl get_persistent @s)"
            """)
        XCTAssertEqual(made.status, 0, "\(made)")
        XCTAssertEqual(made.output, "", "\(made)")
        return home
    }

    enum Stop {
        /// `kill -STOP` now: requests wait in the kernel's queue, not taken.
        case now
        /// At its first answer, which is lost: strace fails its first writev (ENOENT,
        /// which libfuse takes quietly) and stops it. It has taken the request, so the
        /// process that made it cannot end until the daemon dies.
        case asItAnswers
    }

    /// Mounts the account's own `kc mount` at `path` (made if missing), stops its
    /// daemon, runs `body`, and in every case resumes and unmounts it. XCTSkip without
    /// FUSE. The daemon keeps no vault (`XDG_DATA_HOME` points nowhere), so it never
    /// reads the folder it is mounted on.
    private func stoppedMount(by account: TestAccount, at path: String, home: VaultFixture, stop: Stop = .now,
                              _ body: () throws -> Void) throws {
        try MountFixture.requireFUSE()
        guard UnprivilegedUser.grantFUSEDevice(to: account.name) else { throw XCTSkip("\(account.name) cannot open /dev/fuse here") }
        let mounted = try account.run("HOME='\(home.dataHome)' XDG_DATA_HOME=/nonexistent; export HOME XDG_DATA_HOME; umask 077; "
            + "mkdir -p '\(path)' && \"$KC\" mount '\(path)'")
        guard mounted.status == 0 else { throw XCTSkip("kc mount as \(account.name) failed here: \(mounted)") }
        let served = daemonProcess(serving: path)
        var tracer: SpawnedProcess? = nil
        defer {
            if let tracer { kill(tracer.pid, SIGKILL); _ = tracer.wait() }
            if let served { kill(served, SIGCONT) }
            forceUnmount(path)
            if let served { kill(served, SIGKILL) }
        }
        guard let daemon = served else { return XCTFail("no kc-mountd serves \(path)") }
        switch stop {
        case .now: XCTAssertEqual(kill(daemon, SIGSTOP), 0)
        case .asItAnswers: tracer = try faultingTracer(of: daemon, at: "writev", fault: "error=ENOENT:signal=SIGSTOP:when=1")
        }
        try body()
    }

    /// The pid of `kc vault boot --step USER` for this account, if one runs.
    private func bootStep(of account: TestAccount) -> pid_t? {
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return processes.compactMap { pid_t($0) }.first { pid in
            guard let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let arguments = command.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return arguments.dropFirst().starts(with: ["vault", "boot", "--step", account.name])
        }
    }

    /// `kc vault boot --user A --user B [--deadline N]` as root, as the unit runs it
    /// (with the test's host key), killed by the harness if it ever takes two minutes.
    private func bootLoad(_ users: [String], hostKey: String, deadline: Int? = nil) throws -> CommandResult {
        let arguments = users.flatMap { ["--user", $0] } + (deadline.map { ["--deadline", String($0)] } ?? [])
        return try runCommand("/usr/bin/timeout", ["-s", "KILL", "120", builtKC, "vault", "boot"] + arguments,
                              environment: ["KC_HOST_KEY_DIR": hostKey, "PATH": "/usr/bin:/bin"])
    }

    /// The item `kc-test.boot/name` as the account reads it (its persistent keyring).
    private func itemValue(of account: TestAccount, _ name: String) throws -> String {
        try account.run("XDG_DATA_HOME=/nonexistent \"$KC\" get kc-test.boot \(name)").output
    }
}
