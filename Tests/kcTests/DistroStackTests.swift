import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// kc's three PAM lines in other distributions' stacks, placed as the README shows
/// (unlock at login: Fedora and RHEL, openSUSE, Arch), run with pamtester: the right
/// password unlocks the vault (kc's auth step runs, and its session step loads the
/// when-unlocked item into the new session keyring), a wrong one never runs kc's auth
/// step (no scrypt work), a failed `passwd` never reaches kc's password step, and a
/// successful one changes the vault's passphrase. Each stack is written here from the
/// distribution's own (see each file's head for the modules Debian lacks and what
/// stands in for them), and the placements that look right but are not are shown too.
///
/// In a ``LoginSandbox`` (no sshd): its /etc/pam.d is a copy, so the services, and the
/// `crond` file, never reach the machine's. kc is a recorder: a root-owned script that
/// runs the real kc, then writes "TYPE ARGUMENTS exit=STATUS" (and, in a session step,
/// what the session keyring holds). Root only.
final class DistroStackTests: KeyringTestCase {
    private var sandboxes: [LoginSandbox] = []

    override func tearDownWithError() throws {
        for sandbox in sandboxes.reversed() {
            XCTAssertEqual(sandbox.stop(), [], "no process of the sandbox outlives it")
        }
        sandboxes = []
        try super.tearDownWithError()
    }

    /// A sandbox, a local user with a vault sealed with their login password (locked),
    /// and the recorder.
    private final class Machine {
        let sandbox: LoginSandbox
        /// Its password changes with ``assertPasswdFollowsIntoTheVault(_:_:file:line:)``.
        var user: LoginSandbox.Account
        let service: String
        let recorder: String
        let runs: String
        /// The stack files are named `PREFIX-...` in the sandbox's /etc/pam.d.
        let prefix: String

        init(sandbox: LoginSandbox, user: LoginSandbox.Account, service: String, recorder: String, runs: String, prefix: String) {
            self.sandbox = sandbox
            self.user = user
            self.service = service
            self.recorder = recorder
            self.runs = runs
            self.prefix = prefix
        }

        /// `pam_kc.so` as it goes into a stack line: the built module running the recorder.
        var kcModule: String { "\(sandbox.module) kc=\(recorder)" }

        /// What the recorder wrote since the last call.
        func takeRuns() -> [String] {
            let text = readWholeFile(runs) ?? ""
            _ = try? "".write(toFile: runs, atomically: false, encoding: .utf8)
            return text.split(separator: "\n").map(String.init)
        }

        /// Whether the user's vault is unlocked now (its key in the user keyring).
        func vaultIsUnlocked() throws -> Bool {
            try sandbox.asUser(user, "\"$KC\" vault status --json | grep -c '\"unlocked\" : true'").output == "1\n"
        }

        func pamtester(_ service: String, _ operations: [String], input: String, account: LoginSandbox.Account? = nil,
                       asUser: Bool = false) throws -> CommandResult {
            try sandbox.pamtester(service, account ?? user, operations, input: input, asUser: asUser)
        }
    }

    private func machine(_ label: String) throws -> Machine {
        let sandbox = try LoginSandbox(sshd: false)
        sandboxes.append(sandbox)
        let user = try sandbox.addLocalUser(label, password: LoginSandbox.newPassword())
        let service = "kc-test.\(getpid()).\(label)"
        let made = try sandbox.makeVault(user, service: service)
        XCTAssertEqual(made.output, "", "\(made)")
        let folder = sandbox.folder + "/recorder"
        XCTAssertEqual(mkdir(folder, 0o755), 0)
        let runs = folder + "/runs.txt", recorder = folder + "/kc"
        // pam_kc runs it as root with the user's ids (KC_PAM_UID); kc becomes the user,
        // and the session keyring, whose possessor rights kc's session step moves to the
        // user, is read as the user.
        XCTAssertTrue(FileManager.default.createFile(atPath: runs, contents: nil, attributes: [.posixPermissions: 0o666]))
        try """
            #!/bin/sh
            '\(sandbox.kc)' "$@"
            status=$?
            {
                printf '%s %s exit=%s\\n' "$PAM_TYPE" "$*" "$status"
                if [ "$PAM_TYPE" = open_session ]; then
                    printf 'session keyring: %s\\n' "$(setpriv --reuid="$KC_PAM_UID" --regid="$KC_PAM_GID" --clear-groups sh -c '\(LoginSandbox.sessionItemScript(service: service, item: "session").replacingOccurrences(of: "\n", with: "; "))')"
                fi
            } >> '\(runs)'
            exit $status

            """.write(toFile: recorder, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(recorder, 0o755), 0)
        return Machine(sandbox: sandbox, user: user, service: service, recorder: recorder, runs: runs, prefix: "kc-test-\(getpid())-\(label)")
    }

