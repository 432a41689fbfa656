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
/// and loads through ``Placement``, the layer under the public API.
internal protocol ItemJournal {
    associatedtype Staged
    /// Runs `body` with writers to this journal held off, so that the kernel change and
    /// the journal's change of one writer are not interleaved with another's.
    func withLock<R>(_ body: () throws(KeychainError) -> R) throws(KeychainError) -> R
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
        try withLock { () throws(KeychainError) in
            let staged = try stage(changes)
            let result: R
            do throws(KeychainError) {
                result = try apply()
            } catch {
                discard(staged)
                throw error
            }
            if committing(result) { try commit(staged) } else { discard(staged) }
            return result
        }
    }
}

/// No persistence: kc without a vault, where the kernel alone holds the items.
internal struct NoJournal: ItemJournal {
    func withLock<R>(_ body: () throws(KeychainError) -> R) throws(KeychainError) -> R { try body() }
    func stage(_ changes: [ItemChange]) throws(KeychainError) {}
    func commit(_ staged: Void) throws(KeychainError) {}
    func discard(_ staged: Void) {}
    func checkRoom(forItemOf size: Int) throws(KeychainError) {}
    func keptLevels(of name: KeyName, in service: KeyName) -> [Accessibility] { [] }
    func keptNames(in service: KeyName) -> [KeyName] { [] }
    var persists: Bool { false }
    func keptValue(of name: KeyName, in service: KeyName) throws(KeychainError) -> [UInt8]? { nil }
}
