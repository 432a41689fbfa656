import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Logins never wait on kc, and every failure of kc's at login is said where an
/// administrator and the user look (issue 36): through Debian's own stack with kc
/// switched on by pam-auth-update, driven by pamtester, as the test account.
extension VaultLoginTests {
    private var uid: String { VaultAccount.uid }

    /// A FUSE filesystem of the account's own, answering nothing, over `folder` (the
    /// folder above the vault): what any local user can do to their own home. A process
    /// that looks inside is stuck in the kernel, even after SIGKILL, until the daemon
    /// ends. Unmounted at cleanup, after which every such process ends.
    private func mountUnansweringFilesystem(over folder: String) throws {
        guard FileOps.exists("/dev/fuse"), programExists("fusermount3") else { throw XCTSkip("no /dev/fuse or fusermount3 here") }
        guard UnprivilegedUser.grantFUSEDevice(to: VaultAccount.name) else { throw XCTSkip("\(VaultAccount.name) cannot use /dev/fuse here") }
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        daemon.arguments = ["-u", VaultAccount.name, "--", "/usr/bin/python3", Self.repository + "/Tools/review/unanswering_fuse.py", folder]
        let output = Pipe()
        daemon.standardOutput = output
        try daemon.run()
        addCleanup {
            daemon.terminate()
            _ = try? runCommand("/bin/fusermount3", ["-u", "-z", folder])
            daemon.waitUntilExit()
            // The processes that were stuck in it end now.
            for _ in 0..<100 where (try? runShell("pgrep -u \(self.uid) -f 'unlock --pam'"))?.status == 0 { usleep(50_000) }
        }
        let ready = output.fileHandleForReading.availableData
        guard String(decoding: ready, as: UTF8.self).contains("ready") else { throw XCTSkip("the FUSE daemon did not start: \(String(decoding: ready, as: UTF8.self))") }
    }

    /// A kc stuck in the kernel (the user's own FUSE mount over the vault's folder, which
    /// never answers) used to hold the login for good: pam_kc killed it after 60 s, then
    /// waited on it with a blocking waitpid, and SIGKILL cannot end a process in a FUSE
    /// request the daemon has read. Now the login goes on at the budget, for the whole
    /// login: the session step finds it spent and is skipped; both are logged.
    func testAKcStuckInTheKernelNeverHoldsTheLoginPastItsBudget() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-hung"
        let home = try accountWithVault(service: service)
        let stack = try loginService(try debianStack(["--enable", "kc"]), options: "budget=1.5")
        try mountUnansweringFilesystem(over: home.dataHome + "/.local/share")
        let log = try DatagramReceiver.listenAsSyslog()
        defer { log.close() }

        let started = Date()
        // `timeout`: a login that waits for good (the old module) fails the test, not the suite.
        let login = try runCommand("/usr/bin/timeout", ["30", "/usr/bin/pamtester", stack, VaultAccount.name, "authenticate", "open_session"],
                                   input: Array((password + "\n").utf8))
        let took = Date().timeIntervalSince(started)
        XCTAssertEqual(login.status, 0, "the login goes on: \(login)")
        XCTAssertLessThan(took, 10, "the login waited \(took) s on a kc stuck in the kernel (budget 1.5 s)")
        let killed = log.receive(within: 3) { $0.contains("was still running when the login's 1500 ms for kc ran out") }
        XCTAssertNotNil(killed, "the kill at the budget is logged")
        XCTAssertTrue(killed?.contains("pam_kc(\(stack):auth): user \(VaultAccount.name): kc auth (pid ") ?? false, killed ?? "")
        XCTAssertTrue(killed?.contains("stuck in the kernel") ?? false, killed ?? "")
        let skipped = log.receive(within: 3) { $0.contains("its session step is skipped") }
        XCTAssertNotNil(skipped, "the session step does not get a second budget")
        let stuck = try runShell("for p in $(pgrep -u \(uid) -f 'unlock --pam'); do cut -d')' -f2 /proc/$p/stat | cut -c2; done | grep -c D")
        XCTAssertEqual(stuck.output, "1\n", "the stuck kc is left to init, not waited on: \(stuck)")
        // kc read the password as root and then became the user: not dumpable, so none
        // of the user's processes can trace it and take the password (/proc shows a
        // process that is not dumpable as root's).
        let owner = try runShell("for p in $(pgrep -u \(uid) -f 'unlock --pam'); do stat -c %U /proc/$p/status; done")
        XCTAssertEqual(owner.output, "root\n", "the user's kc cannot be traced by the user: \(owner)")