    /// The recorder's lines for a login that unlocked the vault and opened a session.
    private static let unlockedRuns = ["auth unlock --pam exit=0", "open_session unlock --pam exit=0", "session keyring: session value"]

    /// Wrong password, then the right one, through `service`: the first fails and runs no
    /// kc; the second logs in, kc's auth step unlocks the vault and its session step loads
    /// the when-unlocked item into the session keyring.
    private func assertLoginsUnlockOnlyWithTheRightPassword(_ machine: Machine, _ service: String,
                                                            file: StaticString = #filePath, line: UInt = #line) throws {
        let wrong = try machine.pamtester(service, ["authenticate"], input: "not the password\n")
        XCTAssertNotEqual(wrong.status, 0, "\(service): a wrong password is refused: \(wrong)", file: file, line: line)
        XCTAssertEqual(machine.takeRuns(), [], "\(service): a wrong password never runs kc", file: file, line: line)
        XCTAssertFalse(try machine.vaultIsUnlocked(), file: file, line: line)

        let right = try machine.pamtester(service, ["authenticate", "open_session", "close_session"], input: machine.user.password + "\n")
        XCTAssertEqual(right.status, 0, "\(service): \(right)", file: file, line: line)
        XCTAssertEqual(machine.takeRuns(), Self.unlockedRuns, "\(service): kc's auth step unlocked, its session step loaded", file: file, line: line)
        XCTAssertTrue(try machine.vaultIsUnlocked(), file: file, line: line)
        machine.sandbox.simulateReboot(machine.user)
    }

    /// `passwd` as the user (pam_unix asks the current password): with a wrong current
    /// password nothing changes and kc's password step never runs; with the right one the
    /// vault's passphrase becomes the new password, the user's from then on.
    private func assertPasswdFollowsIntoTheVault(_ machine: Machine, _ service: String,
                                                 file: StaticString = #filePath, line: UInt = #line) throws {
        let new = LoginSandbox.newPassword()
        let refused = try machine.pamtester(service, ["chauthtok"], input: "not the password\n\(new)\n\(new)\n", asUser: true)
        XCTAssertNotEqual(refused.status, 0, "\(service): \(refused)", file: file, line: line)
        XCTAssertEqual(machine.takeRuns(), [], "\(service): a refused passwd never reaches kc", file: file, line: line)

        let changed = try machine.pamtester(service, ["chauthtok"], input: "\(machine.user.password)\n\(new)\n\(new)\n", asUser: true)
        XCTAssertEqual(changed.status, 0, "\(service): \(changed)", file: file, line: line)
        XCTAssertEqual(machine.takeRuns(), ["password vault passwd --pam --check exit=0", "password vault passwd --pam exit=0"],
                       "\(service): kc checked the vault could follow, then followed", file: file, line: line)
        let opens = { (passphrase: String) in
            try machine.sandbox.asUser(machine.user, "\"$KC\" unlock >/dev/null 2>&1", input: Array(passphrase.utf8)).status
        }
        machine.sandbox.simulateReboot(machine.user)
        XCTAssertEqual(try opens(machine.user.password), 2, "\(service): the old password no longer opens the vault", file: file, line: line)
        XCTAssertEqual(try opens(new), 0, "\(service): the new one does", file: file, line: line)
        machine.sandbox.simulateReboot(machine.user)
        machine.user.password = new
    }

