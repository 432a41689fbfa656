import KernelKeychain

/// Where kc-secretd keeps its ``SecretIndex`` between daemons, so that every daemon of
/// the user (a new login, a second session bus, a restart) finds the items by their
/// attributes for exactly as long as the items live: in the vault (``VaultIndexHome``),
/// encrypted, kept across reboots as the items are; without one, in a file of the
/// user's tied to the boot (``BootIndexFile``), since the kernel keeps the items until
/// reboot.
///
/// Every change goes through ``update(alongside:_:)``, under the home's lock, applied to
/// the index as it is saved then (another daemon's changes are kept), and a saved index
/// this process cannot read is never written over.
protocol IndexHome {
    /// Where the index is kept, for messages.
    var location: String { get }

    /// Changes whenever the saved index does (inode, size, change time); nil if there is
    /// none.
    func stamp() -> [Int]?

    /// The saved index, nil if there is none (or it belongs to an earlier boot). Throws
    /// ``SecretStore/vaultLocked`` while the vault is locked, and `Failed` for an index
    /// this process must not use (damaged, a newer kc's, not safely the user's own).
    func read() throws(BusError) -> SecretIndex?

    /// Under the home's lock: `body` gets the saved index (nil: none yet) and returns
    /// the new one, or nil to change nothing. The new one is staged (so a full disk
    /// refuses it first), then `alongside` runs, the change to the kernel the index
    /// describes, and the new index is committed only if it succeeded. Returns
    /// ``stamp()`` taken under the lock.
    func update(alongside: (_ held: Vault?) throws(KeychainError) -> Void,
                _ body: (SecretIndex?) throws(BusError) -> SecretIndex?) throws(IndexUpdateFailure) -> [Int]?

    /// Removes what a save killed mid-way left behind (a staged copy of the index), and
    /// an index of an earlier boot: for a daemon's first look at the index.
    func tidy()
}

/// Why ``IndexHome/update(alongside:_:)`` changed nothing.
enum IndexUpdateFailure: Error {
    /// The index could not be read or saved, or `body` refused the change.
    case refused(BusError)
    /// The change to the kernel failed.
    case alongside(KeychainError)
}

/// The index as a document of the vault: `documents/secret-service.age`, encrypted to the
/// vault's key, read while it is unlocked.
struct VaultIndexHome: IndexHome {
    let vault: Vault
    static let documentName = "secret-service"

    var location: String { "\(vault.path)/documents/\(Self.documentName).age" }

    func stamp() -> [Int]? { vault.documentStamp(Self.documentName) }

    func read() throws(BusError) -> SecretIndex? {
        let document: Vault.Document
        do { document = try vault.readDocument(Self.documentName) } catch { throw .failed("cannot read the index in \(location): \(error)") }
        return try decode(document)
    }

    /// The index a document holds. A document this process cannot read (the vault
    /// locked, or a format it does not know: damaged, or a newer kc's) is an error: it
    /// may hold records this process never saw (another kc-secretd's), so nothing is
    /// written over it.
    private func decode(_ document: Vault.Document) throws(BusError) -> SecretIndex? {
        switch document {
        case .absent:
            return nil
        case .locked:
            throw SecretStore.vaultLocked
        case .contents(let bytes):
            guard let decoded = SecretIndex(decoding: bytes) else {
                throw .failed("the index in \(location) is not one this kc-secretd can read (damaged, or a newer kc's): "
                              + "it is left as it is and nothing is changed; move it away to start a new one")
            }
            return decoded
        }
    }

    func update(alongside: (_ held: Vault?) throws(KeychainError) -> Void,
                _ body: (SecretIndex?) throws(BusError) -> SecretIndex?) throws(IndexUpdateFailure) -> [Int]? {
        var refusal: BusError? = nil
        var alongsideFailure: KeychainError? = nil
        let saved: [Int]?
        do throws(KeychainError) {
            saved = try vault.updateDocument(Self.documentName, alongside: { held throws(KeychainError) in
                do throws(KeychainError) { try alongside(held) } catch {
                    alongsideFailure = error
                    throw error
                }
            }) { document throws(KeychainError) in
                do throws(BusError) {
                    guard let changed = try body(decode(document)) else { return nil }
                    let bytes = changed.encoded()
                    try SecretLimits.checkIndex(size: bytes.count)
                    return bytes
                } catch {
                    refusal = error
                    return nil
                }
            }
        } catch {
            if let alongsideFailure { throw .alongside(alongsideFailure) }
            throw .refused(Self.saveFailure(error, location: location))
        }
        if let refusal { throw .refused(refusal) }
        return saved
    }

    func tidy() { vault.removeStagedDocuments(Self.documentName) }

    /// A save that failed: a full disk is a limit of the moment, and said so.
    static func saveFailure(_ error: KeychainError, location: String) -> BusError {
        if case .vaultFull = error { return .limitsExceeded("the Secret Service's index could not be saved in \(location): \(error)") }
        return .failed("the Secret Service's index could not be saved in \(location): \(error)")
    }
}
