import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// `kc vault init/status/passwd`, `kc set --ephemeral`, and what kc does without a vault.
final class VaultCommandTests: VaultTestCase {
    func testAnEphemeralItemIsNeverSavedAndIsGoneAfterAReboot() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "kernel-only", "e", options: ["--ephemeral"]).status, 0)
        XCTAssertEqual(vault.itemFiles(), [], "an ephemeral item has no file")
        XCTAssertEqual(try vault.set(service, "saved", "s").status, 0)
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/saved"])

        let over = try vault.set(service, "saved", "now kernel only", options: ["--ephemeral"])
        XCTAssertEqual(over.status, 0, "\(over)")
        XCTAssertEqual(vault.itemFiles(), [], "storing it --ephemeral removed the saved copy")
        XCTAssertEqual(try vault.get(service, "saved").output, "now kernel only")

        simulateReboot()
        let (unlocked, report) = try vault.unlock()
        XCTAssertEqual(unlocked.status, 0, "\(unlocked)")
        XCTAssertEqual(report?.loadedCount, 0, "\(unlocked)")
        for name in ["kernel-only", "saved"] {
            let get = try vault.get(service, name)
            XCTAssertEqual(get.status, 1, "\(get)")
            XCTAssertEqual(get.standardError, "kc: no item '\(name)' in service '\(service)'; list the items with 'kc ls \(service)'\n")
        }
    }

    func testWithoutAVaultNothingIsWrittenToDisk() throws {
        let vault = try makeVault(create: false)
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "a", "1").status, 0)
        XCTAssertEqual(try vault.set(service, "b", "2", options: ["--access", "after-first-unlock", "--timeout", "1h"]).status, 0)
        XCTAssertEqual(try vault.set(service, "c", "3", options: ["--access", "always", "--this-device-only"]).status, 0)
        XCTAssertEqual(try vault.set(service, "a", "1 again").status, 0)
        XCTAssertEqual(try vault.remove(service, "b").status, 0)
        XCTAssertEqual(try vault.get(service, "a").output, "1 again")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: vault.dataHome), [], "nothing under XDG_DATA_HOME")
        let status = try vault.kc("vault", "status")
        XCTAssertEqual(status.status, 1, "\(status)")
        XCTAssertEqual(status.output, "vault:     \(vault.path)\nstate:     none (items are kept in the kernel only; create one with 'kc vault init')\n")
    }

    func testChangingThePassphraseKeepsTheItemsAndOnlyTheNewOneUnlocks() throws {
        let vault = try makeVault()
        let service = uniqueService()
        for (name, level) in [("a", "when-unlocked"), ("b", "after-first-unlock"), ("c", "always")] {
            XCTAssertEqual(try vault.set(service, name, "value " + name, options: ["--access", level]).status, 0)
        }
        let items = try vault.itemDigest()
        let identity = try Data(contentsOf: URL(fileURLWithPath: vault.path + "/identity.age"))

        let changed = try vault.bash("kc vault passwd --passphrase-fd 3 --new-passphrase-fd 4 3<<<\"$PASSPHRASE\" 4<<<'a new passphrase'")
        XCTAssertEqual(changed.status, 0, "\(changed)")
        XCTAssertEqual(changed.standardError, "kc: passphrase changed\n")
        XCTAssertEqual(try vault.itemDigest(), items, "the item files are not touched")
        XCTAssertNotEqual(try Data(contentsOf: URL(fileURLWithPath: vault.path + "/identity.age")), identity, "only the key is sealed again")
        XCTAssertEqual(try vault.status().workFactor, VaultFixture.workFactor, "the work factor is kept")

        simulateReboot()
        let old = try vault.unlock()
        XCTAssertEqual(old.result.status, 2, "\(old.result)")
        XCTAssertEqual(old.result.standardError, "kc: wrong passphrase for the vault at \(vault.path): nothing was loaded or changed; try again\n")
        let new = try vault.unlock(passphrase: "a new passphrase")
        XCTAssertEqual(new.result.status, 0, "\(new.result)")
        XCTAssertEqual(new.report?.loadedCount, 3, "\(new.result)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "c"), "value c")

        let wrongOld = try vault.bash("kc vault passwd --passphrase-fd 3 --new-passphrase-fd 4 3<<<'not it' 4<<<'another'")
        XCTAssertEqual(wrongOld.status, 2, "\(wrongOld)")
        XCTAssertEqual(wrongOld.standardError, "kc: wrong passphrase for the vault at \(vault.path): nothing was loaded or changed; try again\n")
        let emptyNew = try vault.bash("kc vault passwd --passphrase-fd 3 --new-passphrase-fd 4 3<<<'a new passphrase' 4</dev/null")
        XCTAssertEqual(emptyNew.status, 2, "\(emptyNew)")
        XCTAssertTrue(emptyNew.standardError.hasPrefix("kc: empty passphrase"), emptyNew.standardError)
        let noNew = try vault.bash("kc vault passwd --passphrase-fd 3 3<<<'a new passphrase' </dev/null")
        XCTAssertEqual(noNew.status, 64, "\(noNew)")
        XCTAssertEqual(noNew.standardError, "kc: give the new passphrase with --new-passphrase-fd N when standard input is not a terminal\n")
        simulateReboot()
        XCTAssertEqual(try vault.unlock(passphrase: "a new passphrase").result.status, 0, "failed attempts changed nothing")
    }

    /// `printf 'pw\npw\n' | kc vault init`, answering twice as the terminal prompt asks,
    /// made the passphrase "pw\npw", which no login (PAM gives one line) and no one-line
    /// `kc unlock` can ever give. A new passphrase with a line break or a NUL is refused,
    /// and nothing is made or changed; one trailing newline is still dropped.
    func testANewPassphraseNoLoginCouldTypeIsRefused() throws {
        let vault = try makeVault(create: false)
        let twice = try vault.bash("printf 'pw-long-one\\npw-long-one\\n' | kc vault init --work-factor 10")
        XCTAssertEqual(twice.status, 64, "\(twice)")
        XCTAssertEqual(twice.standardError, "kc: the new passphrase from standard input holds a line break, so no login could ever type it; give it once, on one line (printf '%s\\n' PASSPHRASE | kc vault init); nothing was changed\n")
        XCTAssertFalse(FileOps.exists(vault.path + "/identity.age"), "no vault was made")
        let withNUL = try vault.bash("printf 'pw\\0pw' | kc vault init --work-factor 10")
        XCTAssertEqual(withNUL.status, 64, "\(withNUL)")
        XCTAssertTrue(withNUL.standardError.contains("holds a NUL byte"), withNUL.standardError)

        _ = try vault.create()
        let before = try vault.digest()
        let changed = try vault.bash("kc vault passwd --passphrase-fd 3 --new-passphrase-fd 4 3<<<\"$PASSPHRASE\" 4< <(printf 'new-one\\r\\nnew-one\\n')")
        XCTAssertEqual(changed.status, 64, "\(changed)")
        XCTAssertTrue(changed.standardError.hasPrefix("kc: the new passphrase from --new-passphrase-fd 4 holds a line break"), changed.standardError)
        XCTAssertEqual(try vault.digest(), before, "the vault is as it was")
        simulateReboot()
        XCTAssertEqual(try vault.unlock().result.status, 0, "the old passphrase still opens it")
    }

    func testVaultStatusCountsTheItemsAtEachLevelAndSaysWhetherItIsUnlocked() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let stored: [(String, [String])] = [
            ("a", []), ("b", []), ("c", ["--access", "after-first-unlock"]),
            ("d", ["--access", "always", "--this-device-only"]), ("e", ["--this-device-only"]),
        ]
        for (name, options) in stored { XCTAssertEqual(try vault.set(service, name, "v", options: options).status, 0) }

        var status = try vault.status()
        XCTAssertTrue(status.exists)
        XCTAssertTrue(status.unlocked, "kc vault init leaves the vault unlocked")
        XCTAssertEqual(status.path, vault.path)
        XCTAssertEqual(status.workFactor, VaultFixture.workFactor)
        XCTAssertEqual(status.items, [
            "when-unlocked": 2, "when-unlocked+this-device-only": 1, "after-first-unlock": 1,
            "after-first-unlock+this-device-only": 0, "always": 0, "always+this-device-only": 1,
        ])

        let locked = try vault.lock()
        XCTAssertEqual(locked.status, 0, "\(locked)")
        XCTAssertEqual(locked.standardError, "kc: locked; dropped 3 items from the kernel\n", "the saved when-unlocked items")
        XCTAssertFalse(try vault.status().unlocked)
        XCTAssertFalse(vault.isStashed, "the vault's key left the user keyring")
        XCTAssertEqual(try vault.get(service, "c").output, "v", "after-first-unlock items stay until a reboot")
        XCTAssertEqual(try vault.get(service, "a").status, 1, "when-unlocked items were dropped")

        let before = wallSeconds()
        XCTAssertEqual(try vault.unlock().result.status, 0)
        status = try vault.status()
        XCTAssertTrue(status.unlocked)
        XCTAssertTrue(vault.isStashed)
        XCTAssertLessThanOrEqual(abs((status.lastUnlock ?? 0) - before), 2, "when it was last unlocked")
        XCTAssertNil(status.lastError)

        let text = try vault.kc("vault", "status")
        XCTAssertEqual(text.status, 0, "\(text)")
        XCTAssertTrue(text.output.hasPrefix("vault:     \(vault.path)\nstate:     unlocked\nitems:     2 when-unlocked\n"), text.output)
    }

    /// A new account has no `~/.local/share` yet: `kc vault init` makes the folders up to
    /// the vault, as the XDG Base Directory spec asks (mode 0700 for those it makes).
    func testInitOnAFreshAccountMakesTheMissingFoldersAboveTheVault() throws {
        let vault = try makeVault(create: false, inHome: true)
        XCTAssertFalse(FileOps.exists(vault.dataHome + "/.local"))
        let result = try vault.kc(["vault", "init", "--work-factor", "10"], input: Array((VaultFixture.passphrase + "\n").utf8))
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.standardError.split(separator: "\n").first.map(String.init),
                       "kc: vault created at \(vault.path); items you store from now on are saved (kc set --ephemeral keeps one in the kernel only)")
        XCTAssertTrue(FileOps.exists(vault.path + "/recipient"), "the vault is at ~/.local/share/kc")
        let share = try? FileManager.default.attributesOfItem(atPath: vault.dataHome + "/.local/share")
        XCTAssertEqual((share?[.posixPermissions] as? NSNumber)?.intValue, 0o700, "a data folder kc makes is the user's alone")
    }

    /// Paths are bytes, like names: a data folder whose name is not UTF-8 holds the
    /// vault itself, not a look-alike folder with U+FFFD in its name.
    func testAVaultInAFolderWhoseNameIsNotUTF8IsMadeInThatFolder() throws {
        let vault = try makeVault(create: false)
        let result = try vault.bash("""
            base="$XDG_DATA_HOME"; export XDG_DATA_HOME="$base/"$'data\\xff'
            mkdir -m 700 "$XDG_DATA_HOME"
            printf '%s\\n' "$PASSPHRASE" | kc vault init --work-factor 10 2>/dev/null; echo "init=$?"
            [ -f "$XDG_DATA_HOME/kc/recipient" ] && echo "the vault is in the folder"
            [ -e "$base/data"$'\\xef\\xbf\\xbd' ] && echo "a folder named with U+FFFD was made"
            kc lock >/dev/null 2>&1; true
            """)
        XCTAssertEqual(result.output, "init=0\nthe vault is in the folder\n", "\(result)")
    }

    func testBadOptionsAndInputAreRefusedAndLeaveNoVaultOrTheFirstOneAsItWas() throws {
        let vault = try makeVault(create: false)
        let passphrase = Array((VaultFixture.passphrase + "\n").utf8)
        var nothingMade: Bool { (try? FileManager.default.contentsOfDirectory(atPath: vault.dataHome))?.isEmpty == true }

        for factor in ["23", "9", "-5"] {
            let result = try vault.kc(["vault", "init", "--work-factor", factor], input: passphrase)
            XCTAssertEqual(result.status, 64, "\(result)")
            XCTAssertTrue(result.standardError.hasPrefix("kc: ") && result.standardError.contains("work factor \(factor)"), result.standardError)
            XCTAssertEqual(result.standardError.filter { $0 == "\n" }.count, 1, "one line: \(result.standardError)")
        }
        XCTAssertTrue(nothingMade)

        // A negative number is a bad value, not a missing one (ArgumentParser took -5 for an option).
        let negatives: [(arguments: [String], says: String)] = [
            (["vault", "init", "--work-factor=-5"], "kc: invalid work factor -5: use 10 to 22; see 'kc help vault init'\n"),
            (["vault", "init", "--passphrase-fd", "-5"], "kc: --passphrase-fd takes an open file descriptor's number, 0 or more; not '-5'; see 'kc help vault init'\n"),
            (["unlock", "--passphrase-fd", "-5"], "kc: --passphrase-fd takes an open file descriptor's number, 0 or more; not '-5'; see 'kc help unlock'\n"),
            (["vault", "passwd", "--new-passphrase-fd", "-5"], "kc: --new-passphrase-fd takes an open file descriptor's number, 0 or more; not '-5'; see 'kc help vault passwd'\n"),
            (["vault", "passwd", "--work-factor", "-5"], "kc: invalid work factor -5: use 10 to 22; see 'kc help vault passwd'\n"),
        ]
        for (arguments, says) in negatives {
            let result = try vault.kc(arguments, input: passphrase)
            XCTAssertEqual(result.status, 64, "\(arguments): \(result)")
            XCTAssertEqual(result.standardError, says, "\(arguments)")
        }
        XCTAssertTrue(nothingMade)

        let unlock = try vault.kc(["unlock"], input: passphrase)
        XCTAssertEqual(unlock.status, 2, "\(unlock)")
        XCTAssertEqual(unlock.standardError, "kc: no vault at \(vault.path); create one with 'kc vault init' (or set XDG_DATA_HOME to where yours is)\n")

        let empty = try vault.kc(["vault", "init", "--work-factor", "10"], input: Array("\n".utf8))
        XCTAssertEqual(empty.status, 2, "\(empty)")
        let emptyRefusal = "kc: empty passphrase: the vault's key is sealed with a passphrase; type it at the prompt, or pass it on standard input or with --passphrase-fd\n"
        XCTAssertEqual(empty.standardError, emptyRefusal)
        XCTAssertTrue(nothingMade, "an empty passphrase makes no vault")

        let badFD = try vault.kc(["vault", "init", "--work-factor", "10", "--passphrase-fd", "99"], input: passphrase)
        XCTAssertEqual(badFD.status, 64, "\(badFD)")
        XCTAssertEqual(badFD.standardError, "kc: cannot read the passphrase from --passphrase-fd 99: Bad file descriptor; pass an open descriptor\n")
        XCTAssertTrue(nothingMade)

        try vault.create()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "kept", "first vault's").status, 0)
        let digest = try vault.digest()
        let again = try vault.kc(["vault", "init", "--work-factor", "10"], input: Array("another passphrase\n".utf8))
        XCTAssertEqual(again.status, 2, "\(again)")
        XCTAssertEqual(again.standardError, "kc: a vault already exists at \(vault.path); change its passphrase with 'kc vault passwd', or set XDG_DATA_HOME to make another\n")
        XCTAssertEqual(try vault.digest(), digest, "the first vault is untouched")

        let unlockEmpty = try vault.kc(["unlock"], input: Array("\n".utf8))
        XCTAssertEqual(unlockEmpty.status, 2, "\(unlockEmpty)")
        XCTAssertEqual(unlockEmpty.standardError, emptyRefusal)
        let unlockBadFD = try vault.kc(["unlock", "--passphrase-fd", "99"])
        XCTAssertEqual(unlockBadFD.status, 64, "\(unlockBadFD)")
        simulateReboot()
        XCTAssertEqual(try vault.unlock(passphrase: "another passphrase").result.status, 2, "the second init did not reseal it")
        XCTAssertEqual(try vault.unlock().result.status, 0)
        XCTAssertEqual(try vault.get(service, "kept").output, "first vault's")
    }

    /// `kc lock` invalidates the keys it drops: a serial read before the lock reads
    /// nothing after it, even where another link to the key was made (`keyctl link`), as
    /// an unlink from the service's keyring alone would leave it.
    func testKcLockInvalidatesTheKeysItDropsSoTheirSerialsReadNothing() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "dropped secret").status, 0)
        XCTAssertEqual(try vault.set(service, "other", "dropped too").status, 0)
        let serials = try listedItems(service).map { String($0.serial) }
        XCTAssertEqual(serials.count, 2)
        XCTAssertEqual(try keyctl("link", serials[0], "@s").status, 0, "a second link to one of them")
        addCleanup { _ = try? keyctl("unlink", serials[0], "@s") }
        for serial in serials { XCTAssertEqual(try keyctl("print", serial).status, 0, "readable by serial before the lock") }

        let lock = try vault.lock()
        XCTAssertEqual(lock.standardError, "kc: locked; dropped 2 items from the kernel\n")
        for serial in serials {
            let print = try keyctl("print", serial)
            XCTAssertNotEqual(print.status, 0, "keyctl print \(serial) after kc lock: \(print)")
            XCTAssertFalse(print.output.contains("dropped"), "the dropped value is not readable by its serial: \(print)")
        }
        XCTAssertEqual(try vault.unlock().result.status, 0)
        XCTAssertEqual(try vault.get(service, "token").output, "dropped secret", "kc unlock brings it back")
    }

    /// The kernel's collector prunes an invalidated key's links without giving their 4
    /// bytes back to the owner of the keyring that held them, for as long as that
    /// keyring lives; the user keyring lives as long as the user's sessions. So `kc lock`
    /// unlinks what it drops (the vault's key in the user keyring, the items) before
    /// invalidating it: lock and unlock cycles leave the user's key quota as they found it.
    func testLockAndUnlockCyclesGiveEveryByteOfKeyQuotaBack() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "kept across locks", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.set(service, "other", "this too", options: ["--access", "after-first-unlock"]).status, 0)
        // The first unlock of a login session marks it (a `logon` key in the session
        // keyring, kept while the session lives): one cycle before counting.
        XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.unlock().result.status, 0)
        let before = try XCTUnwrap(TestQuota.settledBytesOutsideScratchKeyrings(), "/proc/key-users names this uid")
        for cycle in 0..<25 {
            XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0, "lock \(cycle)")
            XCTAssertEqual(try vault.unlock().result.status, 0, "unlock \(cycle)")
        }
        XCTAssertEqual(try vault.get(service, "token").output, "kept across locks")
        XCTAssertEqual(TestQuota.settledBytesOutsideScratchKeyrings(), before, "25 locks and unlocks, each dropping the vault's key and 2 items")
    }

    func testVaultStatusShowsWhenTheLastErrorHappenedAsALocalTime() throws {
        let vault = try makeVault()
        let before = wallSeconds()
        XCTAssertEqual(try vault.unlock(passphrase: "not the passphrase").result.status, 2)
        let status = try vault.status()
        let time = try XCTUnwrap(status.lastErrorTime, "--json gives the error's time in seconds since the epoch")
        XCTAssertLessThanOrEqual(abs(time - before), 2)
        let message = "wrong passphrase for the vault at \(vault.path): nothing was loaded or changed; try again"
        XCTAssertEqual(status.lastError, message, "--json gives the error's message alone")

        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone.current
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        let local = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
        let text = try vault.kc("vault", "status")
        XCTAssertTrue(text.output.split(separator: "\n").contains("error:     \(local) \(message)"), text.output)
    }
}