    // MARK: Fedora and RHEL

    /// Fedora's and RHEL's password-auth (system-auth is the same for these lines) as
    /// authselect's sssd profile writes it, in a custom profile with kc's lines; `kcJump`
    /// false leaves pam_localuser's jump as it was (the mistake the README warns about).
    private func fedoraPasswordAuth(_ machine: Machine, kcJump: Bool = true) -> String {
        """
        # Fedora/RHEL password-auth, authselect's sssd profile, with kc's lines (kc:).
        # Not on Debian: pam_sss.so (SSSD), stood in for by pam_unix.so, which checks a
        # user of any name service as SSSD checks a directory's; pam_pwquality.so, left
        # out (pam_unix then asks for the new password itself: no use_authtok).
        auth        required      pam_env.so
        auth        required      pam_faildelay.so delay=2000000
        auth        [default=1 ignore=ignore success=ok] pam_usertype.so isregular
        # kc: default=1 became 3: a user this skips past pam_unix skips kc's two lines too
        auth        [default=\(kcJump ? 3 : 1) ignore=ignore success=ok] pam_localuser.so
        # kc: was "sufficient"; success goes on to kc, then pam_permit ends as sufficient did
        auth        [success=ok default=2] pam_unix.so nullok
        auth        optional      \(machine.kcModule)
        auth        sufficient    pam_permit.so
        auth        [default=1 ignore=ignore success=ok] pam_usertype.so isregular
        auth        sufficient    pam_unix.so try_first_pass
        auth        required      pam_deny.so

        account     required      pam_unix.so
        account     sufficient    pam_localuser.so
        account     sufficient    pam_usertype.so issystem
        account     [default=bad success=ok user_unknown=ignore] pam_unix.so
        account     required      pam_permit.so

        # kc: was "sufficient", as in auth
        password    [success=ok default=2] pam_unix.so yescrypt shadow nullok
        password    optional      \(machine.kcModule)
        password    sufficient    pam_permit.so
        password    [success=1 default=ignore] pam_localuser.so
        password    sufficient    pam_unix.so try_first_pass
        password    required      pam_deny.so

        session     optional      pam_keyinit.so revoke
        session     required      pam_limits.so
        -session    optional      pam_systemd.so
        # kc: logins only; cron, systemd --user and sudo include this file too
        session     [success=1 default=ignore] pam_succeed_if.so service in crond:systemd-user:sudo quiet use_uid
        session     optional      \(machine.kcModule)
        session     [success=1 default=ignore] pam_succeed_if.so service in crond quiet use_uid
        session     required      pam_unix.so
        -session    optional      pam_sss.so

        """
    }

    /// A service as Fedora's sshd is (its password-auth in a substack, then postlogin).
    private func fedoraService(_ machine: Machine, passwordAuth: String) -> String {
        """
        auth       substack     \(passwordAuth)
        auth       include      \(machine.prefix)-postlogin
        account    required     pam_nologin.so
        account    include      \(passwordAuth)
        password   include      \(passwordAuth)
        session    optional     pam_keyinit.so force revoke
        session    include      \(passwordAuth)
        session    include      \(machine.prefix)-postlogin

        """
    }

