import Age
import Keyrings

/// The write side: what `Keychain`'s writes call to keep the item's file in step.
extension Vault {
    /// The vault a write keeps in step: nil when there is none (nothing is written to
    /// disk then). A vault that is not safe to use (owned by another uid, loose
    /// permissions, under a folder others can change) fails the write, and so does one
    /// that is unlocked but whose folder is gone or holds no vault: moved away, renamed,
    /// a home not mounted yet. Writing on without it would change the kernel and save
    /// nowhere, and the item would be missing after a reboot. Without a vault folder a
    /// write pays one `lstat` and one search of the user keyring for the vault's key.
    internal static func forWriting() throws(KeychainError) -> Vault? {
        guard let vault = try existing() else {
            guard let root = VaultDirectory.defaultRoot() else { return nil }
            let missing = Vault(directory: VaultDirectory(root: root))
            if VaultKeys.isStashed(for: missing.directory) { throw .vaultMissing(path: missing.path, problem: missing.directory.whatIsThereInstead) }
            return nil
        }
        return vault
    }

    /// The caller's vault if `kc vault init` made one there, checked safe to use; nil if
    /// there is none (reads use this: a read never fails for a missing vault).
    internal static func existing() throws(KeychainError) -> Vault? {
        guard let root = VaultDirectory.defaultRoot() else { return nil }
        let vault = Vault(directory: VaultDirectory(root: root))
        guard vault.exists else { return nil }
        try vault.directory.checkOwnership()
        return vault
    }

    /// Refuses now (``KeychainError/vaultFull(path:reason:)``) if the disk clearly has no
    /// room for the file of an item of `size` bytes: its encryption and names add at
    /// most about a KiB.
    internal func checkRoom(forItemOf size: Int) throws(KeychainError) {
        try directory.checkRoom(forFileOf: size + 1024)
    }

    /// Encrypts the record and writes it to a new file in `tmp/`, flushed to disk.
    internal func stage(_ record: VaultRecord) throws(KeychainError) -> VaultDirectory.StagedFile {
        let recipients = try recipients(for: record.accessibility)
        var plain = record.encoded()
        defer { plain.overwriteWithZeros() }
        let sealed: [UInt8]
        do throws(AgeError) { sealed = try Age.encrypt(plain, to: recipients) } catch { throw .vaultCrypto(path: path, error.description) }
        return try directory.stage(sealed, for: directory.itemFile(record.accessibility, record.service, record.name))
    }

    /// Who can open an item's file: the vault (or, for a device-only item, this
    /// machine's device key), and for `always` items the host key if root made one.
    internal func recipients(for accessibility: Accessibility) throws(KeychainError) -> [AgeX25519Recipient] {
        var recipients: [AgeX25519Recipient] = []
        if accessibility.isThisDeviceOnly {
            guard let device = try deviceRecipient() else { throw .vaultNotUnlockedOnThisMachine(path: path) }
            recipients.append(device)
        } else {
            recipients.append(try recipient())
        }
        if accessibility.level == .always, let host = VaultKeys.hostRecipient() { recipients.append(host) }
        return recipients
    }

    /// Puts a staged record in place, and removes the item's files at other levels.
    internal func commit(_ staged: VaultDirectory.StagedFile, for record: VaultRecord) throws(KeychainError) {
        try directory.commit(staged, to: directory.itemFile(record.accessibility, record.service, record.name))
        for other in Accessibility.allCases where other != record.accessibility {
            let file = directory.itemFile(other, record.service, record.name)
            if directory.remove(file) { directory.removeIfEmpty(file.parent) }
        }
    }

    /// Writes a record whole (stage and commit).
    internal func write(_ record: VaultRecord) throws(KeychainError) {
        try commit(stage(record), for: record)
    }

    /// The levels at which the item has a file.
    internal func levels(ofItem name: KeyName, in service: KeyName) -> [Accessibility] {
        Accessibility.allCases.filter { directory.isFile(directory.itemFile($0, service, name)) }
    }

    /// Removes the item's files; true if there were any.
    @discardableResult
    internal func removeItem(_ name: KeyName, in service: KeyName) -> Bool {
        var removed = false
        for accessibility in Accessibility.allCases {
            let file = directory.itemFile(accessibility, service, name)
            if directory.remove(file) {
                removed = true
                directory.removeIfEmpty(file.parent)
            }
        }
        return removed
    }

    /// The names of the service's items on disk, at every level.
    internal func itemNames(in service: KeyName) -> [KeyName] {
        var names = Set<KeyName>()
        for accessibility in Accessibility.allCases {
            for name in directory.entries(of: directory.serviceFolder(accessibility, service)) { names.insert(KeyName(bytes: name)) }
        }
        return names.sorted()
    }

    /// Removes every file of the service.
    internal func removeService(_ service: KeyName) {
        for accessibility in Accessibility.allCases { directory.removeTree(directory.serviceFolder(accessibility, service)) }
    }

    /// Makes the item's file say what the kernel holds now (value, level, deadline), or
    /// removes it if the kernel has no such item of the caller's: the unlock and the
    /// lock reconcile with it, reading the kernel through ``Placement``.
    internal func saveFromKernel(_ name: KeyName, in service: KeyName) throws(KeychainError) {
        let own = OwnService(name: service, home: .whenUnlocked)
        guard let located = try own.locate(name, exactLevel: true), let accessibility = located.accessibility,
              var value = try Placement.value(of: located.item)
        else {
            removeItem(name, in: service)
            return
        }
        defer { value.overwriteWithZeros() }
        try write(VaultRecord(service: service, name: name, accessibility: accessibility,
                              deadline: located.shownDeadline, value: value))
    }

    /// On a read that missed in the kernel: if the vault holds the item at a level this
    /// process may load (``levelsLoadedOnDemand()``) and is unlocked, it is loaded again
    /// (the persistent keyring expired, or a new login session) and true is returned;
    /// if the vault is locked, that is the error. Only a miss pays for this (the
    /// keychain asks ``Journals/forReading()`` then).
    internal func reloadIfKept(_ name: KeyName, in service: KeyName) throws(KeychainError) -> Bool {
        guard !levels(ofItem: name, in: service).isEmpty else { return false }
        guard try reload(name, in: service) else {
            throw .vaultLocked(service: service.description, item: name.description)
        }
        return true
    }
}

extension VaultDirectory {
    /// What is at the vault's path when it is not a vault, for ``KeychainError/vaultMissing(path:problem:)``.
    var whatIsThereInstead: String {
        let kind = try? root.withCString { path -> mode_t? in
            var info = stat()
            return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : nil
        }
        guard let kind else { return "its folder is gone (moved, renamed, or not mounted yet)" }
        return kind == S_IFDIR ? "the folder there is not the vault (it has no identity.age or recipient)"
            : "a file or a link is in its place, not the vault's folder"
    }

    /// Whether a regular file is there (not following links).
    func isFile(_ path: VaultPath) -> Bool {
        guard let info = try? status(of: path) else { return false }
        return info.st_mode & S_IFMT == S_IFREG
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
