import Keyrings
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The placement layer: the only code that touches service keyrings, item keys and the
// deadline table (``DeadlineRecords``). It changes the kernel and nothing else: the
// public ``Keychain`` resolves (``ServiceRings``), asks its journal to stage, calls
// this, and commits. The vault's unlock loads through it too.

/// What every placement operation shares: finding keys in a ring.
internal enum Placement {
    /// Searches one service keyring for the item.
    ///
    /// A key that `keyctl add` put there keeps keyctl's default mask (possessor: all;
    /// owner: view only), so only a possessor may search and read it. A service under
    /// the user keyring is possessed only if that keyring is reachable from this
    /// thread's keyrings, which a fresh session or a service does not give; on EACCES
    /// the user keyring is linked into the thread keyring (as writes do) and the search
    /// is made again. Such keys are still the caller's own.
    ///
    /// On `kc get`'s path: no closure or nested optional here, whose generic metadata the
    /// runtime would build by name at first use (about 40,000 instructions, 6% of a
    /// `kc get`, measured with callgrind). `KeySerial.search` already answers nil for a
    /// key that vanished.
    ///
    /// If the search is still refused, a key of that name that the caller may not search
    /// is in the way: one another uid put there (a member of a share that kc before 0.3
    /// let write the keyring). The caller's own key, if any, is then found in the link
    /// list, and the other uid's is unlinked: a service holds only its owner's keys.
    static func search(ring: KeySerial, for key: KeyName) throws(KeychainError) -> KeySerial? {
        do throws(KeyctlError) {
            do {
                return try ring.search(type: "user", description: key)
            } catch where error.errno == .permissionDenied {
                guard (try? Anchor.user.serialForWriting()) != nil else { throw error }
                do {
                    return try ring.search(type: "user", description: key)
                } catch where error.errno == .permissionDenied {
                    return try ownLinkedKey(type: "user", description: key, in: ring, unlinkingOthers: true)
                }
            }
        } catch {
            throw KeychainError(error)
        }
    }

    /// Finds the item in whichever of the caller's services holds it (services in name order).
    static func locateInAnyService(_ key: KeyName) throws(KeychainError) -> LocatedItem? {
        for (_, ring) in try ServiceKeyring.everywhere().sorted(by: { $0.name < $1.name }) {
            if let item = try search(ring: ring.serial, for: key) {
                return LocatedItem(ring: ring.serial, item: item, accessibility: ring.accessibility)
            }
        }
        return nil
    }

    /// The names of every service of the caller's that has a keyring at any level,
    /// sorted by their bytes.
    static func serviceNames() throws(KeychainError) -> [KeyName] {
        Array(Set(try ServiceKeyring.everywhere().map(\.name))).sorted()
    }

    /// Every key named `key` in the rings, with its ring. Normally one; two while
    /// writers at two levels race (see ``OwnService/store(_:forKey:until:)``).
    static func copies(of key: KeyName, in rings: [ServiceKeyring]) throws(KeychainError) -> [(ring: ServiceKeyring, item: KeySerial)] {
        var found: [(ring: ServiceKeyring, item: KeySerial)] = []
        for ring in rings {
            if let item = try search(ring: ring.serial, for: key) { found.append((ring, item)) }
        }
        return found
    }

    /// Runs kernel calls, the kernel's refusal as the keychain's: the one place a
    /// placement's plain kernel calls have their error converted.
    static func kernel<R>(_ body: () throws(KeyctlError) -> R) throws(KeychainError) -> R {
        do { return try body() } catch { throw KeychainError(error) }
    }

    /// ``kernel(_:)``, with nil where a key the calls use is gone (``unlessGone(_:)``).
    static func kernelUnlessGone<R>(_ body: () throws(KeyctlError) -> R) throws(KeychainError) -> R? {
        try kernel { () throws(KeyctlError) in try unlessGone(body) }
    }

    /// The item's value, or nil if it vanished. The caller zeroes it when done.
    static func value(of item: KeySerial) throws(KeychainError) -> [UInt8]? {
        try kernelUnlessGone { () throws(KeyctlError) in try item.readValue() }
    }

    /// Whether `ring` is linked directly in `anchor` (a search from the session keyring
    /// also finds rings of the user keyring nested in it).
    static func isLinked(_ ring: KeySerial, in anchor: KeySerial) throws(KeychainError) -> Bool {
        try linkedKeys(of: anchor).contains(ring)
    }

    /// The keys linked in a keyring (`keyctl_read`), the kernel's refusal as the keychain's.
    static func linkedKeys(of keyring: KeySerial) throws(KeychainError) -> [KeySerial] {
        try kernel { () throws(KeyctlError) in try keyring.linkedKeys() }
    }