        // A password change has one budget for its two passes: root's `passwd USER`
        // waits for the check once, and the update is skipped and logged.
        let reset = "Reset-\(UUID().uuidString.prefix(10))"
        let changeStarted = Date()
        let change = try runCommand("/usr/bin/timeout", ["30", "/usr/bin/pamtester", stack, VaultAccount.name, "chauthtok"],
                                    input: Array("\(reset)\n\(reset)\n".utf8))
        XCTAssertEqual(change.status, 0, "\(change)")
        XCTAssertLessThan(Date().timeIntervalSince(changeStarted), 10)
        XCTAssertNotNil(log.receive(within: 3) { $0.contains("were spent in its check; the vault's passphrase did not follow: run 'kc vault passwd'") })
    }

    /// pam_kc ran kc by path after checking it by path: a user able to write in kc's
    /// folder (a group-writable /usr/local/bin) could swap in a program of theirs between
    /// the two and get every login's password. Now every folder above kc must be root's
    /// and writable by no one else, and the module runs the very file it checked.
    func testKCInAFolderOthersCanWriteInIsNeverRun() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-folder"
        let home = try accountWithVault(service: service)
        let folder = try makeVault(create: false).dataHome + "/shared-bin"
        XCTAssertEqual(try runShell("mkdir -p '\(folder)' && cp '\(VaultAccount.kcPath)' '\(folder)/kc' && chmod 755 '\(folder)/kc' && chmod 2775 '\(folder)'").status, 0)
        XCTAssertEqual(chmod(folder + "/..", 0o755), 0)
        let stack = try loginService(try debianStack(["--enable", "kc"]), kc: folder + "/kc")
        let log = try DatagramReceiver.listenAsSyslog()
        defer { log.close() }
        XCTAssertEqual(try pamtester(stack, ["authenticate", "open_session"], password: password).status, 0)
        XCTAssertNotNil(log.receive(within: 3) { $0.contains("not running kc from \(folder): \(folder) must be a folder of root's that no one else can write in") })
        XCTAssertEqual(try accountView(service, home: home).output, " user=1\n boot=1\nunlocked=0\n", "kc did not run")
    }

    /// A user the system's name service knows but /etc/passwd does not (LDAP, SSSD,
    /// extrausers): the static kc cannot use NSS, so it said "no user named ..." and
    /// unlocked nothing. pam_kc looks the user up and gives kc the ids, groups and HOME
    /// (KC_PAM_UID, KC_PAM_GID, KC_PAM_GROUPS); kc switches to them and asks no user
    /// database.
    func testKCStartedAsTheUserUnlocksForANameNoDatabaseOfItsOwnKnows() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: a test account") }
        let service = "kc-test.\(getpid()).vault-nss"
        let home = try accountWithVault(service: service)
        let ghost = "kc-nss-only-\(getpid())"
        XCTAssertNotEqual(try runCommand("/usr/bin/getent", ["passwd", ghost]).status, 0, "\(ghost) is in no user database")
        let gid = try runShell("id -g \(VaultAccount.name)").output.trimmingCharacters(in: .whitespacesAndNewlines)
        // As pam_kc starts it: as root, with the account the name service gave.
        let step = try runCommand("/usr/bin/keyctl", ["session", "-", "/usr/bin/env", "-i", "PAM_USER=\(ghost)", "PAM_TYPE=auth", "HOME=\(home.dataHome)",
                                                      "KC_PAM_UID=\(uid)", "KC_PAM_GID=\(gid)", "KC_PAM_GROUPS=\(gid)", VaultAccount.kcPath, "unlock", "--pam"],
                                  input: Array(password.utf8))
        XCTAssertEqual(step.status, 0, "\(step)")
        XCTAssertEqual(VaultAccount.withoutSessionNotice(step).standardError, "", "\(step)")
        XCTAssertEqual(try accountView(service, home: home).output, "boot\talways\nuser\tafter-first-unlock\nuser value user=0\nboot value boot=0\nunlocked=1\n",
                       "after-first-unlock and always items loaded")
        XCTAssertFalse(vaultStatus(home).contains("\"lastError\""), vaultStatus(home))
    }

    /// pam_keyinit links the user keyring into each new login's session keyring (`keyctl
    /// link @u @s`, with the user's real uid and root's effective uid: a possessor). kc
    /// took every possessor right off the user keyring the first time it ran, and every
    /// later login's session lost the user keyring until reboot: `request_key` and
    /// `keyctl search @s` from a login no longer found what the user keeps there.
    func testLaterLoginsStillHaveTheUserKeyringLinkedInTheirSession() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-keyinit"
        let home = try accountWithVault(service: service)
        let description = "kc-test-\(getpid())-request"
        XCTAssertEqual(try VaultAccount.run("keyctl add user \(description) found @u >/dev/null && \"$KC\" vault status >/dev/null", vault: home).status, 0)
        addCleanup { _ = try? VaultAccount.run("keyctl purge user \(description) >/dev/null", vault: home) }
        let output = home.dataHome + "/../keyinit-\(UUID().uuidString.prefix(6)).txt"
        let script = home.dataHome + "/../keyinit-\(UUID().uuidString.prefix(6)).sh"
        try """
            #!/bin/sh
            gid=$(id -g "$PAM_USER")
            setpriv --reuid=\(uid) --regid="$gid" --clear-groups sh -c 'keyctl show @s | grep -c "keyring: _uid.\(uid)$"; keyctl request user \(description) >/dev/null && echo requested' > "$1" 2>&1
            """.write(toFile: script, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(script, 0o755), 0)
        addCleanup { try? FileManager.default.removeItem(atPath: script); try? FileManager.default.removeItem(atPath: output) }
        let stack = try loginService(try debianStack(["--enable", "kc"]), record: (script, output))

        for login in 1...2 {
            let result = try pamtester(stack, ["authenticate", "open_session"], password: password)
            XCTAssertEqual(result.status, 0, "\(result)")
            XCTAssertEqual(readWholeFile(output), "1\nrequested\n", "login \(login): the user keyring is linked in the session, and request_key finds through it")
        }
        let mask = try VaultAccount.run("keyctl rdescribe @u | cut -d';' -f4", vault: home).output
        XCTAssertEqual(mask, "183f0000\n", "possessors may search and link the user keyring, nothing more")
    }

    /// `passwd` with the vault's disk full changed the login password but not the vault's
    /// passphrase, and said nothing anywhere. Now the preliminary pass says so to the user
    /// before the password changes, the auth log has it, and the status (written over its
    /// own block when no new file fits) tells the next unlock with the command that fixes it.
    func testPasswdSaysBeforeTheChangeWhenTheVaultCannotFollowIt() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, a tmpfs, and a test account") }
        let service = "kc-test.\(getpid()).vault-full"
        let home = try accountWithVault(service: service)
        // The account's ~/.local on a small tmpfs of its own, the vault copied in, then filled.
        let local = home.dataHome + "/.local", saved = home.dataHome + "/local-saved"
        XCTAssertEqual(try runShell("mv '\(local)' '\(saved)' && mkdir '\(local)'").status, 0)
        let gid = try runShell("id -g \(VaultAccount.name)").output.trimmingCharacters(in: .whitespacesAndNewlines)
        let mounted = try runCommand("/bin/mount", ["-t", "tmpfs", "-o", "size=256k,mode=0700,uid=\(uid),gid=\(gid)", "tmpfs", local])
        guard mounted.status == 0 else { throw XCTSkip("cannot mount a tmpfs here: \(mounted.standardError)") }
        addCleanup { _ = try? runCommand("/bin/umount", [local]) }
        XCTAssertEqual(try runShell("cp -a '\(saved)/.' '\(local)/'").status, 0)
        _ = try VaultAccount.run("printf '%s' '\(password)' | \"$KC\" unlock >/dev/null 2>&1; \"$KC\" lock >/dev/null 2>&1", vault: home)  // a status file exists, as after any login
        let fill = try runShell("runuser -u \(VaultAccount.name) -- sh -c \"dd if=/dev/zero of='\(local)/fill' bs=4k; dd if=/dev/zero of='\(local)/fill2' bs=1\" 2>/dev/null; df -k '\(local)' | tail -1")
        XCTAssertTrue(fill.output.contains(" 100% "), "the tmpfs is full: \(fill)")
        let stack = try loginService(try debianStack(["--enable", "kc"]))
        let log = try DatagramReceiver.listenAsSyslog()
        defer { log.close() }

        let changed = "Changed-\(UUID().uuidString.prefix(10))"
        let passwd = try runCommand("/usr/bin/setpriv", ["--ruid=\(VaultAccount.name)", "/usr/bin/pamtester", stack, VaultAccount.name, "chauthtok"],
                                    input: Array("\(password)\n\(changed)\n\(changed)\n".utf8))
        XCTAssertEqual(passwd.status, 0, "the login password still changes: \(passwd)")
        XCTAssertTrue((passwd.output + passwd.standardError).contains("kc: your vault's passphrase cannot follow a new password now: no room on the vault's disk"),
                      "the user is told, in passwd, before the change: \(passwd)")
        XCTAssertNotNil(log.receive(within: 3) { $0.contains("pam_kc(\(stack):chauthtok): user \(VaultAccount.name): kc: your vault's passphrase cannot follow") })
        let status = vaultStatus(home)
        XCTAssertTrue(status.contains("\"loginPasswordAhead\" : "), "the next unlock and the status know: \(status)")
        XCTAssertTrue(status.contains("could not follow it") && status.contains("run 'kc vault passwd'"), status)
        XCTAssertFalse(status.contains(password) || status.contains(changed), "no password in the status")
        let unlock = try VaultAccount.run("printf '%s' '\(changed)' | \"$KC\" unlock", vault: home)
        XCTAssertEqual(unlock.status, 2)
        XCTAssertTrue(unlock.standardError.contains("unlock with that, then run 'kc vault passwd'"), unlock.standardError)
    }

    /// Failures nobody saw: a vault folder kc refuses (open to others), a root password
    /// reset (chpasswd), a user no database knows, and `su USER` (no dash), whose session
    /// shares root's session keyring. Each is one line in the auth log that says what to
    /// do; the su case is not the vault's problem, and leaves its status alone.
    func testEveryFailureAtLoginIsOneLineInTheAuthLog() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-said"
        let home = try accountWithVault(service: service)
        let root = try debianStack(["--enable", "kc"])
        let stack = try loginService(root)
        let log = try DatagramReceiver.listenAsSyslog()
        defer { log.close() }
        func line(_ step: String, _ text: String) -> String? {
            log.receive(within: 3) { $0.contains("pam_kc(\(stack):\(step)): user \(VaultAccount.name): kc: ") && $0.contains(text) }
        }

        // The vault's folder open to other users: refused, and said with the fix.
        XCTAssertEqual(chmod(home.path, 0o755), 0)
        XCTAssertEqual(try pamtester(stack, ["authenticate", "open_session"], password: password).status, 0)
        let refused = line("auth", "chmod 700")
        XCTAssertNotNil(refused, "the refused folder is in the auth log with its fix")
        XCTAssertFalse(refused?.contains(password) ?? true)
        XCTAssertEqual(chmod(home.path, 0o700), 0)

        // Root resets the password (chpasswd's way: PAM has no old one).
        let reset = "Reset-\(UUID().uuidString.prefix(10))"
        XCTAssertEqual(try runCommand("/usr/bin/pamtester", [stack, VaultAccount.name, "chauthtok"], input: Array("\(reset)\n\(reset)\n".utf8)).status, 0)
        XCTAssertNotNil(line("chauthtok", "was set without the old one"), "a root reset is in the auth log")

        // A session that shares root's session keyring (su without '-', sudo -u): one line,
        // nothing loaded into root's keyring, and the vault's status keeps what it had.
        let before = vaultStatus(home)
        let session = "kc-test-\(getpid())-shared-session"
        try "auth required pam_permit.so\naccount required pam_permit.so\n@include \(root)/etc/pam.d/login-session\n"
            .write(toFile: "/etc/pam.d/" + session, atomically: true, encoding: .utf8)
        addCleanup { try? FileManager.default.removeItem(atPath: "/etc/pam.d/" + session) }
        let shared = try runCommand("/usr/bin/keyctl", ["session", "-", "/usr/bin/pamtester", session, VaultAccount.name, "open_session"])
        XCTAssertEqual(shared.status, 0, "\(shared)")
        let said = log.receive(within: 3) { $0.contains("pam_kc(\(session):session): user \(VaultAccount.name): kc: this session shares the session keyring of uid 0") }
        XCTAssertNotNil(said)
        XCTAssertEqual(vaultStatus(home), before, "not the vault's problem: its status is as it was")

        // A user no database knows: said by the module, kc is not run.
        let ghost = "kc-test-\(getpid())-ghost"
        try "session optional \(try builtModule()) kc=\(VaultAccount.kcPath)\n".write(toFile: "/etc/pam.d/" + ghost, atomically: true, encoding: .utf8)
        addCleanup { try? FileManager.default.removeItem(atPath: "/etc/pam.d/" + ghost) }
        _ = try runCommand("/usr/bin/pamtester", [ghost, "kc-no-such-user-\(getpid())", "open_session"])
        XCTAssertNotNil(log.receive(within: 3) { $0.contains("kc: no user named kc-no-such-user-\(getpid()) in the system's user database") })
    }
}
