import Age
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The encrypted copy of the keychain on disk that brings items back after a reboot.
///
/// The kernel stays where items are read: ``Keychain`` reads never touch the vault.
/// Every write through kc (library, CLI, mount) also writes the item's file, encrypted
/// to the vault's public key, so no passphrase is needed to store; ``unlock(passphrase:levels:)``
/// decrypts the files and loads each item into the keyring of its level. Without a
/// vault (before `kc vault init`), kc writes nothing to disk.
///
/// Files are age v1 files (see the `Age` module): `age -d -i IDENTITY` opens them.
public struct Vault: Sendable {
    internal let directory: VaultDirectory

    /// The vault's folder.
    public var path: String { directory.root.description }

    /// The default scrypt work factor of the passphrase: age's own (2^18: 256 MiB, and
    /// about 0.75 s on a 2-core server, docs/BENCHMARKS.md), which age 1.1.1 also accepts
    /// (it refuses more than 2^22). Each step up doubles both.
    public static let defaultWorkFactor = 18
    public static let maximumWorkFactor = 22

    internal init(directory: VaultDirectory) { self.directory = directory }

    /// The caller's vault location (it may not exist yet): `$XDG_DATA_HOME/kc`, else
    /// `~/.local/share/kc`.
    public static func atDefaultLocation() throws(KeychainError) -> Vault {
        guard let root = VaultDirectory.defaultRoot() else { throw .vaultNotInitialized(path: "~/.local/share/kc") }
        return Vault(directory: VaultDirectory(root: root))
    }

    /// The vault in this folder.
    public init(path: String) { directory = VaultDirectory(root: VaultPath(path)) }

    /// Whether `kc vault init` made this vault.
    public var exists: Bool { directory.exists }

    /// Whether the vault is unlocked: its identity is in the user keyring.
    public var isUnlocked: Bool { VaultKeys.stashKey(for: directory) != nil }

    // MARK: Making one

    /// Makes the vault: a new identity, sealed with the passphrase at `2^workFactor`
    /// scrypt, and its public key beside it. The vault is left unlocked.
    ///
    /// - Throws: ``KeychainError/vaultAlreadyExists(path:)``, ``KeychainError/weakPassphrase``,
    ///   ``KeychainError/invalidWorkFactor(_:)`` and file errors.
    public static func create(at vault: Vault? = nil, passphrase: [UInt8], workFactor: Int = defaultWorkFactor) throws(KeychainError) -> Vault {
        let vault = if let vault { vault } else { try atDefaultLocation() }
        guard !passphrase.isEmpty else { throw .weakPassphrase }
        guard (10...maximumWorkFactor).contains(workFactor) else { throw .invalidWorkFactor(workFactor) }
        let directory = vault.directory
        // A folder kc will not use is refused as such, not taken for a vault made before.
        if directory.rootIsRefused { try directory.checkOwnership() }
        if directory.exists || directory.isFile(directory.identityFile) || !directory.entries(of: directory.itemsFolder).isEmpty {
            throw .vaultAlreadyExists(path: vault.path)
        }
        try directory.checkFoldersAbove()  // before anything is made there (where they exist yet)
        try directory.makeFolder(directory.root)
        // A folder that was there already (made by hand, or another program) must be safe too.
        try directory.checkOwnership()
        try directory.withLock { _ throws(KeychainError) in
            let identity = AgeX25519Identity.generate()
            var text = Array(("# kc vault identity, created \(Deadline.now)\n" + identity.encoded + "\n").utf8)
            defer { text.overwriteWithZeros() }
            let sealed: [UInt8]
            do throws(AgeError) { sealed = try Age.encrypt(text, passphrase: passphrase, logN: workFactor) } catch { throw .vaultCrypto(path: directory.identityFile.description, error.description) }
            try directory.commit(directory.stage(sealed), to: directory.identityFile)
            try vault.recordDeviceRecipient(for: identity)
            // Last: its presence is what makes the vault exist for writers.
            try directory.commit(directory.stage(Array((identity.recipient.encoded + "\n").utf8)), to: directory.recipientFile)
            try VaultKeys.stash(identity, for: directory)
        }
        return vault
    }

