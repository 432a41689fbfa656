import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Where the vault is must still be the vault when a write comes: a vault unlocked for a
/// folder that is gone (renamed, moved for a backup, a home mounted late) refuses every
/// write instead of saving it nowhere, and a vault under a folder someone else could
/// change is refused, as OpenSSH's StrictModes refuses a key file there.
final class VaultFolderTests: VaultTestCase {
    private var usedTheAccount = false

    override func tearDownWithError() throws {
        try super.tearDownWithError()
        if usedTheAccount { VaultAccount.reset() }
    }

    private let oldValue = "old value"

    private func value(_ service: String, _ name: String = "token") throws -> String? {
        try Keychain(service: service).string(forKey: name)
    }

    /// A library write with this process's writes going to `vault`: nil, or its error.
    private func libraryError(_ vault: VaultFixture, _ body: () throws -> Void) -> String? {
        setenv("XDG_DATA_HOME", vault.dataHome, 1)
        defer { setenv("XDG_DATA_HOME", Self.noVaultDataHome, 1) }
        do {
            try body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    // MARK: A vault folder gone while unlocked

    /// The one-line refusal of a write to a vault unlocked for a folder that is gone.
    private func goneRefusal(_ vault: VaultFixture, _ problem: String = "its folder is gone (moved, renamed, or not mounted yet)") -> String {
        "kc: the vault at \(vault.path) is unlocked but \(problem); nothing was changed: put the vault folder back (or mount it), or run 'kc lock' to store without it\n"
    }

    func testWritesToAnUnlockedVaultWhoseFolderWasMovedAwayAreRefusedAndChangeNothing() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        let mount = try mount(writingTo: vault)
        XCTAssertTrue(vault.isStashed, "kc vault init leaves the vault unlocked")
        let moved = vault.path + ".moved"
        XCTAssertEqual(FileOps.rename(vault.path, moved), 0)

        let set = try vault.set(service, "token", "new value")
        XCTAssertEqual(set.status, 2, "\(set)")
        XCTAssertEqual(set.standardError, goneRefusal(vault))
        let new = try vault.set(service, "new", "new value")
        XCTAssertEqual(new.standardError, goneRefusal(vault), "a new item too")
        let remove = try vault.remove(service, "token")
        XCTAssertEqual(remove.standardError, goneRefusal(vault), "a removal too")

        let bash = try runShell("printf 'new value' > '\(mount.file(service, "token"))'")
        XCTAssertNotEqual(bash.status, 0, "a save by bash through the mount fails: \(bash)")
        let (fd, _) = FileOps.open(mount.file(service, "token"), O_WRONLY | O_TRUNC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(errnoName(FileOps.write(fd, "new value")), errnoName(EIO), "the writer is told at write(2)")
        XCTAssertNotEqual(FileOps.close(fd), 0, "and at close")
        XCTAssertNotEqual(try runCommand("/usr/bin/setfattr", ["-n", "user.kc.timeout", "-v", "600", mount.file(service, "token")]).status, 0)

        let library = libraryError(vault) { try Keychain(service: service).set("new value", forKey: "token") }
        XCTAssertEqual(library.map { "kc: \($0)\n" }, goneRefusal(vault), "the library's set")

        XCTAssertEqual(try listedItems(service).map(\.name), ["token"], "nothing was added or removed in the kernel")
        XCTAssertEqual(try value(service), oldValue, "the kernel keeps the old value")
        XCTAssertNil(try listedItems(service).first?.secondsLeft, "and no deadline")

        // Put back, writes are saved again.
        XCTAssertEqual(FileOps.rename(moved, vault.path), 0)
        XCTAssertEqual(try vault.set(service, "token", "new value").status, 0)
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/token"])
        XCTAssertEqual(try rebootAndUnlock(vault)?.loadedCount, 1)
        XCTAssertEqual(try value(service), "new value")
    }

    func testAnEmptyFolderInPlaceOfAnUnlockedVaultIsNotTakenForNoVault() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        XCTAssertEqual(FileOps.rename(vault.path, vault.path + ".moved"), 0)
        XCTAssertEqual(FileOps.mkdir(vault.path), 0)
        let set = try vault.set(service, "token", "new value")
        XCTAssertEqual(set.status, 2, "\(set)")
        XCTAssertEqual(set.standardError, goneRefusal(vault, "the folder there is not the vault (it has no identity.age or recipient)"))
        XCTAssertEqual(try value(service), oldValue)
    }

    /// `kc lock` is the way out the refusal names: the vault is forgotten, and writes are
    /// kept in the kernel only from then on, as without a vault.
    func testKcLockOfAVaultWhoseFolderIsGoneLetsWritesGoToTheKernelOnly() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        XCTAssertEqual(FileOps.rename(vault.path, vault.path + ".moved"), 0)
        XCTAssertEqual(try vault.set(service, "token", "new value").status, 2)

        let status = try vault.kc("vault", "status")
        XCTAssertEqual(status.output, "vault:     \(vault.path)\nstate:     unlocked, but the folder is gone: writes are refused until you put it back (or run 'kc lock' to store without it)\n")
        let lock = try vault.lock()
        XCTAssertEqual(lock.status, 0, "\(lock)")
        XCTAssertEqual(lock.standardError, "kc: locked the vault at \(vault.path), whose folder is gone: nothing was dropped; items you store from now on are kept in the kernel only, until you put the folder back and run 'kc unlock'\n")
        XCTAssertFalse(vault.isStashed)
        XCTAssertEqual(try value(service), oldValue, "nothing was dropped")
        let set = try vault.set(service, "token", "new value")
        XCTAssertEqual(set.status, 0, "\(set)")
        XCTAssertEqual(try value(service), "new value")
    }

