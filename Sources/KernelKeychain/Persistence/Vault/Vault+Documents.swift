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
        let recipient = try recipient()
        let sealed: [UInt8]
        do throws(AgeError) { sealed = try Age.encrypt(bytes, to: [recipient]) } catch { throw .vaultCrypto(path: path, error.description) }
        let file = documentFile(name)
        try directory.checkRoom(forFileOf: sealed.count)
        try directory.withLock { () throws(KeychainError) in
            try directory.commit(directory.stage(sealed, for: file), to: file)
        }
    }

    /// Changes the document `name` holding the vault's lock, so that two programs that
    /// each keep a copy of it (two kc-secretd on two session buses of one user) do not
    /// lose each other's changes: `body` gets the document as it is on disk now and
    /// returns its new contents (nil: no change), which replace it atomically.
    ///
    /// Returns the document's ``documentStamp(_:)`` taken under the lock: that of the
    /// version `body` saw, or of the one it wrote. Taken after the lock, it could be
    /// another program's newer version, which the caller would take for its own and
    /// never read.
    @discardableResult
    public func updateDocument(_ name: String, _ body: (Document) throws(KeychainError) -> [UInt8]?) throws(KeychainError) -> [Int]? {
        try directory.withLock { () throws(KeychainError) in
            if let bytes = try body(readDocument(name)) { try saveDocument(name, bytes) }
            return documentStamp(name)
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
        guard let sealed = try directory.read(file, limit: 64 << 20) else { return .absent }
        guard let identity = VaultKeys.stashed(for: directory) else { return .locked }
        do throws(AgeError) {
            return .contents(try Age.decrypt(sealed, identities: [identity]))
        } catch {
            throw .vaultCrypto(path: file.description, error.description)
        }
    }
}
