import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The vault at login and at boot, with the real machinery: Linux-PAM through
/// `pamtester` with pam_unix, pam_exec and pam_keyinit (README: unlock at login), and
/// `kc vault boot` with a host key. As the test account `kc-test-vault`, whose home is
/// pointed at a fresh folder for each test; root only.
final class VaultLoginTests: VaultTestCase {
    var password = ""

    override func tearDownWithError() throws {
        try super.tearDownWithError()
        if getuid() == 0 { VaultAccount.reset() }
    }

    /// The account with a fresh home, a password and a vault sealed with it holding an
    /// item at each level (`svc`: `session`, `user`, `boot`), its keyrings then emptied as
    /// by a reboot. The vault is at `~/.local/share/kc`, where PAM and the boot step find it.
    func accountWithVault(service: String, hostKeyDirectory: String? = nil, vaultPassphrase: String? = nil) throws -> VaultFixture {
        _ = try VaultAccount.require()
        VaultAccount.reset()
        let home = try makeVault(owner: VaultAccount.name, inHome: true)
        try VaultAccount.setHome(home.dataHome)
        password = "pw-" + UUID().uuidString.prefix(12)
        let set = try runCommand("/usr/sbin/chpasswd", [], input: Array("\(VaultAccount.name):\(password)\n".utf8))
        guard set.status == 0 else { throw XCTSkip("chpasswd failed: \(set)") }
        let hostKey = hostKeyDirectory.map { "KC_HOST_KEY_DIR='\($0)'; export KC_HOST_KEY_DIR; " } ?? ""
        let made = try VaultAccount.run(hostKey + """
            printf '%s' '\(vaultPassphrase ?? password)' | "$KC" vault init --work-factor 10 2>/dev/null || echo "init failed"
            printf 'session value' | "$KC" set \(service) session || echo "set failed"
            printf 'user value' | "$KC" set --access after-first-unlock \(service) user || echo "set failed"
            printf 'boot value' | "$KC" set --access always \(service) boot 2>/dev/null || echo "set failed"
            """, vault: home)
        XCTAssertEqual(made.output, "", "\(made)")
        VaultAccount.simulateReboot()
        return home
    }

    /// A PAM service file in /etc/pam.d (removed at tearDown): pam_unix checks the
    /// password, then kc's auth step; the session gets a new keyring (pam_keyinit), then
    /// kc's session step, then `record` (a script given the output file) if any.
    func pamService(kcAuth: Bool = true, record: (script: String, output: String)? = nil) throws -> String {
        guard programExists("pamtester") else { throw XCTSkip("pamtester is not installed") }
        let name = "kc-test-\(getpid())" + (kcAuth ? "" : "-without-kc")
        let kc = VaultAccount.kcPath
        var lines = ["auth required pam_unix.so"]
        if kcAuth { lines.append("auth optional pam_exec.so expose_authtok quiet \(kc) unlock --pam") }
        lines += [
            "account required pam_permit.so",
            "session optional pam_keyinit.so force revoke",
            "session optional pam_exec.so quiet \(kc) unlock --pam",
        ]
        if let record { lines.append("session optional pam_exec.so \(record.script) \(record.output) \(kc)") }
        try (lines.joined(separator: "\n") + "\n").write(toFile: "/etc/pam.d/" + name, atomically: true, encoding: .utf8)
        addCleanup { try? FileManager.default.removeItem(atPath: "/etc/pam.d/" + name) }
        return name
    }

    func pamtester(_ service: String, _ operations: [String], password: String) throws -> CommandResult {
        try runCommand("/usr/bin/pamtester", [service, VaultAccount.name] + operations, input: Array((password + "\n").utf8))
    }

    /// What the account sees in a fresh session: `kc ls -l` of the service (no reload
    /// from the vault), `kc get` of each item, and whether the vault is unlocked.
    func accountView(_ service: String, home: VaultFixture) throws -> CommandResult {
        try VaultAccount.run("""
            "$KC" ls -l \(service) 2>/dev/null | cut -f1,2
            for item in user boot; do "$KC" get \(service) $item; echo " $item=$?"; done
            echo "unlocked=$("$KC" vault status --json | grep -c '"unlocked" : true')"
            """, vault: home)
    }

    func testLoggingInUnlocksTheVaultAndTheNewSessionGetsItsItems() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-pam"
        let home = try accountWithVault(service: service)
        let recorder = try sessionRecorder(service)
        let pam = try pamService(record: recorder)

        let login = try pamtester(pam, ["authenticate", "open_session"], password: password)
        XCTAssertEqual(login.status, 0, "\(login)")
        XCTAssertTrue(login.standardError.contains("pamtester: successfully authenticated") || login.output.contains("successfully authenticated"), "\(login)")
        XCTAssertTrue((login.output + login.standardError).contains("pamtester: successfully opened a session"), "\(login)")