    // MARK: The folders above the vault

    func testAVaultUnderAGroupWritableFolderIsRefusedNamingTheFolder() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", oldValue).status, 0)
        XCTAssertEqual(chmod(vault.dataHome, 0o775), 0)
        addCleanup { _ = chmod(vault.dataHome, 0o700) }

        let set = try vault.set(service, "token", "new value")
        XCTAssertEqual(set.status, 2, "\(set)")
        XCTAssertEqual(set.standardError, "kc: refusing the vault: \(vault.dataHome) (above the vault) has mode 775: group or others can write in it, and so move the vault away and put another in its place; run 'chmod go-w \(vault.dataHome)', or keep the vault elsewhere (set XDG_DATA_HOME)\n")
        let library = libraryError(vault) { try Keychain(service: service).set("new value", forKey: "token") }
        XCTAssertTrue(library?.contains("\(vault.dataHome) (above the vault) has mode 775") == true, "the library's set: \(String(describing: library))")
        XCTAssertEqual(try value(service), oldValue, "the kernel keeps the old value")
        simulateReboot()
        XCTAssertEqual(try vault.unlock().result.status, 2, "unlock is refused too")

        XCTAssertEqual(chmod(vault.dataHome, 0o755), 0)
        XCTAssertEqual(try vault.set(service, "token", "new value").status, 0, "a folder others can read but not write is fine")
    }

    /// Root's kc does not take an `XDG_DATA_HOME` that is not root's (`sudo -E`), so the
    /// folder of the other user's is one further up: `DATAHOME/theirs/data/kc`.
    func testAVaultUnderAFolderOfAnotherUserIsRefusedNamingTheFolder() throws {
        let account = try VaultAccount.require()
        let vault = try makeVault(create: false)
        let theirs = vault.dataHome + "/theirs", data = vault.dataHome + "/theirs/data"
        XCTAssertEqual(Glibc.mkdir(theirs, 0o755), 0)
        XCTAssertEqual(Glibc.mkdir(data, 0o700), 0)
        var environment = vault.environment
        environment["XDG_DATA_HOME"] = data
        func kc(_ arguments: [String], _ input: String = "") throws -> CommandResult {
            try runCommand(builtKC, arguments, input: Array(input.utf8), environment: environment)
        }
        addCleanup { _ = try? kc(["lock", "--level", "after-first-unlock"]) }
        XCTAssertEqual(try kc(["vault", "init", "--work-factor", "10"], VaultFixture.passphrase + "\n").status, 0)
        let service = uniqueService()
        XCTAssertEqual(try kc(["set", service, "token"], oldValue).status, 0)
        XCTAssertEqual(try runCommand("/bin/chown", [account.name, theirs]).status, 0)
        addCleanup { _ = try? runCommand("/bin/chown", ["root", theirs]) }

        let set = try kc(["set", service, "token"], "new value")
        XCTAssertEqual(set.status, 2, "\(set)")
        XCTAssertEqual(set.standardError, "kc: refusing the vault: \(theirs) (above the vault) belongs to \(account.name), who could move the vault away and put another in its place; keep the vault under folders of yours (set XDG_DATA_HOME)\n")
        XCTAssertEqual(try value(service), oldValue)
    }

    /// A sticky folder that others can write in (as /tmp) is fine above the vault when
    /// the folder in it is the user's own: nobody else can move or replace that. One of
    /// another's there (root's, here) is refused.
    func testAVaultInASharedStickyFolderIsUsedOnlyUnderAFolderOfTheUsersOwn() throws {
        let account = try VaultAccount.require()
        usedTheAccount = true
        VaultAccount.reset()
        // The account's folder made sticky and open to all, as /tmp is; in it, one folder
        // of the account's and one of root's.
        let vault = try makeVault(create: false, owner: VaultAccount.name)
        XCTAssertEqual(chmod(vault.dataHome, 0o1777), 0)
        let own = vault.dataHome + "/own", roots = vault.dataHome + "/roots"
        XCTAssertEqual(FileOps.mkdir(own), 0)
        XCTAssertEqual(try runCommand("/bin/chown", [account.name, own]).status, 0)
        XCTAssertEqual(Glibc.mkdir(roots, 0o755), 0)
        XCTAssertEqual(Glibc.mkdir(roots + "/data", 0o700), 0)
        XCTAssertEqual(try runCommand("/bin/chown", [account.name, roots + "/data"]).status, 0)
        let service = "kc-test.\(getpid()).vault-sticky"
        let script = """
            printf '%s' "$PASSPHRASE" | "$KC" vault init --work-factor 10 2>&1 >/dev/null | grep -v '^kc: vault created' || true
            printf v | "$KC" set \(service) token; echo "set=$?"
            """

        let mine = try VaultAccount.run("XDG_DATA_HOME='\(own)'; export XDG_DATA_HOME\n" + script, vault: vault)
        XCTAssertEqual(mine.output, "set=0\n", "a vault in the user's own folder in a sticky folder is fine: \(mine)")
        XCTAssertTrue(FileOps.exists(own + "/kc/items/when-unlocked/\(service)/token"), "\(mine)")

        let theirs = try VaultAccount.run("XDG_DATA_HOME='\(roots)/data'; export XDG_DATA_HOME\n" + script, vault: vault)
        XCTAssertEqual(theirs.output, "kc: refusing the vault: \(roots) (above the vault) is in the shared folder \(vault.dataHome) but belongs to root, not to you; keep the vault under a folder of your own there (set XDG_DATA_HOME)\nset=0\n",
                       "no vault is made there (and without one a set keeps the kernel only): \(theirs)")
        XCTAssertFalse(FileOps.exists(roots + "/data/kc"), "nothing was made there")
    }

    /// Inside a user namespace (`podman unshare`, rootless podman's secret driver) the
    /// folders root owns above the vault show as the overflow uid (65534), which nothing
    /// inside can tell from root: the vault is used as outside.
    func testAVaultUsedFromInsideAUserNamespaceIsNotRefusedForTheFoldersRootOwnsAboveIt() throws {
        _ = try VaultAccount.require()
        usedTheAccount = true
        VaultAccount.reset()
        let vault = try makeVault(create: false, owner: VaultAccount.name)
        let probe = try VaultAccount.run("unshare --user --map-root-user true && echo ok", vault: vault)
        guard probe.output == "ok\n" else { throw XCTSkip("user namespaces are refused here: \(probe)") }
        let service = "kc-test.\(getpid()).vault-userns"
        let result = try VaultAccount.run("""
            printf '%s' "$PASSPHRASE" | "$KC" vault init --work-factor 10 2>/dev/null || echo "init failed"
            printf inside | unshare --user --map-root-user "$KC" set --access after-first-unlock \(service) token; echo "set=$?"
            "$KC" get \(service) token; echo
            ls "$VAULT/items/after-first-unlock/\(service)"
            "$KC" lock --level after-first-unlock >/dev/null 2>&1
            """, vault: vault)
        XCTAssertEqual(result.output, "set=0\ninside\ntoken\n", "\(result)")
    }
}
