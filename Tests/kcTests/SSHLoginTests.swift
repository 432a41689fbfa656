import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Real logins through a real sshd (README: unlock at login): OpenSSH on 127.0.0.1 with
/// `UsePAM yes`, Debian's /etc/pam.d/sshd and the common-* files pam-auth-update makes
/// with kc's profile switched on, pam_kc.so as built here. Users: a local one with a vault
/// sealed with their login password, a local one without a vault, and one only
/// libnss-extrausers knows, with a vault. Everything runs in the server's own mount and
/// PID namespaces (``LoginSandbox``): the machine's /etc, /var/lib/extrausers and
/// /dev/log never change. Root only; each test skips with the reason where it cannot run.
final class SSHLoginTests: KeyringTestCase {
    private var servers: [LoginSandbox] = []

    override func tearDownWithError() throws {
        for server in servers.reversed() {
            XCTAssertEqual(server.stop(), [], "no process of the server's namespace outlives it")
        }
        servers = []
        try super.tearDownWithError()
    }

    private func startServer(budget: Double? = nil) throws -> LoginSandbox {
        let server = try LoginSandbox(budget: budget, sshd: true)
        servers.append(server)
        return server
    }

    private func makeVault(_ server: LoginSandbox, _ account: LoginSandbox.Account, service: String) throws {
        let made = try server.makeVault(account, service: service)
        XCTAssertEqual(made.output, "", "\(made)")
    }

    /// A remote command that prints what the login got, before anything else runs kc in
    /// it: the value of `session` in the service keyring linked directly in the login's
    /// session keyring (put there by kc's session step), then `kc get` of both items,
    /// whether the vault is unlocked and has a last error, and whether pam_kc's
    /// bookkeeping variable leaked into the login's environment.
    private func loginView(_ server: LoginSandbox, service: String) -> String {
        """
        \(LoginSandbox.sessionItemScript(service: service, item: "session"))
        \(server.kc) get \(service) session; echo " session=$?"
        \(server.kc) get \(service) user; echo " user=$?"
        echo "unlocked=$(\(server.kc) vault status --json | grep -c '"unlocked" : true')"
        echo "lastError=$(\(server.kc) vault status --json | grep -c '"lastError"')"
        echo "PAM_KC_SPENT_MS=$(env | grep -c '^PAM_KC_SPENT_MS=')"
        """
    }

    private static let unlockedView = "session value\nsession value session=0\nuser value user=0\nunlocked=1\nlastError=0\nPAM_KC_SPENT_MS=0\n"

    /// pam_kc's lines in what was logged.
    private func kcLines(_ lines: [String]) -> [String] {
        lines.filter { $0.contains("pam_kc(") }
    }

    func testAnSSHLoginByPasswordOrKeyboardInteractiveUnlocksTheVaultAndTheSessionHasItsItems() throws {
        let server = try startServer()
        let user = try server.addLocalUser("vault", password: LoginSandbox.newPassword())
        let service = "kc-test.\(getpid()).ssh-login"
        try makeVault(server, user, service: service)

        // sshd runs PAM's auth in its monitor for "password", in a child of its own for
        // "keyboard-interactive"; the session steps run in the monitor for both.
        for method in [LoginSandbox.Method.password, .keyboardInteractive] {
            server.simulateReboot(user)
            _ = server.drainLog()
            let (login, seconds) = try server.ssh(user, loginView(server, service: service), method: method)
            XCTAssertEqual(login.status, 0, "\(method): \(login)\n\(server.diagnostics)")
            XCTAssertEqual(login.output, Self.unlockedView,
                           "\(method): the auth step unlocked the locked vault and the session step loaded the when-unlocked item into the login's session keyring: \(login)\n\(server.diagnostics)")
            XCTAssertEqual(kcLines(server.drainLog()), [], "\(method): pam_kc logs nothing when all went well")
            XCTAssertLessThan(seconds, 10, "\(method)")
        }
    }

    func testAUserWithoutAVaultLogsInOverSSHAndKCLogsNothing() throws {
        let server = try startServer()
        let user = try server.addLocalUser("plain", password: LoginSandbox.newPassword())
        _ = server.drainLog()
        let (login, _) = try server.ssh(user, """
            echo "logged in as $(id -un)"
            \(server.kc) vault status --json | grep -c '"exists" : false'
            """)
        XCTAssertEqual(login.status, 0, "\(login)\n\(server.diagnostics)")
        XCTAssertEqual(login.output, "logged in as \(user.name)\n1\n", "\(login)")
        XCTAssertEqual(kcLines(server.drainLog()), [], "no vault is nothing to report")
        XCTAssertFalse(FileManager.default.fileExists(atPath: user.home + "/.local"), "and kc made no folder")
    }

