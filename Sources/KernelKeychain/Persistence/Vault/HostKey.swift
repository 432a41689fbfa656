import Age
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The machine's key for `always` items at boot (`kc vault host-init`, as root).
///
/// `always` means readable from boot, before anyone logs in (services, cron). Nobody
/// types a passphrase then, so with a host key each user's `always` items are also
/// encrypted to it, and a root unit (`kc-vault-boot.service`) loads them into each
/// user's persistent keyring at boot. Root holds the key, so root can read `always`
/// items at rest, as root can read them in the kernel anyway (SECURITY.md). Without a
/// host key, `always` items come back at the user's first unlock.
public enum HostKey {
    /// Where the key lives (`/var/lib/kc`, or `KC_HOST_KEY_DIR`).
    public static var folder: String { VaultKeys.hostKeyFolder.description }

    /// Whether root made a host key that writes can use.
    public static var exists: Bool { VaultKeys.hostRecipient() != nil }

    /// Makes the host key if there is none: `host-identity` (0600) and
    /// `host-recipient` (0644), in a root-owned 0755 folder. Returns the recipient and
    /// whether it was made now.
    public static func create() throws(KeychainError) -> (recipient: String, created: Bool) {
        guard geteuid() == 0 else { throw .cannotSwitchUser(user: "root", reason: "the host key is root's: run 'sudo kc vault host-init'") }
        if let existing = VaultKeys.hostRecipient() { return (existing.encoded, false) }
        let directory = VaultDirectory(root: VaultKeys.hostKeyFolder, owner: 0)
        _ = try directory.root.withCString { mkdir($0, 0o755) }
        let safe = try directory.root.withCString { path in
            var info = stat()
            return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && info.st_uid == 0 && info.st_mode & 0o022 == 0
        }
        guard safe else {
            throw .vaultUnsafe(path: directory.root.description, problem: "is not a folder of root's that only root can write", fix: "remove it, or fix its owner and mode (0755)")
        }
        let identity = AgeX25519Identity.generate()
        var text = Array(("# kc host key: root only\n" + identity.encoded + "\n").utf8)
        defer { text.overwriteWithZeros() }
        try directory.commit(directory.stage(text), to: directory.root.appending("host-identity"))
        let recipient = directory.root.appending("host-recipient")
        try directory.commit(directory.stage(Array((identity.recipient.encoded + "\n").utf8)), to: recipient)
        _ = try recipient.withCString { chmod($0, 0o644) }
        return (identity.recipient.encoded, true)
    }

    /// The host identity; root only.
    static func identity() throws(KeychainError) -> AgeX25519Identity {
        let directory = VaultDirectory(root: VaultKeys.hostKeyFolder, owner: 0)
        let file = directory.root.appending("host-identity")
        guard var text = try directory.read(file) else {
            throw .vaultNotInitialized(path: file.description + " (run 'sudo kc vault host-init')")
        }
        defer { text.overwriteWithZeros() }
        let identities: [AgeX25519Identity]
        do throws(AgeError) {
            identities = try Age.identities(inIdentityFile: text)
        } catch {
            throw .vaultCrypto(path: file.description, error.description)
        }
        guard let identity = identities.first else { throw .vaultCrypto(path: file.description, "holds no identity") }
        return identity
    }

    /// Every account in the password database, for the boot load to look at each in a
    /// process of its own (``loadAlwaysItems(of:onlyIfAny:)``). The caller, root, never
    /// looks into a home itself: a filesystem a user mounted there whose daemon is
    /// stopped would make it wait for ever, and every later user with it.
    public static func accounts() -> [String] {
        LocalDatabase.users().map(\.name)
    }

    /// Where the boot load looks for `user`'s vault (`~/.local/share/kc`), from the
    /// password database alone: nothing is looked at on disk.
    public static func vaultFolder(of user: String) -> String? {
        Accounts.account(named: user).map { VaultPath($0.home).appending(".local/share/kc").description }
    }

    /// At boot, as root: becomes `user` and loads that user's `always` items into their
    /// persistent keyring with the host key. Files not encrypted to the host key (saved
    /// before `host-init`) wait for the user's next unlock, which encrypts them to it.
    ///
    /// With `onlyIfAny` (the load of every account), nil when the user has no vault of
    /// their own at the default place with `always` items: nothing to load, nothing to
    /// say. Only a vault its user owns counts (two accounts sharing a home share no vault).
    public static func loadAlwaysItems(of user: String, onlyIfAny: Bool = false) throws(KeychainError) -> VaultUnlockReport? {
        let identity = try identity()
        try PAMUser.become(user, newSession: false)
        let vault = try Vault.atDefaultLocation()
        if onlyIfAny {
            let directory = vault.directory
            guard let root = try? directory.status(of: directory.root),
                  root.st_mode & S_IFMT == S_IFDIR, root.st_uid == geteuid(),
                  [Accessibility.always, .alwaysThisDeviceOnly].contains(where: { hasEntries(directory.levelFolder($0), in: directory) })
            else { return nil }
        }
        // A session keyring of the user's own, not root's, for the keys the load adds.
        try PAMUser.become(user, newSession: true)
        try vault.requireExisting()
        return try vault.load(with: [identity], levels: [.always], stash: nil, boot: true)
    }

    /// Whether a level's folder holds anything, or holds something kc refuses (a mount
    /// point): the load then says what.
    private static func hasEntries(_ folder: VaultPath, in directory: VaultDirectory) -> Bool {
        do {
            guard try directory.status(of: folder) != nil else { return false }
        } catch {
            return true
        }
        return !directory.names(in: folder).isEmpty
    }
}
