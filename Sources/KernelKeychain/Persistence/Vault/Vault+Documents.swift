import Age

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