    func testFedoraAndRHELPasswordAuthWithKCsLinesUnlocksOnlyWithTheRightPassword() throws {
        let machine = try self.machine("fedora")
        let sandbox = machine.sandbox
        let passwordAuth = machine.prefix + "-password-auth", service = machine.prefix
        try sandbox.writePAMService(passwordAuth, fedoraPasswordAuth(machine))
        try sandbox.writePAMService(machine.prefix + "-postlogin", "session     optional      pam_umask.so silent\n")
        try sandbox.writePAMService(service, fedoraService(machine, passwordAuth: passwordAuth))

        try assertLoginsUnlockOnlyWithTheRightPassword(machine, service)
        try assertPasswdFollowsIntoTheVault(machine, service)

        // A user pam_localuser does not find (a directory's user: here one only
        // extrausers knows) skips pam_unix and kc: a wrong password is refused by the
        // directory's module, the right one accepted by it, and kc runs for neither.
        let directoryUser = try sandbox.addExtrausersUser("fedoradir", password: LoginSandbox.newPassword())
        let wrong = try machine.pamtester(service, ["authenticate"], input: "not the password\n", account: directoryUser)
        XCTAssertNotEqual(wrong.status, 0, "\(wrong)")
        let right = try machine.pamtester(service, ["authenticate"], input: directoryUser.password + "\n", account: directoryUser)
        XCTAssertEqual(right.status, 0, "\(right)")
        XCTAssertEqual(machine.takeRuns(), [], "kc's lines serve local users only in this stack")

        // cron (crond) includes password-auth too: its sessions never run kc.
        try sandbox.writePAMService("crond", """
            account    required   pam_access.so
            account    include    \(passwordAuth)
            session    include    \(passwordAuth)
            auth       include    \(passwordAuth)

            """)
        let cron = try machine.pamtester("crond", ["open_session", "close_session"], input: "")
        XCTAssertEqual(cron.status, 0, "\(cron)")
        XCTAssertEqual(machine.takeRuns(), [], "a cron job's session never runs kc")
    }

    /// The same lines with pam_localuser's jump left at 1: for a user it skips, the jump
    /// lands on kc's line and pam_permit ends the stack as a success, so any password
    /// logs them in. What the README's "default=3" is for.
    func testFedoraKCLinesWithTheJumpBeforeThemUncountedLetAWrongPasswordIn() throws {
        let machine = try self.machine("fedoranaive")
        let sandbox = machine.sandbox
        let passwordAuth = machine.prefix + "-password-auth", service = machine.prefix
        try sandbox.writePAMService(passwordAuth, fedoraPasswordAuth(machine, kcJump: false))
        try sandbox.writePAMService(machine.prefix + "-postlogin", "session     optional      pam_umask.so silent\n")
        try sandbox.writePAMService(service, fedoraService(machine, passwordAuth: passwordAuth))
        let directoryUser = try sandbox.addExtrausersUser("fedoranv", password: LoginSandbox.newPassword())
        let wrong = try machine.pamtester(service, ["authenticate"], input: "not the password\n", account: directoryUser)
        XCTAssertEqual(wrong.status, 0, "with the jump uncounted, a wrong password logs a non-local user in: \(wrong)")
    }

    // MARK: openSUSE

    /// openSUSE's common-* files as pam-config writes them (with gnome-keyring), with
    /// kc's lines; `requisite` false keeps pam_unix `required` (the mistake).
    private func writeSUSEStack(_ machine: Machine, requisite: Bool = true) throws -> String {
        let sandbox = machine.sandbox, prefix = machine.prefix + (requisite ? "" : "-naive")
        try sandbox.writePAMService(prefix + "-common-auth", """
            # openSUSE common-auth (pam-config), with kc's line (kc:).
            auth    required        pam_env.so
            auth    optional        pam_gnome_keyring.so
            # kc: was "required", which goes on after a failure: a wrong password must stop here
            auth    \(requisite ? "requisite" : "required ")       pam_unix.so     try_first_pass
            auth    optional        \(machine.kcModule)

            """)
        try sandbox.writePAMService(prefix + "-common-account", "account requisite       pam_unix.so     try_first_pass\n")
        try sandbox.writePAMService(prefix + "-common-password", """
            # openSUSE common-password, with kc's line (kc:). Not on Debian: pam_cracklib.so
            # (or pam_pwquality.so), left out: pam_unix asks for the new password itself.
            password        optional        pam_gnome_keyring.so    use_authtok
            # kc: was "required": a failed change must stop here, before kc follows it
            password        requisite       pam_unix.so     nullok shadow try_first_pass
            password        optional        \(machine.kcModule)

            """)
        try sandbox.writePAMService(prefix + "-common-session", """
            # openSUSE common-session, with kc's lines (kc:).
            session required        pam_limits.so
            session required        pam_unix.so     try_first_pass
            session optional        pam_umask.so
            session optional        pam_systemd.so
            session optional        pam_gnome_keyring.so    auto_start only_if=gdm,gdm-password,lxdm,lightdm
            session optional        pam_env.so
            # kc: logins only, should cron, systemd --user or sudo include this file
            session [success=1 default=ignore] pam_succeed_if.so service in crond:systemd-user:sudo quiet use_uid
            session optional        \(machine.kcModule)

            """)
        // openSUSE's sshd.
        try sandbox.writePAMService(prefix, """
            auth        requisite   pam_nologin.so
            auth        include     \(prefix)-common-auth
            account     requisite   pam_nologin.so
            account     include     \(prefix)-common-account
            password    include     \(prefix)-common-password
            session     optional    pam_keyinit.so force revoke
            session     include     \(prefix)-common-session

            """)
        return prefix
    }

