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
    private var password = ""

    override func tearDownWithError() throws {
        try super.tearDownWithError()
        if getuid() == 0 { VaultAccount.reset() }
    }

    /// The account with a fresh home, a password and a vault sealed with it holding an
    /// item at each level (`svc`: `session`, `user`, `boot`), its keyrings then emptied as
    /// by a reboot. The vault is at `~/.local/share/kc`, where PAM and the boot step find it.
    private func accountWithVault(service: String, hostKeyDirectory: String? = nil) throws -> VaultFixture {
        _ = try VaultAccount.require()
        VaultAccount.reset()
        let home = try makeVault(owner: VaultAccount.name, inHome: true)
        try VaultAccount.setHome(home.dataHome)
        password = "pw-" + UUID().uuidString.prefix(12)
        let set = try runCommand("/usr/sbin/chpasswd", [], input: Array("\(VaultAccount.name):\(password)\n".utf8))
        guard set.status == 0 else { throw XCTSkip("chpasswd failed: \(set)") }
        let hostKey = hostKeyDirectory.map { "KC_HOST_KEY_DIR='\($0)'; export KC_HOST_KEY_DIR; " } ?? ""
        let made = try VaultAccount.run(hostKey + """
            printf '%s' '\(password)' | "$KC" vault init --work-factor 10 2>/dev/null || echo "init failed"
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
    private func pamService(kcAuth: Bool = true, record: (script: String, output: String)? = nil) throws -> String {
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

    private func pamtester(_ service: String, _ operations: [String], password: String) throws -> CommandResult {
        try runCommand("/usr/bin/pamtester", [service, VaultAccount.name] + operations, input: Array((password + "\n").utf8))
    }

    /// What the account sees in a fresh session: `kc ls -l` of the service (no reload
    /// from the vault), `kc get` of each item, and whether the vault is unlocked.
    private func accountView(_ service: String, home: VaultFixture) throws -> CommandResult {
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
        // Runs in pamtester's process after kc's session step, as root: records, as the
        // account and in that same session keyring, what the session holds.
        let folder = try makeVault(create: false)
        XCTAssertEqual(chmod(folder.dataHome, 0o755), 0)
        let script = folder.dataHome + "/record.sh", output = folder.dataHome + "/session.txt"
        try """
            #!/bin/sh
            uid=$(id -u "$PAM_USER"); gid=$(id -g "$PAM_USER")
            { echo "type=$PAM_TYPE"; setpriv --reuid="$uid" --regid="$gid" --clear-groups "$2" ls -l \(service) | cut -f1,2; } >> "$1" 2>&1
            """.write(toFile: script, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(script, 0o755), 0)
        let pam = try pamService(record: (script, output))

        let login = try pamtester(pam, ["authenticate", "open_session"], password: password)
        XCTAssertEqual(login.status, 0, "\(login)")
        XCTAssertTrue(login.standardError.contains("pamtester: successfully authenticated") || login.output.contains("successfully authenticated"), "\(login)")
        XCTAssertTrue((login.output + login.standardError).contains("pamtester: successfully opened a session"), "\(login)")

        let view = try accountView(service, home: home)
        // The view runs in a session keyring of its own (keyctl session -), which, with the
        // vault unlocked, `kc ls` fills with the when-unlocked item as a new login's would.
        XCTAssertEqual(view.output, "boot\talways\nsession\twhen-unlocked\nuser\tafter-first-unlock\nuser value user=0\nboot value boot=0\nunlocked=1\n",
                       "the auth step loaded after-first-unlock and always items and left the vault unlocked: \(view)")
        let session = try String(contentsOfFile: output, encoding: .utf8)
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
        XCTAssertEqual(wrong.standardError, "kc: wrong passphrase for the vault at \(home.path): nothing was loaded or changed; try again\n")
        let auth = try step("auth", password)
        XCTAssertEqual(auth.status, 0, "\(auth)")
        XCTAssertEqual(auth.standardError, "", "quiet when all went well")
        XCTAssertEqual(try accountView(service, home: home).output, "boot\talways\nsession\twhen-unlocked\nuser\tafter-first-unlock\nuser value user=0\nboot value boot=0\nunlocked=1\n",
                       "unlocked: a listing in a new session shows its when-unlocked item too")
        XCTAssertEqual(try runShell("find '\(home.dataHome)' ! -user \(VaultAccount.name)").output, "", "every file stays the user's")

        let other = try step("close_session", "")
        XCTAssertEqual(other.status, 0, "other PAM steps do nothing: \(other)")
        let noUser = try step("auth", password, user: nil)
        XCTAssertEqual(noUser.status, 64, "\(noUser)")
        XCTAssertEqual(noUser.standardError, "kc: --pam needs PAM_USER (run it from pam_exec)\n")

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
}