    func testAUserOnlyTheNameServiceKnowsUnlocksTheVaultToo() throws {
        let server = try startServer()
        let user = try server.addExtrausersUser("nss", password: LoginSandbox.newPassword())
        let files = try server.inside(["/bin/sh", "-c", "grep -c '^\(user.name):' /etc/passwd /etc/shadow; getent passwd \(user.name) | cut -d: -f3"])
        XCTAssertEqual(files.output, "/etc/passwd:0\n/etc/shadow:0\n\(user.uid)\n", "in no file of /etc, found through NSS: \(files)")
        let service = "kc-test.\(getpid()).ssh-nss"
        try makeVault(server, user, service: service)

        for method in [LoginSandbox.Method.password, .keyboardInteractive] {
            server.simulateReboot(user)
            _ = server.drainLog()
            let (login, _) = try server.ssh(user, loginView(server, service: service), method: method)
            XCTAssertEqual(login.status, 0, "\(method): \(login)\n\(server.diagnostics)")
            XCTAssertEqual(login.output, Self.unlockedView, "\(method): pam_kc found the user through NSS: \(login)\n\(server.diagnostics)")
            XCTAssertEqual(kcLines(server.drainLog()), [], "\(method)")
        }
    }

    /// pam_keyinit links the user keyring into each new session keyring (`keyctl link @u
    /// @s`) as root with the user's real uid, so as a possessor only. Before commit
    /// 5ca8fdd kc took every possessor right off the user keyring: from the second login
    /// on, the session lost it, and `request_key` no longer found the user's keys.
    func testPamKeyinitStillLinksTheUserKeyringIntoTheNextLoginAfterKCRan() throws {
        let server = try startServer()
        let user = try server.addLocalUser("keyinit", password: LoginSandbox.newPassword())
        let service = "kc-test.\(getpid()).ssh-keyinit"
        try makeVault(server, user, service: service)

        let first = try server.ssh(user, """
            \(server.kc) get \(service) session; echo
            keyctl add user kc-ssh-probe 'probe value' @u
            keyctl rdescribe @u | cut -d';' -f4
            """).result
        let lines = first.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(first.status, 0, "\(first)\n\(server.diagnostics)")
        XCTAssertEqual(lines.first, "session value", "kc ran in the first login: \(first)")
        XCTAssertEqual(lines.count, 3, "\(first)")
        let probe = lines.count > 1 ? lines[1] : ""
        let possessor = lines.count > 2 ? (UInt32(lines[2], radix: 16) ?? 0) >> 24 : 0
        XCTAssertEqual(possessor, 0x18, "possessors keep search and link on the user keyring, and only those: \(first)")

        let second = try server.ssh(user, """
            keyctl show @s | grep -c '_uid.\(user.uid)$'
            keyctl request user kc-ssh-probe
            keyctl print "$(keyctl request user kc-ssh-probe)"
            \(server.kc) get \(service) session; echo
            """).result
        XCTAssertEqual(second.status, 0, "\(second)\n\(server.diagnostics)")
        XCTAssertEqual(second.output, "1\n\(probe)\nprobe value\nsession value\n",
                       "the second login's session keyring links the user keyring, and request_key finds the key the user put there: \(second)")
    }

    /// A user keyring that a kc before issue 36 left with no possessor rights (what it
    /// set on every write) is given search and link back by the next login's auth step,
    /// even with the vault unlocked already (no write to the user keyring then): that
    /// same login's pam_keyinit links it into the session again.
    func testALoginHealsAUserKeyringAnOlderKCLeftUnlinkable() throws {
        let server = try startServer()
        let user = try server.addLocalUser("healed", password: LoginSandbox.newPassword())
        let service = "kc-test.\(getpid()).ssh-healed"
        try makeVault(server, user, service: service)
        let first = try server.ssh(user, "\(server.kc) get \(service) session; echo; keyctl setperm @u 0x003f0000").result
        XCTAssertEqual(first.output, "session value\n", "the vault is unlocked, the user keyring stripped: \(first)\n\(server.diagnostics)")

        let second = try server.ssh(user, "keyctl show @s | grep -c '_uid.\(user.uid)$'; keyctl rdescribe @u | cut -d';' -f4").result
        XCTAssertEqual(second.output, "1\n183f0000\n", "linked again in the next login, with search and link for possessors: \(second)\n\(server.diagnostics)")
    }