    func testOpenSUSECommonAuthWithPamUnixRequisiteUnlocksOnlyWithTheRightPassword() throws {
        let machine = try self.machine("suse")
        let service = try writeSUSEStack(machine)
        try assertLoginsUnlockOnlyWithTheRightPassword(machine, service)
        try assertPasswdFollowsIntoTheVault(machine, service)

        // openSUSE's own line, `auth required pam_unix.so`, goes on after a failure: kc's
        // line after it would run, and do the passphrase work, for every wrong password.
        let naive = try writeSUSEStack(machine, requisite: false)
        let wrong = try machine.pamtester(naive, ["authenticate"], input: "not the password\n")
        XCTAssertNotEqual(wrong.status, 0, "\(wrong)")
        XCTAssertEqual(machine.takeRuns(), ["auth unlock --pam exit=2"], "after a required pam_unix, kc ran for a wrong password")
    }

    // MARK: Arch

    /// Arch's system-auth and system-login (pambase) with kc's lines; `kcRightAfterUnix`
    /// puts kc's auth line straight after pam_unix instead (the mistake).
    private func writeArchStack(_ machine: Machine, kcRightAfterUnix: Bool = false) throws -> String {
        let sandbox = machine.sandbox, prefix = machine.prefix + (kcRightAfterUnix ? "-naive" : "")
        let kcAuth = "auth       optional                    \(machine.kcModule)"
        try sandbox.writePAMService(prefix + "-system-auth", """
            # Arch system-auth (pambase), with kc's lines (kc:). pam_systemd_home.so is not
            # on Debian: its lines start with "-", which PAM skips when the module is missing.
            auth       required                    pam_faillock.so      preauth
            -auth      [success=2 default=ignore]  pam_systemd_home.so
            auth       [success=1 default=bad]     pam_unix.so          try_first_pass nullok
            \(kcRightAfterUnix ? kcAuth : "")
            auth       [default=die]               pam_faillock.so      authfail
            auth       optional                    pam_permit.so
            auth       required                    pam_env.so
            auth       required                    pam_faillock.so      authsucc
            # kc: only a checked password gets here (a wrong one dies at pam_faillock authfail)
            \(kcRightAfterUnix ? "" : kcAuth)

            -account   [success=1 default=ignore]  pam_systemd_home.so
            account    required                    pam_unix.so
            account    optional                    pam_permit.so
            account    required                    pam_time.so

            -password  [success=1 default=ignore]  pam_systemd_home.so
            # kc: was "required", which goes on after a failure: a failed change must stop here
            password   requisite                   pam_unix.so          try_first_pass nullok shadow
            password   optional                    pam_permit.so
            password   optional                    \(machine.kcModule)

            -session   optional                    pam_systemd_home.so
            session    required                    pam_limits.so
            session    required                    pam_unix.so
            session    optional                    pam_permit.so

            """)
        // system-login, which login, sshd (through system-remote-login) and the display
        // managers include; kc's session line here serves logins only.
        try sandbox.writePAMService(prefix, """
            auth       required   pam_shells.so
            auth       requisite  pam_nologin.so
            auth       include    \(prefix)-system-auth
            account    required   pam_access.so
            account    required   pam_nologin.so
            account    include    \(prefix)-system-auth
            password   include    \(prefix)-system-auth
            session    optional   pam_loginuid.so
            session    optional   pam_keyinit.so       force revoke
            session    include    \(prefix)-system-auth
            session    optional   pam_motd.so
            session    optional   pam_umask.so
            -session   optional   pam_systemd.so
            session    required   pam_env.so
            # kc: after pam_keyinit made the login's session keyring
            session    optional   \(machine.kcModule)

            """)
        return prefix
    }