    /// Changes the passphrase: only `identity.age` is sealed again; the items, encrypted
    /// to the identity's public key, stay as they are.
    ///
    /// - Throws: ``KeychainError/wrongPassphrase(path:)`` if `old` does not open it.
    public func changePassphrase(from old: [UInt8], to new: [UInt8], workFactor: Int? = nil) throws(KeychainError) {
        guard !new.isEmpty else { throw .weakPassphrase }
        try requireExisting()
        try directory.withLock { _ throws(KeychainError) in
            let sealed = try readIdentityFile()
            let factor = workFactor ?? (try? Age.scryptWorkFactor(of: sealed)).flatMap { $0 } ?? Vault.defaultWorkFactor
            guard (10...Vault.maximumWorkFactor).contains(factor) else { throw .invalidWorkFactor(factor) }
            var text = try openIdentityFile(sealed, passphrase: old)
            defer { text.overwriteWithZeros() }
            let resealed: [UInt8]
            do throws(AgeError) { resealed = try Age.encrypt(text, passphrase: new, logN: factor) } catch { throw .vaultCrypto(path: directory.identityFile.description, error.description) }
            try directory.commit(directory.stage(resealed), to: directory.identityFile)
        }
        recordLoginPasswordChange(withoutVaultSince: nil)
    }

    /// Whether a new passphrase could be saved now: the identity file sealed again can
    /// be staged beside the vault (room on the disk, folders writable) and put in its
    /// place. PAM's preliminary password step asks, so a user hears it before the login
    /// password changes, while the old one still opens the vault. Nothing is changed.
    public func checkPassphraseCanChange() throws(KeychainError) {
        try requireExisting()
        let size = try readIdentityFile().count
        // An sealed identity's size varies by a few bytes with the work factor's digits.
        var filler = [UInt8](repeating: 0x2d, count: size + 64)
        defer { filler.overwriteWithZeros() }
        let staged = try directory.stage(filler, for: directory.identityFile)
        directory.remove(staged.path)
    }

    /// What ``followLoginPassword(from:to:)`` did.
    public enum LoginPasswordChange: Sendable, Equatable {
        /// The vault's passphrase was the old login password; it is the new one now.
        case followed
        /// The vault's passphrase is the new login password already.
        case alreadyFollows
        /// PAM had no old password (root set the new one): the vault keeps its
        /// passphrase, and the next unlock says so.
        case oldPasswordUnknown
        /// The vault's passphrase is neither the old nor the new login password: it is
        /// left as it is (PAM does not unlock it at login).
        case notTheLoginPassword
    }

    /// PAM's password step: the login password changed from `old` to `new`, and the
    /// vault's passphrase follows it if it was the old one, as gnome-keyring's does.
    /// Never fails the password change: what went wrong is recorded for
    /// `kc vault status`.
    public func followLoginPassword(from old: [UInt8]?, to new: [UInt8]) throws(KeychainError) -> LoginPasswordChange {
        try requireExisting()
        guard let old, !old.isEmpty else {
            recordLoginPasswordChange(withoutVaultSince: Deadline.now)
            recordStatus(unlocked: false, error: "the login password was changed without the old one (root set it), so the vault kept its passphrase: login cannot unlock it until you run 'kc vault passwd' with the vault's old passphrase")
            return .oldPasswordUnknown
        }
        do {
            try changePassphrase(from: old, to: new)
            return .followed
        } catch .wrongPassphrase {
            if (try? identity(passphrase: new)) != nil {
                recordLoginPasswordChange(withoutVaultSince: nil)
                return .alreadyFollows
            }
            recordStatus(unlocked: false, error: "the login password changed, but the vault's passphrase was not the old login password, so it was left as it was; login unlocks the vault only if its passphrase is your login password ('kc vault passwd')")
            return .notTheLoginPassword
        } catch {
            // The vault still opens with the old login password: a user who forgets it
            // would lose the vault, so the next unlock and `kc vault status` say so.
            recordLoginPasswordChange(withoutVaultSince: Deadline.now)
            recordStatus(unlocked: false, error: "the login password changed, but the vault's passphrase could not follow it (\(error.description)); the vault still opens with the old login password: once that is fixed, run 'kc vault passwd'")
            throw error
        }
    }

    // MARK: Status