    /// The time kc's auth step took travels to the session step in the PAM environment;
    /// where no session step of kc's follows (sudo: common-session-noninteractive has no
    /// kc line), setcred takes it out, so the command sudo runs never sees it.
    func testSudoNeverPassesPAMsBookkeepingToItsCommand() throws {
        let server = try startServer()
        guard (try server.inside(["/bin/sh", "-c", "command -v sudo"])).status == 0 else { throw XCTSkip("sudo is not installed") }
        let user = try server.addLocalUser("sudoer", password: LoginSandbox.newPassword())
        try makeVault(server, user, service: "kc-test.\(getpid()).ssh-sudo")
        let granted = try server.inside(["/bin/sh", "-c", "echo '\(user.name) ALL=(ALL) ALL' > /etc/sudoers.d/kc-test && chmod 440 /etc/sudoers.d/kc-test"])
        XCTAssertEqual(granted.status, 0, "\(granted)")
        let run = try server.ssh(user, "printf '%s\\n' '\(user.password)' | sudo -S -p '' env | grep -c '^PAM_KC' ; true").result
        XCTAssertEqual(run.output, "0\n", "sudo's command sees no PAM_KC_* variable: \(run)\n\(server.diagnostics)")
    }

    /// kc stuck in the kernel (a FUSE filesystem over ~/.local/share whose daemon never
    /// answers, mounted by the user outside the login) never holds the login past
    /// pam_kc's budget, by either method, and the auth log says what happened.
    func testAKCStuckInTheKernelNeverHoldsUpAnSSHLogin() throws {
        let budget = 2.0
        let server = try startServer(budget: budget)
        let user = try server.addLocalUser("hung", password: LoginSandbox.newPassword())
        let service = "kc-test.\(getpid()).ssh-hung"
        try makeVault(server, user, service: service)
        let unmount = try server.mountUnansweringFilesystem(as: user, over: user.home + "/.local/share")

        for method in [LoginSandbox.Method.password, .keyboardInteractive] {
            _ = server.drainLog()
            let (login, seconds) = try server.ssh(user, "echo remote command ran", method: method)
            XCTAssertEqual(login.status, 0, "\(method): \(login)\n\(server.diagnostics)")
            XCTAssertEqual(login.output, "remote command ran\n", "\(method): \(login)")
            XCTAssertLessThan(seconds, budget + 3, "\(method): the login waited on kc no longer than the budget")
            let lines = kcLines(server.drainLog())
            let stuck = lines.first { $0.contains("pam_kc(sshd:auth): user \(user.name): kc auth (pid ") }
            XCTAssertNotNil(stuck, "\(method): \(lines)")
            XCTAssertTrue(stuck?.contains("was still running when the login's 2000 ms for kc ran out; killed it, but it is stuck in the kernel") ?? false,
                          "\(method): \(stuck ?? "")")
            XCTAssertTrue(lines.contains { $0.contains("pam_kc(sshd:session): user \(user.name): kc's 2000 ms of this login were spent in auth; its session step is skipped") },
                          "\(method): the session step knows the budget is spent (carried from auth in the PAM environment): \(lines)")
            XCTAssertFalse(lines.joined().contains(user.password))
        }
        let stuck = LoginSandbox.processes(of: user.uid)
        XCTAssertEqual(stuck.filter { $0.command == "kc" }.map(\.state), ["D", "D"], "one kc per login is still stuck in the kernel: \(stuck)")

        // The daemon killed, what waited on it fails and ends.
        unmount()
        XCTAssertEqual(LoginSandbox.processes(of: user.uid).map(\.command), [], "the stuck kc processes ended once the filesystem went")
    }

    // MARK: passwd

    /// `passwd` in an ssh login (a terminal, expect answering the prompts): its result
    /// and what the terminal showed. Passwords reach expect in its environment.
    private func passwdOverSSH(_ server: LoginSandbox, _ account: LoginSandbox.Account, new: String) throws -> CommandResult {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/expect") else { throw XCTSkip("expect is not installed") }
        let script = server.folder + "/passwd.exp"
        try """
            set timeout 20
            spawn {*}$argv
            expect {
                "'s password: " { send -- "$env(KC_OLD)\\r"; exp_continue }
                "Current password: " { send -- "$env(KC_OLD)\\r"; exp_continue }
                "Retype new password: " { send -- "$env(KC_NEW)\\r"; exp_continue }
                "New password: " { send -- "$env(KC_NEW)\\r"; exp_continue }
                timeout { exit 124 }
                eof
            }
            lassign [wait] pid spawned os_error status
            exit $status

            """.write(toFile: script, atomically: true, encoding: .utf8)
        return try runCommand("/usr/bin/timeout", ["60", "/usr/bin/expect", "-f", script] + server.sshArguments(method: .password)
                                + ["-tt", "\(account.name)@127.0.0.1", "passwd"],
                              environment: ["KC_OLD": account.password, "KC_NEW": new, "PATH": "/usr/bin:/bin", "HOME": server.folder])
    }