        let view = try accountView(service, home: home)
        // The view runs in a session keyring of its own (keyctl session -), which, with the
        // vault unlocked, `kc ls` fills with the when-unlocked item as a new login's would.
        XCTAssertEqual(view.output, "boot\talways\nuser\tafter-first-unlock\nuser value user=0\nboot value boot=0\nunlocked=1\n",
                       "the auth step loaded after-first-unlock and always items and left the vault unlocked: \(view)")
        let session = try String(contentsOfFile: recorder.output, encoding: .utf8)
        XCTAssertEqual(session, "type=open_session\nboot\talways\nsession\twhen-unlocked\nuser\tafter-first-unlock\n",
                       "the session step loaded the when-unlocked item into the login's session keyring")
    }

    func testAWrongPasswordOrABrokenVaultNeverChangesWhatTheLoginGets() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-pam-fail"
        let home = try accountWithVault(service: service)
        let withKC = try pamService()

        // A wrong password fails as it does without kc's line, and unlocks nothing.
        let wrong = try pamtester(withKC, ["authenticate"], password: "not the password")
        let withoutKC = try pamService(kcAuth: false)
        let wrongWithout = try pamtester(withoutKC, ["authenticate"], password: "not the password")
        XCTAssertNotEqual(wrong.status, 0, "\(wrong)")
        XCTAssertEqual(wrong.status, wrongWithout.status)
        XCTAssertEqual(wrong.output + wrong.standardError, wrongWithout.output + wrongWithout.standardError)
        XCTAssertTrue((wrong.output + wrong.standardError).contains("pamtester: Authentication failure"), "\(wrong)")
        let locked = try VaultAccount.run("\"$KC\" get \(service) user", vault: home)
        XCTAssertEqual(locked.status, 1, "\(locked)")
        XCTAssertEqual(locked.standardError, "kc: no item 'user' in service '\(service)' in the kernel: the vault holds it but is locked; run 'kc unlock'\n")

        // A damaged identity.age: the login succeeds, nothing is loaded.
        let identity = home.path + "/identity.age"
        let sealed = try Data(contentsOf: URL(fileURLWithPath: identity))
        XCTAssertEqual(try VaultAccount.run("printf 'not an age file\\n' > \"$VAULT/identity.age\"", vault: home).status, 0)
        let damaged = try pamtester(withKC, ["authenticate", "open_session"], password: password)
        XCTAssertEqual(damaged.status, 0, "a broken vault does not stop the login: \(damaged)")
        XCTAssertEqual(try accountView(service, home: home).output, " user=1\n boot=1\nunlocked=0\n", "nothing was loaded")

        // The right password with the vault repaired: it unlocks again.
        XCTAssertEqual(try VaultAccount.run("cat > \"$VAULT/identity.age\"", vault: home, input: Array(sealed)).status, 0)
        let repaired = try pamtester(withKC, ["authenticate", "open_session"], password: password)
        XCTAssertEqual(repaired.status, 0, "\(repaired)")
        let view = try accountView(service, home: home)
        XCTAssertTrue(view.output.hasSuffix("user value user=0\nboot value boot=0\nunlocked=1\n"), "\(view)")

        // A user without a vault logs in as before.
        VaultAccount.simulateReboot()
        XCTAssertEqual(try runCommand("/bin/rm", ["-rf", home.path]).status, 0)
        let noVault = try pamtester(withKC, ["authenticate", "open_session"], password: password)
        XCTAssertEqual(noVault.status, 0, "\(noVault)")
    }

    /// pam_exec hides the step's exit status behind `optional`: kc's own, run as pam_exec
    /// runs it (root, PAM_TYPE, PAM_USER, the password on standard input without a newline).
    func testThePAMStepExitsZeroOnSuccessAndForAUserWithoutAVault() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: kc unlock --pam becomes the user") }
        let service = "kc-test.\(getpid()).vault-pam-step"
        let home = try accountWithVault(service: service)
        func step(_ type: String, _ input: String, user: String? = VaultAccount.name) throws -> CommandResult {
            var environment = ["PAM_TYPE": type, "PAM_SERVICE": "login", "PATH": "/usr/bin:/bin"]
            environment["PAM_USER"] = user
            return try runCommand(VaultAccount.kcPath, ["unlock", "--pam"], input: Array(input.utf8), environment: environment)
        }

        let wrong = try step("auth", password + "\n")
        XCTAssertEqual(wrong.status, 2, "the password is taken whole, a newline too: \(wrong)")
        XCTAssertEqual(wrong.standardError, "kc: the login password does not open the vault at \(home.path), so nothing was loaded; in the session run 'kc unlock' with the vault's passphrase, then 'kc vault passwd' to make it your login password\n",
                       "a login cannot try again: the line says what makes the next one unlock")
        let auth = try step("auth", password)
        XCTAssertEqual(auth.status, 0, "\(auth)")
        XCTAssertEqual(auth.standardError, "", "quiet when all went well")
        XCTAssertEqual(try accountView(service, home: home).output, "boot\talways\nuser\tafter-first-unlock\nuser value user=0\nboot value boot=0\nunlocked=1\n",
                       "unlocked; a new session that is not a login that unlocked lists no when-unlocked item")
        XCTAssertEqual(try runShell("find '\(home.dataHome)' ! -user \(VaultAccount.name)").output, "", "every file stays the user's")

        let other = try step("close_session", "")
        XCTAssertEqual(other.status, 0, "other PAM steps do nothing: \(other)")
        let noUser = try step("auth", password, user: nil)
        XCTAssertEqual(noUser.status, 64, "\(noUser)")
        XCTAssertEqual(noUser.standardError, "kc: --pam needs PAM_USER (run it from pam_kc.so or pam_exec)\n")

        // The password step's input is "OLD\0NEW"; anything else is refused and changes nothing.
        var environment = ["PAM_TYPE": "password", "PAM_USER": VaultAccount.name, "PATH": "/usr/bin:/bin"]
        let noSeparator = try runCommand(VaultAccount.kcPath, ["vault", "passwd", "--pam"], input: Array((password + "new").utf8), environment: environment)
        XCTAssertEqual(noSeparator.status, 64, "\(noSeparator)")
        XCTAssertEqual(noSeparator.standardError, "kc: --pam reads the old and the new password separated by a NUL byte (run it from pam_kc.so)\n")
        environment["PAM_USER"] = nil
        let passwdNoUser = try runCommand(VaultAccount.kcPath, ["vault", "passwd", "--pam"], input: Array(password.utf8) + [0] + Array("new".utf8), environment: environment)
        XCTAssertEqual(passwdNoUser.status, 64, "\(passwdNoUser)")
        XCTAssertEqual(try VaultAccount.run("printf '%s' '\(password)' | \"$KC\" unlock 2>&1 >/dev/null | grep -c wrong", vault: home).output, "0\n", "the passphrase is unchanged")

        VaultAccount.simulateReboot()
        XCTAssertEqual(try runCommand("/bin/rm", ["-rf", home.path]).status, 0)
        let noVault = try step("auth", password)
        XCTAssertEqual(noVault.status, 0, "a user without a vault: \(noVault)")
        XCTAssertEqual(noVault.standardError, "")
        XCTAssertFalse(FileOps.exists(home.path), "and none is made")
    }

    func testAlwaysItemsLoadAtBootWithTheHostKeyAndNoPassphrase() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: the host key is root's") }
        let hostFolder = try makeVault(create: false)
        XCTAssertEqual(chmod(hostFolder.dataHome, 0o755), 0)
        let hostKey = hostFolder.dataHome + "/host"
        let service = "kc-test.\(getpid()).vault-boot"

        // An always item saved before the host key exists waits for an unlock.
        _ = try VaultAccount.require()
        let home = try accountWithVault(service: service)
        let hostInit = try runCommand(builtKC, ["vault", "host-init"], environment: ["KC_HOST_KEY_DIR": hostKey, "PATH": "/usr/bin:/bin"])
        XCTAssertEqual(hostInit.status, 0, "\(hostInit)")
        XCTAssertTrue(hostInit.standardError.hasPrefix("kc: host key made in \(hostKey): age1"), hostInit.standardError)
        let modes = try runShell("stat -c '%n %a %U' '\(hostKey)' '\(hostKey)/host-identity' '\(hostKey)/host-recipient'")
        XCTAssertEqual(modes.output, "\(hostKey) 755 root\n\(hostKey)/host-identity 600 root\n\(hostKey)/host-recipient 644 root\n")
        let withHostKey = "KC_HOST_KEY_DIR='\(hostKey)'; export KC_HOST_KEY_DIR; "
        let stored = try VaultAccount.run(withHostKey + """
            printf 'saved with the host key' | "$KC" set --access always \(service) after-host-init
            printf 'device-only at boot' | "$KC" set --access always --this-device-only \(service) local
            "$KC" vault status --json | grep -c '"hostKey" : true'
            """, vault: home)
        XCTAssertEqual(stored.output, "1\n", "\(stored)")
        VaultAccount.simulateReboot()

        func boot() throws -> CommandResult {
            try runCommand(builtKC, ["vault", "boot", "--user", VaultAccount.name], environment: ["KC_HOST_KEY_DIR": hostKey, "PATH": "/usr/bin:/bin"])
        }
        let first = try boot()
        XCTAssertEqual(first.status, 0, "\(first)")
        XCTAssertEqual(first.output, "kc: \(VaultAccount.name): loaded 2 always items, 0 already loaded, 3 wait for an unlock\n",
                       "the always item saved before host-init and the other levels' items wait: \(first)")
        let view = try VaultAccount.run("""
            "$KC" ls -l \(service) | cut -f1,2
            "$KC" get \(service) after-host-init; echo
            "$KC" get \(service) local; echo
            echo "unlocked=$("$KC" vault status --json | grep -c '"unlocked" : true')"
            """, vault: home)
        XCTAssertEqual(view.output, "after-host-init\talways\nlocal\talways+this-device-only\nsaved with the host key\ndevice-only at boot\nunlocked=0\n",
                       "in the user's persistent keyring, no passphrase asked, the vault still locked: \(view)")

        // The user's next unlock encrypts the older always item to the host key too.
        let unlock = try VaultAccount.run(withHostKey + "printf '%s' '\(password)' | \"$KC\" unlock", vault: home)
        XCTAssertEqual(unlock.status, 0, "\(unlock)")
        VaultAccount.simulateReboot()
        let second = try boot()
        XCTAssertEqual(second.output, "kc: \(VaultAccount.name): loaded 3 always items, 0 already loaded, 2 wait for an unlock\n", "\(second)")
        XCTAssertEqual(try VaultAccount.run("\"$KC\" get \(service) boot", vault: home).output, "boot value")
        XCTAssertEqual(try runShell("find '\(home.dataHome)' ! -user \(VaultAccount.name)").output, "", "the user's vault files stay the user's")
    }

    // MARK: Debian's way: kc's pam-auth-update profile and pam_kc.so

    /// The repository (this file is Tests/kcTests/VaultLoginTests.swift).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// pam_kc.so as Tools/build-pam.sh builds it (Tools/test.sh does, first).
    func builtModule() throws -> String {
        let module = Self.repository + "/.build/pam/pam_kc.so"
        if !FileOps.exists(module) {
            let built = try runCommand("/bin/bash", [Self.repository + "/Tools/build-pam.sh"])
            guard built.status == 0 else { throw XCTSkip("the PAM module could not be built: \(built)") }
        }
        return module
    }

    /// This machine's PAM configuration (its pam-configs profiles and the common-* files
    /// pam-auth-update made from them) copied into a fresh root with kc's profile added,
    /// then `pam-auth-update --root ROOT` run on it with `arguments`, if any.
    func debianStack(_ arguments: [String]) throws -> String {
        guard FileOps.exists("/usr/sbin/pam-auth-update") else { throw XCTSkip("no pam-auth-update: not Debian or Ubuntu") }
        let root = try makeVault(create: false).dataHome + "/root"
        try LoginSandbox.debianPAMRoot(root, arguments)
        return root
    }

    /// The lines PAM reads in one of the root's common files (no comments, no blanks).
    func stackLines(_ root: String, _ name: String) -> [String] {
        (readWholeFile(root + "/etc/pam.d/common-" + name) ?? "").split(separator: "\n").map(String.init)
            .filter { !$0.hasPrefix("#") && !$0.trimmingCharacters(in: .whitespaces).isEmpty }
    }

    /// A PAM service made as Debian's login is (the root's common-auth, common-account,
    /// pam_keyinit, common-session, common-password), with the profile's `pam_kc.so`
    /// standing for the module built here running the account's kc (`module`: another
    /// module file instead). `record`: a script run after the session stack, as in
    /// ``pamService(kcAuth:record:)``.
    func loginService(_ root: String, module: String? = nil, kc: String? = nil, options: String = "",
                      record: (script: String, output: String)? = nil) throws -> String {
        let module = try module ?? builtModule()
        // Linux-PAM lowercases service names: a name with capitals would find no file.
        let name = "kc-test-\(getpid())-login-\(UUID().uuidString.prefix(6).lowercased())"
        var lines: [String] = []
        for stack in ["auth", "account", "session", "password"] {
            let text = (readWholeFile(root + "/etc/pam.d/common-" + stack) ?? "")
                .replacingOccurrences(of: "pam_kc.so", with: "\(module) kc=\(kc ?? VaultAccount.kcPath) \(options)")
            try text.write(toFile: root + "/etc/pam.d/login-" + stack, atomically: true, encoding: .utf8)
            if stack == "session" { lines.append("session optional pam_keyinit.so force revoke") }
            lines.append("@include \(root)/etc/pam.d/login-\(stack)")
        }
        if let record { lines.append("session optional pam_exec.so \(record.script) \(record.output) \(VaultAccount.kcPath)") }
        try (lines.joined(separator: "\n") + "\n").write(toFile: "/etc/pam.d/" + name, atomically: true, encoding: .utf8)
        addCleanup { try? FileManager.default.removeItem(atPath: "/etc/pam.d/" + name) }
        return name
    }

    /// A script for a PAM service's session stack, run in pamtester's process after kc's
    /// session step, as root: it writes, as the account and in that same session keyring,
    /// `kc ls -l SERVICE` of the session.
    func sessionRecorder(_ service: String) throws -> (script: String, output: String) {
        let folder = try makeVault(create: false)
        XCTAssertEqual(chmod(folder.dataHome, 0o755), 0)
        let script = folder.dataHome + "/record.sh", output = folder.dataHome + "/session.txt"
        try """
            #!/bin/sh
            uid=$(id -u "$PAM_USER"); gid=$(id -g "$PAM_USER")
            { echo "type=$PAM_TYPE"; setpriv --reuid="$uid" --regid="$gid" --init-groups "$2" ls -l \(service) | cut -f1,2; } >> "$1" 2>&1
            """.write(toFile: script, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(script, 0o755), 0)
        return (script, output)
    }

    func vaultStatus(_ home: VaultFixture) -> String {
        (try? VaultAccount.run("\"$KC\" vault status --json", vault: home))?.output ?? ""
    }

    func testEnablingKCsPAMProfilePutsItAfterThePasswordCheckAndDisablingPutsTheFilesBack() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: pam-auth-update") }
        let root = try debianStack(["--enable", "kc"])
        let original = try debianStack([])

        // In the auth and password stacks, kc comes after pam_permit: pam_unix's
        // success jump skips pam_deny and lands on pam_permit, never on kc's line, and a
        // failure stops at pam_deny before kc runs.
        for stack in ["auth", "password"] {
            let lines = stackLines(root, stack)
            let kc = lines.firstIndex { $0.contains("pam_kc.so") }
            let permit = lines.firstIndex { $0.contains("pam_permit.so") && $0.contains("required") }
            let deny = lines.firstIndex { $0.contains("pam_deny.so") }
            XCTAssertNotNil(kc, "common-\(stack): \(lines)")
            XCTAssertNotNil(permit, "common-\(stack): \(lines)")
            if let kc, let permit, let deny {
                XCTAssertGreaterThan(kc, permit, "common-\(stack): \(lines)")
                XCTAssertGreaterThan(permit, deny)
                XCTAssertEqual(lines[kc].split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init), [stack, "optional", "pam_kc.so"])
            }
            XCTAssertEqual(lines.filter { !$0.contains("pam_kc.so") }, stackLines(original, stack), "nothing else in common-\(stack) changed")
        }
        // The session step runs for logins, not for cron or services (interactive only).
        XCTAssertEqual(stackLines(root, "session").filter { $0.contains("pam_kc.so") }.count, 1, "\(stackLines(root, "session"))")
        XCTAssertEqual(stackLines(root, "session-noninteractive"), stackLines(original, "session-noninteractive"))
        XCTAssertEqual(stackLines(root, "account"), stackLines(original, "account"))

        // Disabling it gives back exactly the files it started from.
        let disable = try runCommand("/usr/sbin/pam-auth-update", ["--root", root, "--disable", "kc"],
                                     environment: ["DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"])
        XCTAssertEqual(disable.status, 0, "\(disable)")
        for stack in ["auth", "account", "password", "session", "session-noninteractive"] {
            XCTAssertEqual(readWholeFile(root + "/etc/pam.d/common-" + stack), readWholeFile(original + "/etc/pam.d/common-" + stack), "common-\(stack)")
        }
    }

    func testALoginThroughDebiansStackUnlocksTheVaultAndEveryOtherOutcomeIsAsWithoutKC() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-debian"
        let home = try accountWithVault(service: service)
        let recorder = try sessionRecorder(service)
        let withKC = try loginService(try debianStack(["--enable", "kc"]), record: recorder)
        let withoutKC = try loginService(try debianStack([]))

        // A wrong or empty password: refused exactly as without kc, and nothing unlocks.
        for attempt in ["not the password", ""] {
            let refused = try pamtester(withKC, ["authenticate"], password: attempt)
            let refusedWithout = try pamtester(withoutKC, ["authenticate"], password: attempt)
            XCTAssertNotEqual(refused.status, 0, "\(refused)")
            XCTAssertEqual(refused.status, refusedWithout.status)
            XCTAssertEqual(refused.output + refused.standardError, refusedWithout.output + refusedWithout.standardError)
        }
        XCTAssertEqual(try accountView(service, home: home).output, " user=1\n boot=1\nunlocked=0\n", "nothing was loaded")

        // The right password logs in and unlocks: the auth step loads the user's levels,
        // the session step the login's when-unlocked item.
        let login = try pamtester(withKC, ["authenticate", "open_session"], password: password)
        let loginWithout = try pamtester(withoutKC, ["authenticate", "open_session"], password: password)
        XCTAssertEqual(login.status, 0, "\(login)")
        XCTAssertEqual(login.output + login.standardError, loginWithout.output + loginWithout.standardError)
        XCTAssertEqual(try accountView(service, home: home).output,
                       "boot\talways\nuser\tafter-first-unlock\nuser value user=0\nboot value boot=0\nunlocked=1\n")
        XCTAssertEqual(readWholeFile(recorder.output), "type=open_session\nboot\talways\nsession\twhen-unlocked\nuser\tafter-first-unlock\n")
        XCTAssertFalse(vaultStatus(home).contains("\"lastError\""), vaultStatus(home))

        // kc missing, or a kc its user could change (the module runs it as root with the
        // password): not run, and the login goes on as without kc. So does a login whose
        // module file is gone (PAM skips an optional module it cannot load).
        VaultAccount.simulateReboot()
        let userOwnedKC = try makeVault(create: false).dataHome + "/kc"
        XCTAssertEqual(try runShell("cp '\(VaultAccount.kcPath)' '\(userOwnedKC)' && chown \(VaultAccount.name) '\(userOwnedKC)' && chmod 755 '\(userOwnedKC)' '\(URL(fileURLWithPath: userOwnedKC).deletingLastPathComponent().path)'").status, 0)
        // Installed with its front (docs/FRONT.md), kc executes the kc-full beside it: one
        // its user could change is refused as kc itself would be.
        let frontFolder = try makeVault(create: false).dataHome + "/front"
        XCTAssertEqual(try runShell("mkdir -p '\(frontFolder)' && cp '\(VaultAccount.kcPath)' '\(frontFolder)/kc' && cp '\(VaultAccount.kcPath)' '\(frontFolder)/kc-full' && chown \(VaultAccount.name) '\(frontFolder)/kc-full' && chmod 755 '\(frontFolder)' '\(frontFolder)/kc' '\(frontFolder)/kc-full'").status, 0)
        let withoutKCLogin = try pamtester(withoutKC, ["authenticate", "open_session"], password: password)
        let withoutKCRefusal = try pamtester(withoutKC, ["authenticate"], password: "not the password")
        let broken = [try loginService(try debianStack(["--enable", "kc"]), kc: "/nonexistent/kc"),
                      try loginService(try debianStack(["--enable", "kc"]), kc: userOwnedKC),
                      try loginService(try debianStack(["--enable", "kc"]), kc: frontFolder + "/kc"),
                      try loginService(try debianStack(["--enable", "kc"]), module: "/nonexistent/pam_kc.so")]
        for stack in broken {
            let result = try pamtester(stack, ["authenticate", "open_session"], password: password)
            XCTAssertEqual(result.status, 0, "\(stack): \(result)")
            XCTAssertEqual(result.output + result.standardError, withoutKCLogin.output + withoutKCLogin.standardError, stack)
            XCTAssertEqual(try pamtester(stack, ["authenticate"], password: "not the password").status, withoutKCRefusal.status, stack)
        }
        XCTAssertEqual(try accountView(service, home: home).output, " user=1\n boot=1\nunlocked=0\n", "no kc ran")
    }

    /// kc's front installed without the full kc beside it (a half-done install) cannot
    /// unlock anything: the login goes on exactly as without kc, and the module says
    /// in the log why kc did nothing, rather than nothing at all.
    func testAFrontWithoutItsFullKcLeavesTheLoginAsWithoutKCAndIsLogged() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let front = builtFolder + "/kc-front"
        guard FileManager.default.isExecutableFile(atPath: front) else { throw XCTSkip("the front was not built (Tools/build-front.sh)") }
        let service = "kc-test.\(getpid()).vault-debian-half"
        let home = try accountWithVault(service: service)
        let folder = try makeVault(create: false).dataHome + "/half-installed"
        XCTAssertEqual(try runShell("mkdir -p '\(folder)' && cp '\(front)' '\(folder)/kc' && chmod 755 '\(folder)' '\(folder)/kc'").status, 0)
        let log = try DatagramReceiver.listenAsSyslog()
        defer { log.close() }
        let withoutKC = try loginService(try debianStack([]))
        let halfKC = try loginService(try debianStack(["--enable", "kc"]), kc: folder + "/kc")

        let login = try pamtester(halfKC, ["authenticate", "open_session"], password: password)
        let loginWithout = try pamtester(withoutKC, ["authenticate", "open_session"], password: password)
        XCTAssertEqual(login.status, 0, "\(login)")
        XCTAssertEqual(login.output + login.standardError, loginWithout.output + loginWithout.standardError)
        XCTAssertEqual(try accountView(service, home: home).output, " user=1\n boot=1\nunlocked=0\n", "nothing was loaded")
        let line = log.receive(within: 5) { $0.contains("kc could not run") }
        XCTAssertNotNil(line, "pam_kc logs that kc could not run")
        XCTAssertTrue(line?.contains("exit status 127") ?? false, line ?? "")
        XCTAssertFalse(line?.contains(password) ?? false)
    }

    func testAVaultThatCannotOpenNeverChangesTheLoginAndItsStatusSaysWhy() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-debian-fail"
        let withKC = try loginService(try debianStack(["--enable", "kc"]))
        let withoutKC = try loginService(try debianStack([]))
        func bothLogIn() throws {
            let with = try pamtester(withKC, ["authenticate", "open_session"], password: password)
            let without = try pamtester(withoutKC, ["authenticate", "open_session"], password: password)
            XCTAssertEqual(with.status, 0, "\(with)")
            XCTAssertEqual(with.output + with.standardError, without.output + without.standardError)
        }

        // A vault sealed with another passphrase than the login password.
        var home = try accountWithVault(service: service, vaultPassphrase: "another passphrase")
        try bothLogIn()
        XCTAssertEqual(try accountView(service, home: home).output, " user=1\n boot=1\nunlocked=0\n")
        XCTAssertTrue(vaultStatus(home).contains("wrong passphrase for the vault"), vaultStatus(home))

        // A damaged key file.
        home = try accountWithVault(service: service)
        XCTAssertEqual(try VaultAccount.run("printf 'not an age file\\n' > \"$VAULT/identity.age\"", vault: home).status, 0)
        try bothLogIn()
        XCTAssertEqual(try accountView(service, home: home).output, " user=1\n boot=1\nunlocked=0\n")
        XCTAssertTrue(vaultStatus(home).contains("identity.age"), vaultStatus(home))

        // A damaged item: the rest loads, and the session step keeps the auth step's error.
        home = try accountWithVault(service: service)
        XCTAssertEqual(try VaultAccount.run("printf 'damaged' > \"$VAULT/items/after-first-unlock/\(service)/user\"", vault: home).status, 0)
        try bothLogIn()
        XCTAssertEqual(try accountView(service, home: home).output, "boot\talways\n user=2\nboot value boot=0\nunlocked=1\n",
                       "the damaged item is not loaded, and a read names the file")
        XCTAssertTrue(vaultStatus(home).contains("after-first-unlock/\(service)/user"), "the auth step's error outlives the session step: \(vaultStatus(home))")

        // No vault at all.
        VaultAccount.simulateReboot()
        XCTAssertEqual(try runCommand("/bin/rm", ["-rf", home.path]).status, 0)
        try bothLogIn()
        XCTAssertFalse(FileOps.exists(home.path), "and none is made")
    }

    func testPasswdChangesTheVaultsPassphraseWithTheLoginPasswordAndARootResetIsReported() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-passwd"
        let home = try accountWithVault(service: service)
        let stack = try loginService(try debianStack(["--enable", "kc"]))
        func unlock(_ passphrase: String) throws -> CommandResult {
            try VaultAccount.run("printf '%s' '\(passphrase)' | \"$KC\" unlock", vault: home)
        }

        // The user changes it with passwd (real uid the user's, effective root's, as the
        // setuid passwd runs): pam_unix asks the old one, and kc's step follows.
        let changed = "Changed-\(UUID().uuidString.prefix(10))"
        let passwd = try runCommand("/usr/bin/setpriv", ["--ruid=\(VaultAccount.name)", "/usr/bin/pamtester", stack, VaultAccount.name, "chauthtok"],
                                    input: Array("\(password)\n\(changed)\n\(changed)\n".utf8))
        XCTAssertEqual(passwd.status, 0, "\(passwd)")
        XCTAssertEqual(try unlock(password).status, 2, "the old passphrase no longer opens the vault")
        XCTAssertEqual(try unlock(changed).status, 0, "the new login password does")
        XCTAssertTrue(try pamtester(stack, ["authenticate"], password: changed).status == 0)
        XCTAssertFalse(vaultStatus(home).contains("\"lastError\""), vaultStatus(home))

        // Root sets a new password: PAM has no old one, so the vault keeps its passphrase
        // and says so, at the next unlock and in its status.
        let reset = "Reset-\(UUID().uuidString.prefix(10))"
        let rootReset = try runCommand("/usr/bin/pamtester", [stack, VaultAccount.name, "chauthtok"], input: Array("\(reset)\n\(reset)\n".utf8))
        XCTAssertEqual(rootReset.status, 0, "\(rootReset)")
        XCTAssertTrue(vaultStatus(home).contains("\"loginPasswordAhead\" : "), vaultStatus(home))
        let withNew = try unlock(reset)
        XCTAssertEqual(withNew.status, 2)
        XCTAssertTrue(withNew.standardError.contains("Your login password was changed without the old one reaching the vault, so the vault still opens with its old passphrase; unlock with that, then run 'kc vault passwd'"), withNew.standardError)
        let withOld = try unlock(changed)
        XCTAssertEqual(withOld.status, 0)
        XCTAssertTrue(withOld.standardError.hasPrefix("kc: note: your login password was changed without the old one reaching the vault"), withOld.standardError)
        let caughtUp = try VaultAccount.run("printf '%s' '\(reset)' | \"$KC\" vault passwd --passphrase-fd 3 --new-passphrase-fd 0 3<<EOF\n\(changed)\nEOF\n\"$KC\" vault status --json | grep -c loginPasswordAhead", vault: home)
        XCTAssertEqual(caughtUp.output, "0\n", "kc vault passwd catches up: \(caughtUp)")
        XCTAssertEqual(try unlock(reset).status, 0)
    }

    func testWhenUnlockedItemsComeBackOnlyInALoginSession() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-logout"
        let home = try accountWithVault(service: service)
        let recorder = try sessionRecorder(service)
        let stack = try loginService(try debianStack(["--enable", "kc"]), record: recorder)
        XCTAssertEqual(try pamtester(stack, ["authenticate", "open_session", "close_session"], password: password).status, 0)
        XCTAssertTrue(readWholeFile(recorder.output)?.contains("session\twhen-unlocked") == true, "the login had it")

        // Logged out: every process of the user gone. The vault stays unlocked (its
        // after-first-unlock items still load), but a process outside a login (as cron
        // or a service runs) gets no when-unlocked item, from the kernel or the vault.
        _ = try runCommand("/usr/bin/pkill", ["-KILL", "-u", VaultAccount.name])
        let outside = try VaultAccount.run("""
            "$KC" get \(service) session; echo " session=$?"
            "$KC" ls \(service)
            keyctl invalidate "$(keyctl search @u user user)"; "$KC" get \(service) user; echo " user=$?"
            """, vault: home)
        XCTAssertEqual(outside.output, " session=1\nboot\nuser\nuser value user=0\n", "\(outside)")
        XCTAssertEqual(outside.standardError, "kc: no item 'session' in service '\(service)' in this session: the vault keeps when-unlocked items for login sessions (not cron, services or shells outside a login); run 'kc unlock' to load them here, or store it with --access after-first-unlock\n")
        let viaRunuser = try runCommand("/usr/sbin/runuser", ["-u", VaultAccount.name, "--", "/usr/bin/env", "HOME=\(home.dataHome)", VaultAccount.kcPath, "get", service, "session"])
        XCTAssertEqual(viaRunuser.status, 1, "\(viaRunuser)")

        // A session that unlocked gets it back when a read misses; and so does the next login.
        let unlocked = try VaultAccount.run("""
            printf '%s' '\(password)' | "$KC" unlock 2>/dev/null
            keyctl invalidate "$(keyctl search @s user session)"
            "$KC" get \(service) session
            """, vault: home)
        XCTAssertEqual(unlocked.output, "session value", "\(unlocked)")
        XCTAssertEqual(try pamtester(stack, ["authenticate", "open_session"], password: password).status, 0)
        XCTAssertEqual(readWholeFile(recorder.output)?.components(separatedBy: "session\twhen-unlocked").count, 3)
    }

    /// Each login's session step loads the timed when-unlocked items into the new
    /// session keyring as new keys, each with a deadline record in the user keyring;
    /// the records of the logins that ended must go with their items. Before, three
    /// 30-day items filled an ordinary user's 200-key quota in about 60 logins (issue
    /// 35): the next login got none of its items, and every `kc set` failed. Through
    /// Debian's stack with pam_kc.so, as the test account (quota 200 keys, 20,000
    /// bytes); `KC_LOGIN_SOAK=1000` runs 1,000 logins instead of 120.
    func testLoginsWithTimedItemsLeaveTheUsersKeyCountAsTheFirstLoginLeftIt() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        let service = "kc-test.\(getpid()).vault-many-logins"
        let home = try accountWithVault(service: service)
        let timed = try VaultAccount.run("""
            for item in timed1 timed2 timed3; do
                printf 'timed value' | "$KC" set --timeout 30d \(service) $item || echo "set failed"
            done
            """, vault: home)
        XCTAssertEqual(timed.output, "", "\(timed)")
        VaultAccount.simulateReboot()
        let stack = try loginService(try debianStack(["--enable", "kc"]))
        let recorder = try sessionRecorder(service)
        let recorded = try loginService(try debianStack(["--enable", "kc"]), record: recorder)
        XCTAssertEqual(try pamtester(stack, ["authenticate"], password: password).status, 0, "the vault is unlocked")
        let uid = VaultAccount.uid
        let logins = ProcessInfo.processInfo.environment["KC_LOGIN_SOAK"].flatMap(Int.init) ?? 120

        // A login ends with its session keyring revoked (pam_keyinit); the kernel
        // collects its keys a moment later. Counted once that is done.
        func login() throws {
            let result = try pamtester(stack, ["open_session", "close_session"], password: password)
            XCTAssertEqual(result.status, 0, "\(result)")
        }
        func settledKeyCount() -> Int? {
            var last = keysCharged(to: uid)
            for _ in 0..<50 {
                usleep(100_000)
                let now = keysCharged(to: uid)
                if now == last { return now }
                last = now
            }
            return last
        }
        try login()
        let afterFirst = try XCTUnwrap(settledKeyCount(), "/proc/key-users names the account")
        for number in 2...max(2, logins) {
            try login()
            // The ended login's own keys are collected within a second; what stays
            // beyond that is left behind for good.
            waitForKeys(of: uid, toDropTo: afterFirst, seconds: 1)
            let count = keysCharged(to: uid) ?? 0
            guard count <= afterFirst else {
                XCTFail("after login \(number) the account is charged \(count) keys, after the first \(afterFirst)")
                break
            }
        }
        XCTAssertEqual(settledKeyCount(), afterFirst, "\(logins) logins leave the key count as the first login left it")

        // The next login still gets every item, and a timed write still fits.
        XCTAssertEqual(try pamtester(recorded, ["open_session"], password: password).status, 0)
        XCTAssertEqual(readWholeFile(recorder.output),
                       "type=open_session\nboot\talways\nsession\twhen-unlocked\ntimed1\twhen-unlocked\ntimed2\twhen-unlocked\ntimed3\twhen-unlocked\nuser\tafter-first-unlock\n")
        let write = try VaultAccount.run("printf 'new value' | \"$KC\" set --timeout 30d \(service) timed4", vault: home)
        XCTAssertEqual(write.status, 0, "\(write)")
    }

    func testTheAuthStepLoadsASharedServicesItemsWithAllTheUsersGroups() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, a test account and a group") }
        let group = "kc-test-vault-share"
        if (try runCommand("/usr/bin/getent", ["group", group])).status != 0 {
            XCTAssertEqual(try runCommand("/usr/sbin/groupadd", ["--system", group]).status, 0)
        }
        let service = "kc-test.\(getpid()).vault-groups"
        let home = try accountWithVault(service: service)
        XCTAssertEqual(try runCommand("/usr/sbin/usermod", ["-aG", group, VaultAccount.name]).status, 0)
        addCleanup { _ = try? runCommand("/usr/bin/gpasswd", ["-d", VaultAccount.name, group]) }
        let stack = try loginService(try debianStack(["--enable", "kc"]))
        // The service shared with the group lives on in the user keyring; one of its
        // items is gone from the kernel (kept in the vault).
        let shared = try VaultAccount.run("""
            printf '%s' '\(password)' | "$KC" unlock >/dev/null 2>&1 || echo "unlock failed"
            "$KC" share \(service) --group \(group) >/dev/null 2>&1 || echo "share failed"
            printf 'shared value' | "$KC" set --access after-first-unlock \(service) shared || echo "set failed"
            keyctl invalidate "$(keyctl search @u user shared)" || echo "invalidate failed"
            "$KC" lock >/dev/null 2>&1
            """, vault: home)
        XCTAssertEqual(shared.output, "", "\(shared)")
        XCTAssertEqual(try pamtester(stack, ["authenticate"], password: password).status, 0)
        let view = try VaultAccount.run("""
            keyctl search @u user shared >/dev/null && echo "in the kernel"
            "$KC" get \(service) shared; echo
            "$KC" vault status --json | grep -c '"lastError"'
            """, vault: home)
        XCTAssertEqual(view.output, "in the kernel\nshared value\n0\n", "the auth step, in the user's groups, put it back in the shared service: \(view)")
    }

    // MARK: Two logins, one vault (issue 35)

    /// A script for a login's session stack (run as root after kc's session step) that
    /// runs `steps` as the account in that login's session keyring: `$KC` is kc, `as_user`
    /// runs a command as the account. It first writes `ready`, and with `waitFor` waits
    /// (at most 30 s) for that file before its steps: the login stays open meanwhile.
    private func loginSteps(_ steps: String, waitFor: String? = nil) throws -> (script: String, output: String) {
        let folder = try makeVault(create: false)
        XCTAssertEqual(chmod(folder.dataHome, 0o755), 0)
        let script = folder.dataHome + "/steps.sh", output = folder.dataHome + "/steps.txt"
        let wait = waitFor.map { "i=0; while [ ! -e '\($0)' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done" } ?? ""
        try """
            #!/bin/sh
            KC="$2"
            uid=$(id -u "$PAM_USER"); gid=$(id -g "$PAM_USER")
            as_user() { setpriv --reuid="$uid" --regid="$gid" --init-groups "$@"; }
            echo ready > "$1.ready"
            \(wait)
            { \(steps)
            } >> "$1" 2>&1
            """.write(toFile: script, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(script, 0o755), 0)
        return (script, output)
    }

    /// Login A loaded the `when-unlocked` item; login B (open at the same time) stores a
    /// newer value; then A locks, or unlocks again. A's copy is the older: the vault keeps
    /// B's value, and A's unlock brings A's copy up to date.
    func testTheOlderOfTwoLoginsNeverPutsItsValueBackOverTheNewer() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, and a test account") }
        for step in ["lock", "unlock"] {
            let service = "kc-test.\(getpid()).two-logins-\(step)"
            let home = try accountWithVault(service: service)
            let root = try debianStack(["--enable", "kc"])
            let go = try makeVault(create: false).dataHome + "/go"
            let aSteps = step == "lock"
                ? "as_user \"$KC\" lock; echo \"lock=$?\"; as_user \"$KC\" get \(service) session; echo \" get=$?\""
                : "printf '%s' '\(password)' | as_user \"$KC\" unlock; echo \"unlock=$?\"; as_user \"$KC\" get \(service) session; echo \" get=$?\""
            let a = try loginSteps("as_user \"$KC\" get \(service) session; echo \" before=$?\"; " + aSteps, waitFor: go)
            let b = try loginSteps("printf 'newer value' | as_user \"$KC\" set \(service) session; echo \"set=$?\"")
            let loginA = try loginService(root, record: a), loginB = try loginService(root, record: b)

            let first = Process()
            first.executableURL = URL(fileURLWithPath: "/usr/bin/pamtester")
            first.arguments = [loginA, VaultAccount.name, "authenticate", "open_session"]
            let input = Pipe()
            first.standardInput = input
            first.standardOutput = FileHandle.nullDevice
            first.standardError = FileHandle.nullDevice
            try first.run()
            try input.fileHandleForWriting.write(contentsOf: Data((password + "\n").utf8))
            try input.fileHandleForWriting.close()
            for _ in 0..<300 where !FileOps.exists(a.output + ".ready") { usleep(100_000) }
            XCTAssertTrue(FileOps.exists(a.output + ".ready"), "login A reached its session steps")

            let second = try pamtester(loginB, ["authenticate", "open_session"], password: password)
            XCTAssertEqual(second.status, 0, "\(second)")
            XCTAssertEqual(readWholeFile(b.output), "set=0\n", "login B stored the newer value")
            FileManager.default.createFile(atPath: go, contents: nil)
            first.waitUntilExit()
            let expected = step == "lock"
                ? "session value before=0\nlock=0\n get=1\n"
                : "session value before=0\nunlock=0\nnewer value get=0\n"
            XCTAssertEqual(readWholeFile(a.output)?.replacingOccurrences(of: #"kc: [^\n]*\n"#, with: "", options: .regularExpression), expected,
                           "login A: \(readWholeFile(a.output) ?? "")")
            // A new login gets what the vault keeps: B's value.
            let after = try VaultAccount.run("""
                printf '%s' '\(password)' | "$KC" unlock 2>/dev/null
                "$KC" get \(service) session
                """, vault: home)
            XCTAssertEqual(after.output, "newer value", "after A's \(step) the vault keeps B's newer value: \(after)")
        }
    }
}