    /// What `kc vault status` shows.
    public struct Status: Sendable {
        public var path: String
        public var exists: Bool
        public var isUnlocked: Bool
        /// Items on disk at each accessibility (from the file names; no passphrase needed).
        public var itemCounts: [Accessibility: Int]
        public var workFactor: Int?
        /// Whether root set up a host key, so `always` items load at boot.
        public var hasHostKey: Bool
        /// The last unlock (seconds since the epoch), and the last error with when it
        /// happened (seconds since the epoch), from `status`.
        public var lastUnlock: Int64?
        public var lastError: String?
        public var lastErrorTime: Int64?
        /// When the login password changed without the old one reaching the vault (root
        /// set it): PAM cannot unlock the vault until `kc vault passwd` catches up.
        public var loginPasswordAhead: Int64?
    }

    public func status() throws(KeychainError) -> Status {
        guard exists else {
            // Unlocked for a folder that is gone: writes are refused until it is back.
            return Status(path: path, exists: false, isUnlocked: isUnlocked, itemCounts: [:], workFactor: nil,
                          hasHostKey: VaultKeys.hostRecipient() != nil, lastUnlock: nil, lastError: nil, lastErrorTime: nil,
                          loginPasswordAhead: nil)
        }
        try directory.checkOwnership()
        var counts: [Accessibility: Int] = [:]
        for accessibility in Accessibility.allCases {
            let level = directory.levelFolder(accessibility)
            // What is there, in folders kc will not use too (unlock names those).
            counts[accessibility] = directory.names(in: level).reduce(0) { total, service in
                total + directory.names(in: level.appending(bytes: service)).count
            }
        }
        let factor = (try? readIdentityFile()).flatMap { try? Age.scryptWorkFactor(of: $0) }
        let record = readStatusFile()
        return Status(path: path, exists: true, isUnlocked: isUnlocked, itemCounts: counts, workFactor: factor,
                      hasHostKey: VaultKeys.hostRecipient() != nil, lastUnlock: record.lastUnlock,
                      lastError: record.lastError?.message, lastErrorTime: record.lastError?.time,
                      loginPasswordAhead: record.loginPasswordAhead)
    }

    // MARK: Internals

    internal func requireExisting() throws(KeychainError) {
        guard exists else { throw .vaultNotInitialized(path: path) }
        try directory.checkOwnership()
    }

    internal func readIdentityFile() throws(KeychainError) -> [UInt8] {
        guard let sealed = try directory.read(directory.identityFile) else {
            throw .vaultUnsafe(path: directory.identityFile.description, problem: "is missing", fix: "restore it from a backup of the vault folder")
        }
        return sealed
    }

    /// The identity file's text, opened with the passphrase.
    internal func openIdentityFile(_ sealed: [UInt8], passphrase: [UInt8]) throws(KeychainError) -> [UInt8] {
        guard !passphrase.isEmpty else { throw .weakPassphrase }
        do throws(AgeError) {
            return try Age.decrypt(sealed, passphrase: passphrase, maximumLogN: Vault.maximumWorkFactor)
        } catch .noMatchingIdentity {
            throw .wrongPassphrase(path: path)
        } catch {
            throw .vaultCrypto(path: directory.identityFile.description, error.description)
        }
    }

    internal func identity(passphrase: [UInt8]) throws(KeychainError) -> AgeX25519Identity {
        var text = try openIdentityFile(try readIdentityFile(), passphrase: passphrase)
        defer { text.overwriteWithZeros() }
        let identities: [AgeX25519Identity]
        do throws(AgeError) {
            identities = try Age.identities(inIdentityFile: text)
        } catch {
            throw .vaultCrypto(path: directory.identityFile.description, error.description)
        }
        guard let identity = identities.first else {
            throw .vaultCrypto(path: directory.identityFile.description, "holds no identity")
        }
        return identity
    }

