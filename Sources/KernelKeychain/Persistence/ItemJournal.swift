import Keyrings

/// An item as a journal keeps it: everything needed to put it back into the kernel.
/// Its value shares the buffer of whoever made it, who zeroes it when done.
internal struct JournaledItem {
    var service: KeyName
    var name: KeyName
    var accessibility: Accessibility
    var deadline: Deadline?
    var value: [UInt8]
}

/// What one mutation does to the items a journal keeps, described from the bytes the
/// caller has in hand (never read back from the kernel after the change).
internal enum ItemChange {
    /// The item holds this value, at this level and deadline (any copy at another level goes).
    case saved(JournaledItem)
    /// The item is gone.
    case removed(service: KeyName, name: KeyName)
    /// Every item of the service is gone.
    case removedService(KeyName)
}

/// The one seam every mutation of items goes through, in one order: ``stage(_:)`` the
/// change (a failure here, such as a full disk, stops it before the kernel changed),
/// change the kernel, then ``commit(_:)`` (or ``discard(_:)`` if the kernel refused).
/// A crash between the kernel change and the commit leaves the old state in the
/// journal (and the new one staged) and the new one in the kernel; the vault's lock and
/// unlock reconcile before they drop or load anything: a staged file whose value the
/// kernel holds is committed, and a file that does not hold what the kernel holds is
/// written again from it.
///
/// The journal is handed to the keychain and never calls back into it: it persists,
/// and loads through ``Placement``, the layer under the public API. The keychain asks it
/// too what to load back when the kernel lacks what it keeps (a new login session, a
/// reboot): ``reloadIfKept(_:in:)``, ``loadMissing(of:listed:)`` and
/// ``loadMissingServices(listed:)``, which have nothing to load without a journal.
internal protocol ItemJournal {
    associatedtype Staged
    /// Runs `body` with writers to this journal held off, so that the kernel change and
    /// the journal's change of one writer are not interleaved with another's. `body`
    /// gets the journal holding the lock: what it does through that value, a nested
    /// ``withLock(_:)`` included, runs under this lock, without taking it again.
    func withLock<R>(_ body: (_ held: Self) throws(KeychainError) -> R) throws(KeychainError) -> R
    /// Prepares `changes` without making them visible.
    func stage(_ changes: [ItemChange]) throws(KeychainError) -> Staged
    /// Makes staged changes the journal's state.
    func commit(_ staged: Staged) throws(KeychainError)
    /// Drops staged changes (the kernel change did not happen).
    func discard(_ staged: Staged)
    /// Refuses now if an item of `size` bytes clearly could not be staged (a full disk),
    /// for a writer that can be told before it has the whole value.
    func checkRoom(forItemOf size: Int) throws(KeychainError)
    /// The levels at which the journal keeps this item (normally one; none for an item
    /// it does not keep, such as one stored `--ephemeral`: changes to it stay out).
    func keptLevels(of name: KeyName, in service: KeyName) -> [Accessibility]
    /// The names of the service's items the journal keeps.
    func keptNames(in service: KeyName) -> [KeyName]
    /// Whether this journal keeps anything at all (false: no journal, so a write need
    /// not describe its change).
    var persists: Bool { get }
    /// The value the journal holds for an item (the owner's last save), for a change
    /// that must not save the kernel's value (one members may have written); nil if it
    /// holds none.
    func keptValue(of name: KeyName, in service: KeyName) throws(KeychainError) -> [UInt8]?
    /// On a read that missed in the kernel: if the journal keeps the item, it is loaded
    /// back and true is returned (look again); if it keeps it but cannot load it now (a
    /// locked vault), that is the error. False if it does not keep the item.
    func reloadIfKept(_ name: KeyName, in service: KeyName) throws(KeychainError) -> Bool
    /// For a listing of the caller's own service that found `listed` in the kernel: the
    /// items the journal keeps for this session that the kernel lacks are loaded. True
    /// if any was: list again. A journal that cannot load now leaves the listing as it is.
    func loadMissing(of service: KeyName, listed: [KeyName]) -> Bool
    /// For a listing of services that found `listed` in the kernel: the services the
    /// journal keeps items of for this session that have no keyring are loaded (as
    /// ``loadMissing(of:listed:)``). True if any item was.
    func loadMissingServices(listed: [KeyName]) -> Bool
}

/// Where the keychain finds its journal: the vault if there is one, else none. The only
/// place that knows which journals there are.
internal enum Journals {
    /// The journal a write goes through. A vault that cannot be used fails the write
    /// (see ``Vault/forWriting()``); without a vault folder this costs one `lstat` and
    /// one search of the user keyring for the vault's key.
    /// `held`: a vault whose lock the caller holds (the `alongside` of
    /// ``Vault/updateDocument(_:alongside:_:)``); if it is the vault found, the write is
    /// journaled through it, under that lock.
    static func forWriting(holding held: Vault? = nil) throws(KeychainError) -> any ItemJournal {
        guard let vault = try Vault.forWriting() else { return NoJournal() }
        if let held, held.directory.holdsLock, held.directory.root == vault.directory.root { return held }
        return vault
    }

    /// The journal a read that missed asks to load the item back: a missing vault is no
    /// journal here (a read never fails for it). Without a vault, a `stat` of HOME and
    /// an `lstat` of where the vault would be.
    static func forReading() throws(KeychainError) -> any ItemJournal {
        if let vault = try Vault.existing() { return vault }
        return NoJournal()
    }
}

extension ItemJournal {
    /// Whether the journal keeps this item.
    func keeps(_ name: KeyName, in service: KeyName) -> Bool {
        !keptLevels(of: name, in: service).isEmpty
    }

    /// Stage, apply, commit: `apply` changes the kernel and says whether it changed
    /// anything; if not (the item was not there), the staged change is dropped.
    func record<R>(_ changes: [ItemChange], committing: (R) -> Bool = { _ in true },
                   _ apply: () throws(KeychainError) -> R) throws(KeychainError) -> R {
        try withLock { journal throws(KeychainError) in
            let staged = try journal.stage(changes)
            let result: R
            do throws(KeychainError) {
                result = try apply()
            } catch {
                journal.discard(staged)
                throw error
            }
            if committing(result) { try journal.commit(staged) } else { journal.discard(staged) }
            return result
        }
    }
}

/// No persistence: kc without a vault, where the kernel alone holds the items.
internal struct NoJournal: ItemJournal {
    func withLock<R>(_ body: (_ held: NoJournal) throws(KeychainError) -> R) throws(KeychainError) -> R { try body(self) }
    func stage(_ changes: [ItemChange]) throws(KeychainError) {}
    func commit(_ staged: Void) throws(KeychainError) {}
    func discard(_ staged: Void) {}
    func checkRoom(forItemOf size: Int) throws(KeychainError) {}
    func keptLevels(of name: KeyName, in service: KeyName) -> [Accessibility] { [] }
    func keptNames(in service: KeyName) -> [KeyName] { [] }
    var persists: Bool { false }
    func keptValue(of name: KeyName, in service: KeyName) throws(KeychainError) -> [UInt8]? { nil }
    func reloadIfKept(_ name: KeyName, in service: KeyName) throws(KeychainError) -> Bool { false }
    func loadMissing(of service: KeyName, listed: [KeyName]) -> Bool { false }
    func loadMissingServices(listed: [KeyName]) -> Bool { false }
}