    /// `kc unlock` with `passphrase` as the account, in a fresh session after a reboot:
    /// its exit status (2: wrong passphrase).
    private func unlockStatus(_ server: LoginSandbox, _ account: LoginSandbox.Account, _ passphrase: String) throws -> Int32 {
        server.simulateReboot(account)
        return try server.asUser(account, "\"$KC\" unlock >/dev/null 2>&1", input: Array(passphrase.utf8)).status
    }

    func testPasswdInAnSSHLoginChangesTheVaultsPassphraseWithTheLoginPassword() throws {
        let server = try startServer()
        var user = try server.addLocalUser("passwd", password: LoginSandbox.newPassword())
        let service = "kc-test.\(getpid()).ssh-passwd"
        try makeVault(server, user, service: service)
        _ = server.drainLog()

        let new = LoginSandbox.newPassword()
        let passwd = try passwdOverSSH(server, user, new: new)
        XCTAssertEqual(passwd.status, 0, "\(passwd)\n\(server.diagnostics)")
        XCTAssertTrue(passwd.output.contains("passwd: password updated successfully"), passwd.output)
        XCTAssertEqual(kcLines(server.drainLog()), [], "kc's password step is quiet when all went well")
        XCTAssertEqual(try unlockStatus(server, user, user.password), 2, "the old password no longer opens the vault")
        XCTAssertEqual(try unlockStatus(server, user, new), 0, "the new login password does")

        // And the next login, with the new password, unlocks it.
        user.password = new
        server.simulateReboot(user)
        let login = try server.ssh(user, loginView(server, service: service)).result
        XCTAssertEqual(login.output, Self.unlockedView, "\(login)\n\(server.diagnostics)")
    }

    /// pam_unix changes only the passwords of /etc/shadow's users: for one only
    /// extrausers knows, Debian 12's refuses ("user ... does not exist in /etc/passwd",
    /// measured), so `passwd` fails, and the vault must keep its passphrase. Where the
    /// user's own password module changes it (SSSD's, LDAP's), kc's password step must
    /// get the user and both passwords: pam_stress stands in for such a module.
    func testPasswdForAUserOnlyTheNameServiceKnowsLeavesTheVaultOpenableWhateverHappens() throws {
        let server = try startServer()
        let user = try server.addExtrausersUser("nsspw", password: LoginSandbox.newPassword())
        let service = "kc-test.\(getpid()).ssh-nss-passwd"
        try makeVault(server, user, service: service)
        _ = server.drainLog()

        let new = LoginSandbox.newPassword()
        let passwd = try passwdOverSSH(server, user, new: new)
        let lines = server.drainLog()
        if passwd.status != 0 {
            XCTAssertTrue(lines.contains { $0.contains("pam_unix(passwd:chauthtok): user \"\(user.name)\" does not exist in /etc/passwd") },
                          "pam_unix refused the change for a user outside /etc/passwd: \(passwd)\n\(lines)")
            XCTAssertEqual(try unlockStatus(server, user, user.password), 0, "the refused change left the vault's passphrase as it was")
            XCTAssertEqual(try unlockStatus(server, user, new), 2)
        } else {
            XCTAssertEqual(try unlockStatus(server, user, new), 0, "the change went through, and the vault followed: \(passwd)")
            return
        }

        // pam_stress (Linux-PAM's test module) prompts for a new password twice and makes
        // the previous PAM_AUTHTOK the PAM_OLDAUTHTOK: the first line is given the old
        // password, the second the new one, and pam_kc then has both, as after pam_sss.
        let stress = try server.inside(["/bin/sh", "-c", "ls /lib/*/security/pam_stress.so /usr/lib/*/security/pam_stress.so 2>/dev/null | head -1"])
        guard !stress.output.isEmpty else { throw XCTSkip("pam_stress.so (libpam-modules) is not installed") }
        try server.writePAMService("kc-test-stress-passwd", """
            password required pam_stress.so
            password required pam_stress.so
            password optional \(server.module) kc=\(server.kc)

            """)
        let changed = try server.inside(["/usr/bin/pamtester", "kc-test-stress-passwd", user.name, "chauthtok(PAM_SILENT)"],
                                        input: Array("\(user.password)\n\(user.password)\n\(new)\n\(new)\n".utf8))
        XCTAssertEqual(changed.status, 0, "\(changed)")
        XCTAssertEqual(kcLines(server.drainLog()), [], "pam_kc found the user through NSS and kc said nothing")
        XCTAssertEqual(try unlockStatus(server, user, user.password), 2, "kc vault passwd --pam got the user and both passwords")
        XCTAssertEqual(try unlockStatus(server, user, new), 0)
    }
}