    /// What the kernel says of a key (`keyctl_describe`), or nil if it is gone.
    static func describeUnlessGone(_ key: KeySerial) throws(KeychainError) -> KeyDescription? {
        try kernelUnlessGone { () throws(KeyctlError) in try key.describe() }
    }

    /// Replaces the value of a found item, keeping everything else about it exactly:
    /// its level, device-only flag, `deadline` (its recorded one), owner and sharing.
    /// False, storing nothing, if it vanished.
    ///
    /// An item without expiry is updated in place (`keyctl_update`, which needs write
    /// permission: kc's items grant it to their owner). The kernel's update of a `user`
    /// key also clears its expiry, so an item with a deadline is replaced by a new key
    /// made whole first (value, permissions, the same deadline) in the thread keyring
    /// and moved over the old one (`keyctl_move`, which displaces it atomically): the
    /// secret is never without its deadline, even if the process is killed midway.
    ///
    /// `record` is the item's deadline record if the caller found it (it is dropped
    /// without another search), and `like` what the new key copies (group and
    /// permissions), if the caller knows it without a describe.
    ///
    /// With `displacing`, an item without a deadline is displaced by a new key too. One
    /// whose new value is over a page, which `keyctl_update` refuses (EINVAL beyond; a
    /// `user` key holds up to 32767 bytes), is updated in place by `add_key` into its
    /// keyring instead, which keeps its serial as `keyctl_update` does.
    static func replace(_ bytes: UnsafeRawBufferPointer, of located: LocatedItem, named key: KeyName, deadline: Deadline?,
                        displacing: Bool = false, record: DeadlineRecords.Record? = nil,
                        like: KeyDescription? = nil) throws(KeychainError) -> Bool {
        do throws(KeyctlError) {
            // An empty value, or one NUL byte, is always a new key (``ItemValue``).
            let displacing = displacing || ItemValue.needsFreshKey(bytes)
            if deadline == nil && !displacing && bytes.count <= Int(sysconf(Int32(_SC_PAGESIZE))) {
                return try unlessGone { () throws(KeyctlError) in try located.item.update(payload: bytes) } != nil
            }
            var original = like
            if original == nil { original = try unlessGone { () throws(KeyctlError) in try located.item.describe() } }
            guard let original else { return false }
            if deadline == nil && !displacing {
                guard let updated = try unlessGone({ () throws(KeyctlError) in
                    try KeySerial.add(type: "user", description: key, payload: bytes, into: located.ring)
                }) else { return false }
                // The item was displaced or removed since the search: the new key is it now.
                if updated != located.item {
                    if original.gid != getegid() { try updated.setGroup(original.gid) }
                    try updated.setPermissions(original.permissions)
                }
                return true
            }
            let fresh = try KeySerial.prepare(bytes, named: key, like: original, until: deadline, table: record?.table)
            guard try fresh.place(in: located.ring) else { return false }
            // The old key is displaced: its record goes.
            if let record { DeadlineRecords.drop(record) } else { DeadlineRecords.forget([located.item]) }
            return true
        } catch {
            throw KeychainError(error)
        }
    }

    /// Whether another uid may have written the item's value: it grants write to its
    /// group (a group-writable share) or to others. A vault saves no value such an item
    /// holds that the owner's own writes did not put there.
    static func othersMayWrite(_ item: KeySerial) -> Bool {
        guard let info = try? item.describe() else { return false }
        return info.permissions != info.permissions.withoutWriteForOthers
    }

    /// Unlinks copies of an item that lost to the kept one, and their deadline records.
    static func unlink(_ copies: [(ring: ServiceKeyring, item: KeySerial)]) throws(KeychainError) {
        var unlinked: [KeySerial] = []
        for copy in copies where try unlinkIgnoringGone(copy.item, from: copy.ring.serial) { unlinked.append(copy.item) }
        DeadlineRecords.forget(unlinked)
    }

    /// After a write: one copy stays, the one with the lowest serial.
    static func keepOneCopy(of key: KeyName, in rings: [ServiceKeyring]) throws(KeychainError) {
        // One keyring holds one key of a name: nothing to settle.
        guard rings.count > 1 else { return }
        let found = try copies(of: key, in: rings)
        guard found.count > 1, let keep = found.min(by: { $0.item.rawValue < $1.item.rawValue }) else { return }
        try unlink(found.filter { $0.item != keep.item })
    }
}

/// Unlinks a key, treating one that is already gone or no longer linked there as done.
/// Returns whether this call removed the link.
@discardableResult
internal func unlinkIgnoringGone(_ key: KeySerial, from keyring: KeySerial) throws(KeychainError) -> Bool {
    do {
        try key.unlink(from: keyring)
        return true
    } catch {
        if error.meansKeyIsGone || error.errno == .noSuchFileOrDirectory { return false }
        throw KeychainError(error)
    }
}
