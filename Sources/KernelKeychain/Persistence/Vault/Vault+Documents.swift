import Age
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Files a program keeps in the vault beside the items, encrypted to the vault's key
/// like them: kc-secretd's index of the Secret Service's attributes and labels
/// (`documents/secret-service.age`). Saving needs no passphrase (the vault's public key
/// is enough); reading needs the vault unlocked, as an item's file does.
extension Vault {
    /// The caller's vault if there is one (checked safe to use), for a program that
    /// keeps a document in it.
    public static func current() throws(KeychainError) -> Vault? { try existing() }

    private func documentFile(_ name: String) -> VaultPath {
        directory.root.appending("documents").appending(name + ".age")
    }

    /// Saves `bytes` as the document `name` (an age file to the vault's key), replacing
    /// the last version atomically: after a crash the file is the old one or the new one.
    public func saveDocument(_ name: String, _ bytes: [UInt8]) throws(KeychainError) {
        try updateDocument(name) { _ throws(KeychainError) in bytes }
    }

    /// Changes the document `name` holding the vault's lock, so that two programs that
    /// each keep a copy of it (two kc-secretd on two session buses of one user) do not
    /// lose each other's changes: `body` gets the document as it is on disk now and
    /// returns its new contents (nil: no change), which replace it atomically.
    ///
    /// `alongside` is a change that must happen with the document's or not at all (the
    /// value of the item the document describes): it runs, still under the lock, once
    /// the new version is staged (so a full disk has refused it already, with nothing
    /// changed), and the new version is committed only if it succeeds. It does not run
    /// when `body` returns nil. It gets this vault holding its lock: a keychain write it
    /// makes passes that on (``Keychain/set(_:forKey:holding:)``,
    /// ``Keychain/remove(_:holding:)``), to be journaled under this lock, not to wait for it.
    ///
    /// Returns the document's ``documentStamp(_:)`` taken under the lock: that of the
    /// version `body` saw, or of the one it wrote. Taken after the lock, it could be
    /// another program's newer version, which the caller would take for its own and
    /// never read.
    @discardableResult
    public func updateDocument(_ name: String, alongside: (_ held: Vault) throws(KeychainError) -> Void = { _ in },
                               _ body: (Document) throws(KeychainError) -> [UInt8]?) throws(KeychainError) -> [Int]? {
        try withLock { held throws(KeychainError) in
            removeStagedCopies(of: name)
            guard let bytes = try body(readDocument(name)) else { return documentStamp(name) }
            let recipient = try recipient()
            let sealed: [UInt8]
            do throws(AgeError) { sealed = try Age.encrypt(bytes, to: [recipient]) } catch { throw .vaultCrypto(path: path, error.description) }
            let file = documentFile(name)
            try directory.checkRoom(forFileOf: sealed.count)
            let staged = try directory.stage(sealed, for: file, prefix: Self.stagedPrefix(of: name))
            do throws(KeychainError) {
                try alongside(held)
            } catch {
                directory.remove(staged.path)
                throw error
            }
            try directory.commit(staged, to: file)
            return documentStamp(name)
        }
    }

    /// Removes what a save of the document `name` killed mid-way (kill -9, a crash) left
    /// in `tmp/`: a staged copy as large as the document (up to 64 MiB), which an unlock
    /// would remove too, but a program that keeps the document may run for days without
    /// one. Takes the vault's lock, under which no save is in progress; a program calls
    /// it when it first reads the document, and every save does.
    public func removeStagedDocuments(_ name: String) {
        try? directory.withLock { _ throws(KeychainError) in removeStagedCopies(of: name) }
    }

    /// Staged copies of a document are named for it (`document-NAME-…`), so they are
    /// told apart from staged items, whose fate an unlock decides from the kernel.
    private static func stagedPrefix(of name: String) -> String { "document-" + name + "-" }

    /// ``removeStagedDocuments(_:)``, the lock held.
    private func removeStagedCopies(of name: String) {
        let prefix = Array(Self.stagedPrefix(of: name).utf8)
        for entry in directory.entries(of: directory.temporaryFolder) where entry.starts(with: prefix) {
            directory.remove(directory.temporaryFolder.appending(bytes: entry))
        }
    }

    /// Tells whether the document changed on disk since it was last seen: its inode,
    /// size and change time (nil if there is none).
    public func documentStamp(_ name: String) -> [Int]? {
        guard let info = try? directory.status(of: documentFile(name)) else { return nil }
        return [Int(info.st_ino), Int(info.st_size), Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec)]
    }

    /// What ``readDocument(_:)`` found.
    public enum Document: Sendable {
        case absent
        /// There is one, and the vault is locked: `kc unlock` opens it.
        case locked
        case contents([UInt8])
    }

    /// The document `name`, if one was saved and the vault is unlocked.
    public func readDocument(_ name: String) throws(KeychainError) -> Document {
        let file = documentFile(name)
        // Locked: whether there is one is all a reader can learn, so the file (up to
        // 64 MiB) is not read for it; a program may ask once per object it is asked about.
        guard let identity = VaultKeys.stashed(for: directory) else { return documentStamp(name) == nil ? .absent : .locked }
        guard let sealed = try directory.read(file, limit: 64 << 20) else { return .absent }
        do throws(AgeError) {
            return .contents(try Age.decrypt(sealed, identities: [identity]))
        } catch {
            throw .vaultCrypto(path: file.description, error.description)
        }
    }
}
