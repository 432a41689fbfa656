import Keyrings

/// The vault as the keychain's journal: a saved item is staged as an encrypted file in
/// `tmp/` (flushed to disk, its folder made: a full disk fails here, before the kernel
/// changed) and committed by renaming it into place, which also removes the item's
/// files at other levels; removals happen at commit. Saves are committed before
/// removals, so a crash in a rename's commit leaves the item twice rather than nowhere.
/// All under the vault's lock, so the last writer wins in both the kernel and the files.
extension Vault: ItemJournal {
    internal struct Staged {
        var files: [(file: VaultDirectory.StagedFile, record: VaultRecord)] = []
        var removals: [ItemChange] = []
    }

    /// `body` gets this vault holding its lock (see ``VaultDirectory/withLock(_:)``):
    /// what it does through that value (a listing's or a read's load, the record of the
    /// change) runs under this lock.
    func withLock<R>(_ body: (_ held: Vault) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try directory.withLock { held throws(KeychainError) in try body(Vault(directory: held)) }
    }

    func stage(_ changes: [ItemChange]) throws(KeychainError) -> Staged {
        var staged = Staged()
        for change in changes {
            guard case .saved(let item) = change else {
                staged.removals.append(change)
                continue
            }
            var record = VaultRecord(service: item.service, name: item.name, accessibility: item.accessibility,
                                     deadline: item.deadline, value: item.value)
            defer { record.value.overwriteWithZeros() }
            do {
                staged.files.append((try stage(record), VaultRecord(record, withoutValue: ())))
            } catch {
                discard(staged)
                throw error
            }
        }
        return staged
    }

    /// Runs after the kernel changed: a failure here is reported as such
    /// (``KeychainError/vaultNotSaved(path:reason:)``), not as a write that changed nothing.
    /// The next lock or unlock saves what the kernel holds.
    func commit(_ staged: Staged) throws(KeychainError) {
        for (index, entry) in staged.files.enumerated() {
            do {
                try commit(entry.file, for: entry.record)
            } catch {
                discard(Staged(files: Array(staged.files[(index + 1)...])))
                if case .vaultIOFailed(let path, _, let reason) = error { throw .vaultNotSaved(path: path, reason: reason) }
                throw error
            }
        }
        for removal in staged.removals {
            switch removal {
            case .removed(let service, let name): removeItem(name, in: service)
            case .removedService(let service): removeService(service)
            case .saved: break
            }
        }
    }

    func discard(_ staged: Staged) {
        for entry in staged.files { directory.remove(entry.file.path) }
    }

    func keptLevels(of name: KeyName, in service: KeyName) -> [Accessibility] {
        levels(ofItem: name, in: service)
    }

    func keptNames(in service: KeyName) -> [KeyName] {
        itemNames(in: service)
    }

    var persists: Bool { true }

    func keptValue(of name: KeyName, in service: KeyName) throws(KeychainError) -> [UInt8]? {
        try savedValue(of: name, in: service)
    }
}

extension VaultRecord {
    /// The record's index (service, name, level) without its value: what a commit needs.
    init(_ record: VaultRecord, withoutValue: Void) {
        self.init(service: record.service, name: record.name, accessibility: record.accessibility,
                  deadline: record.deadline, value: [], written: record.written, owner: record.owner)
    }
}
