import Age
import Crypto
import Keyrings
import KeyringCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The keys a vault's files are encrypted to.
///
/// - The vault's own X25519 identity, made by `kc vault init`, kept on disk only
///   sealed by the passphrase (`identity.age`, an age scrypt file); its recipient is
///   public (`recipient`), so a write needs no passphrase.
/// - Device-only items are encrypted to a key derived from that identity and this
///   machine's id (`/etc/machine-id`): copied to another machine, the vault's portable
///   items open with the passphrase and its device-only ones do not.
/// - With a host key (`kc vault host-init`, root), `always` items are also encrypted to
///   the machine's key, which root holds, so they can be loaded at boot before anyone
///   logs in.
internal enum VaultKeys {
    /// The unlocked identity, kept in the user's own user keyring while the vault is
    /// unlocked: the PAM session step (which has no password) and reloads after the
    /// persistent keyring expired read it there. A `user` key, owner-only, described
    /// `kc.vault:` and the vault's path, so two vaults (XDG_DATA_HOME) do not mix.
    static func stashDescription(for directory: VaultDirectory) -> KeyName {
        KeyName(bytes: VaultLocation.stashDescription(root: directory.root.bytes))
    }

    static func stash(_ identity: AgeX25519Identity, for directory: VaultDirectory) throws(KeychainError) {
        var secret = identity.secretKey
        defer { secret.overwriteWithZeros() }
        let anchor = try Anchor.user.serialForWriting()
        try addOwnerOnly(type: "user", description: stashDescription(for: directory), payload: secret, into: anchor)
    }

    /// Adds a key only its owner's uid may use (the vault's key, a login session's
    /// mark) to `anchor`: `add_key`, then `keyctl_setperm`.
    static func addOwnerOnly(type: String, description: KeyName, payload: [UInt8], into anchor: KeySerial) throws(KeychainError) {
        do throws(KeyctlError) {
            let key = try payload.withUnsafeBytes { bytes in
                Result { () throws(KeyctlError) in
                    try KeySerial.add(type: type, description: description, payload: bytes, into: anchor)
                }
            }.get()
            try key.setPermissions(.ownerOnly)
        } catch {
            throw KeychainError(error)
        }
    }

    /// The stashed identity, or nil while the vault is locked.
    static func stashed(for directory: VaultDirectory) -> AgeX25519Identity? {
        guard let key = stashKey(for: directory), var secret = try? key.read() else { return nil }
        defer { secret.overwriteWithZeros() }
        return try? AgeX25519Identity(secretKey: secret)
    }

    /// Whether the vault is unlocked, as cheaply as it can be told: one search of the
    /// user keyring, which a write without a vault folder pays (see
    /// ``Vault/forWriting()``). Only a search the kernel refuses (the user keyring not
    /// possessed) goes on to ``stashKey(for:)``'s linking; "not found" is the answer.
    static func isStashed(for directory: VaultDirectory) -> Bool {
        guard let anchor = try? Anchor.user.serialForReading() else { return false }
        do {
            return try anchor.search(type: "user", description: stashDescription(for: directory)) != nil
        } catch {
            return stashKey(for: directory) != nil
        }
    }

    static func stashKey(for directory: VaultDirectory) -> KeySerial? {
        guard let anchor = try? Anchor.user.serialForReading() else { return nil }
        if let found = try? anchor.search(type: "user", description: stashDescription(for: directory)) { return found }
        // A fresh session may not possess the user keyring: link it, as reads do.
        guard let linked = try? Anchor.user.serialForWriting() else { return nil }
        return try? linked.search(type: "user", description: stashDescription(for: directory))
    }

    /// Removes the stash: the vault is locked again. True if it was unlocked. Unlinked
    /// from the user keyring first, then invalidated wherever else it is linked (an
    /// invalidated key's link, pruned by the kernel's collector, would stay charged to
    /// the user's key quota while the user keyring lives: see `OwnService.drop`).
    @discardableResult
    static func removeStash(for directory: VaultDirectory) -> Bool {
        guard let key = stashKey(for: directory), let anchor = try? Anchor.user.serial() else { return false }
        let unlinked = (try? key.unlink(from: anchor)) != nil
        let invalidated = (try? key.invalidate()) != nil
        return unlinked || invalidated
    }

    // MARK: Device-only items

    /// This machine's id: `/etc/machine-id` (systemd), else D-Bus's copy.
    static func machineID() -> String? {
        for path in ["/etc/machine-id", "/var/lib/dbus/machine-id"] {
            if let text = readProcFile(path)?.filter({ !$0.isWhitespace }), !text.isEmpty { return text }
        }
        return nil
    }

    /// The identity of device-only items on this machine: HKDF-SHA-256 of the vault's
    /// secret key with the machine id as salt. Anyone with the passphrase and the
    /// machine id can derive it: this binds items to a machine the way Apple's
    /// "this device only" does for backups, not against someone who has both.
    static func deviceIdentity(from identity: AgeX25519Identity, machineID: String) throws(KeychainError) -> AgeX25519Identity {
        var secret = identity.secretKey
        defer { secret.overwriteWithZeros() }
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: secret), salt: Array(machineID.utf8),
            info: Array("kc vault device-only items v1".utf8), outputByteCount: 32)
        var bytes = derived.withUnsafeBytes { Array($0) }
        defer { bytes.overwriteWithZeros() }
        do {
            return try AgeX25519Identity(secretKey: bytes)
        } catch {
            throw .vaultUnsafe(path: "device key", problem: "cannot be derived (\(error))", fix: "report this")
        }
    }

    // MARK: The host key (always items at boot)

    /// Where root keeps the host key: `host-recipient` (public, 0644) and
    /// `host-identity` (root only, 0600). `KC_HOST_KEY_DIR` moves it (the tests do).
    static var hostKeyFolder: VaultPath {
        if let folder = getenv("KC_HOST_KEY_DIR"), folder.pointee == UInt8(ascii: "/") {
            return VaultPath(String(cString: folder))
        }
        return VaultPath("/var/lib/kc")
    }

    /// The host key's recipient, if root set one up. It must be root's file and not
    /// writable by others: whoever could replace it could read every user's `always`
    /// items.
    static func hostRecipient() -> AgeX25519Recipient? {
        let path = hostKeyFolder.appending("host-recipient")
        guard let fd = try? path.withCString({ open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }), fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_uid == 0, info.st_mode & 0o022 == 0 else { return nil }
        guard let text = readProcFile(path.description) else { return nil }
        return try? AgeX25519Recipient(parsing: text.filter { !$0.isWhitespace })
    }
}