    /// The vault's public key, to encrypt items to.
    internal func recipient() throws(KeychainError) -> AgeX25519Recipient {
        guard let bytes = try directory.read(directory.recipientFile) else {
            throw .vaultUnsafe(path: directory.recipientFile.description, problem: "is missing, so nothing can be saved",
                               fix: "run 'kc unlock', which writes it again from the vault's key")
        }
        do throws(AgeError) {
            return try AgeX25519Recipient(parsing: String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace })
        } catch {
            throw .vaultCrypto(path: directory.recipientFile.description, error.description)
        }
    }

    /// Puts back the `recipient` file from the identity if it was lost or differs (the
    /// identity is what opens the files: items saved to another key would not open).
    internal func restoreRecipient(of identity: AgeX25519Identity) throws(KeychainError) {
        let text = Array((identity.recipient.encoded + "\n").utf8)
        if let current = try? directory.read(directory.recipientFile), current == text { return }
        try directory.commit(directory.stage(text), to: directory.recipientFile)
    }

    /// Writes `device-recipient`: this machine's id and its device-only public key.
    internal func recordDeviceRecipient(for identity: AgeX25519Identity) throws(KeychainError) {
        guard let machine = VaultKeys.machineID() else { return }
        let device = try VaultKeys.deviceIdentity(from: identity, machineID: machine)
        let text = machine + " " + device.recipient.encoded + "\n"
        if let current = try? directory.read(directory.deviceRecipientFile), current == Array(text.utf8) { return }
        try directory.commit(directory.stage(Array(text.utf8)), to: directory.deviceRecipientFile)
    }

    /// The host key's recipient if root made one that this vault's `always` files are
    /// not yet encrypted to (`host-recipient` in the vault records the last one used).
    internal func hostRecipientNotYetUsed() -> AgeX25519Recipient? {
        guard let host = VaultKeys.hostRecipient() else { return nil }
        let recorded = (try? directory.read(directory.hostRecipientFile)).flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
        return recorded?.filter({ !$0.isWhitespace }) == host.encoded ? nil : host
    }

    /// The device-only public key of this machine, if the vault was unlocked here.
    internal func deviceRecipient() throws(KeychainError) -> AgeX25519Recipient? {
        guard let machine = VaultKeys.machineID(), let bytes = try directory.read(directory.deviceRecipientFile) else { return nil }
        let fields = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, fields[0] == machine else { return nil }
        return try? AgeX25519Recipient(parsing: fields[1])
    }

    /// Records an unlock's outcome for `kc vault status` (best effort): the time of the
    /// last success, and the last error with its time. Only an unlock with the
    /// passphrase clears an error (`clearsError`): PAM's session step, which loads with
    /// what the auth step left, must not hide why the auth step failed.
    internal func recordStatus(unlocked: Bool, error: String?, clearsError: Bool = true) {
        var record = readStatusFile()
        if unlocked { record.lastUnlock = Deadline.now }
        if let error {
            record.lastError = (Deadline.now, error.filter { $0 != "\n" })
        } else if unlocked, clearsError {
            record.lastError = nil
        }
        writeStatusFile(record)
    }

    /// Records that the login password changed without the old one reaching the vault
    /// (root set it), or, with nil, that the vault follows it again.
    internal func recordLoginPasswordChange(withoutVaultSince time: Int64?) {
        var record = readStatusFile()
        record.loginPasswordAhead = time
        writeStatusFile(record)
    }

    /// The status file: `unlocked SECONDS`, `error SECONDS MESSAGE`,
    /// `login-password-ahead SECONDS` lines.
    private struct StatusRecord {
        var lastUnlock: Int64?
        var lastError: (time: Int64, message: String)?
        var loginPasswordAhead: Int64?
    }

    private func readStatusFile() -> StatusRecord {
        var record = StatusRecord()
        guard let bytes = try? directory.read(directory.statusFile) else { return record }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            if line.hasPrefix("unlocked ") { record.lastUnlock = Int64(line.dropFirst(9)) }
            if line.hasPrefix("error ") {
                let fields = line.dropFirst(6).split(separator: " ", maxSplits: 1)
                if fields.count == 2, let time = Int64(fields[0]) { record.lastError = (time, String(fields[1])) }
            }
            if line.hasPrefix("login-password-ahead ") { record.loginPasswordAhead = Int64(line.dropFirst(21)) }
        }
        return record
    }

    private func writeStatusFile(_ record: StatusRecord) {
        let text = (record.lastUnlock.map { "unlocked \($0)\n" } ?? "") + (record.lastError.map { "error \($0.time) \($0.message)\n" } ?? "")
            + (record.loginPasswordAhead.map { "login-password-ahead \($0)\n" } ?? "")
        if let staged = try? directory.stage(Array(text.utf8)) {
            try? directory.commit(staged, to: directory.statusFile)
        } else {
            // A full disk has no room for a new file, but the status file's own block is
            // there to write over: what went wrong must reach the next login and
            // `kc vault status` most of all then.
            directory.overwrite(directory.statusFile, with: Array(text.utf8))
        }
    }
}