    func testArchSystemAuthWithKCAfterFaillockUnlocksOnlyWithTheRightPassword() throws {
        let machine = try self.machine("arch")
        let service = try writeArchStack(machine)
        try assertLoginsUnlockOnlyWithTheRightPassword(machine, service)
        try assertPasswdFollowsIntoTheVault(machine, service)

        // Straight after `[success=1 default=bad] pam_unix.so`, kc's line is the one the
        // success jumps over, and the jump lands on `pam_faillock.so authfail`, which
        // counts a failure and fails: kc runs for wrong passwords only, and the right
        // one no longer logs in.
        let naive = try writeArchStack(machine, kcRightAfterUnix: true)
        let wrong = try machine.pamtester(naive, ["authenticate"], input: "not the password\n")
        XCTAssertNotEqual(wrong.status, 0, "\(wrong)")
        XCTAssertEqual(machine.takeRuns(), ["auth unlock --pam exit=2"], "kc ran for the wrong password")
        let right = try machine.pamtester(naive, ["authenticate"], input: machine.user.password + "\n")
        XCTAssertNotEqual(right.status, 0, "the right password is refused: \(right)")
        XCTAssertEqual(machine.takeRuns(), [], "and kc did not run for it")
    }

    // MARK: Debian: sessions that are not logins

    /// kc's profile says `Session-Interactive-Only: yes`, so pam-auth-update leaves it out
    /// of common-session-noninteractive, which Debian's cron and sudo include instead of
    /// common-session: their sessions never run kc. Checked on the files pam-auth-update
    /// wrote in the sandbox, and by opening sessions of those services there.
    func testDebianCronAndSudoSessionsNeverRunKCsSessionStep() throws {
        let machine = try self.machine("debian")
        let sandbox = machine.sandbox
        let pamd = sandbox.folder + "/pam.d"
        XCTAssertEqual((readWholeFile(pamd + "/common-session") ?? "").components(separatedBy: "pam_kc.so").count, 2,
                       "one kc line in common-session")
        XCTAssertFalse((readWholeFile(pamd + "/common-session-noninteractive") ?? "").contains("pam_kc"),
                       "none in common-session-noninteractive")
        for name in ["common-auth", "common-session", "common-password"] {
            let text = try XCTUnwrap(readWholeFile(pamd + "/" + name))
            try sandbox.writePAMService(name, text.replacingOccurrences(of: "kc=\(sandbox.kc)", with: "kc=\(machine.recorder)"))
        }
        // Debian's cron package's file, where cron is not installed.
        if !FileManager.default.fileExists(atPath: pamd + "/cron") {
            try sandbox.writePAMService("cron", """
                @include common-auth
                session    required     pam_env.so
                session    required     pam_env.so envfile=/etc/default/locale
                @include common-account
                @include common-session-noninteractive
                session    required     pam_limits.so

                """)
        }
        for service in ["cron", "sudo"] where FileManager.default.fileExists(atPath: pamd + "/" + service) {
            let opened = try machine.pamtester(service, ["open_session", "close_session"], input: "")
            XCTAssertEqual(opened.status, 0, "\(service): \(opened)")
            XCTAssertEqual(machine.takeRuns(), [], "\(service): no kc in a session that is not a login")
        }
        let login = try machine.pamtester("login", ["authenticate", "open_session", "close_session"], input: machine.user.password + "\n")
        XCTAssertEqual(login.status, 0, "\(login)")
        XCTAssertEqual(machine.takeRuns(), Self.unlockedRuns, "a login's session does run it")
    }
}
