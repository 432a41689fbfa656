import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Sharing a service with a Unix group (access groups). The owner's side changes the
// group and permission mask of keys it owns; a member's side finds the owner's keyring
// through /proc/keys and uses it by serial, which the kernel allows when the key's
// group permission does.

extension Keychain {
    /// Shares the service, every keyring and item of it at every accessibility, with
    /// `group`, which the caller must belong to. Items written later join the sharing.
    /// Members get view, read and search; with `writable`, also write (change and
    /// remove items; only the owner adds items).
    ///
    /// Items are shared before their keyrings, so a member who finds the service can
    /// read all of it. The kernel calls are `keyctl_chown` (gid only) and
    /// `keyctl_setperm` on each key; both need setattr, which kc's keys grant their owner.
    public func share(with group: String, writable: Bool = false) throws(KeychainError) {
        let group = try AccessGroup(named: group)
        try group.requireCaller()
        let sharing = Sharing(group: group, isGroupWritable: writable)
        let membersWrote = writable ? [] : try itemsMembersMayWrite()
        let rings = try ownRings().map(\.serial)
        try Placement.apply(sharing, to: rings)
        // A keyring a concurrent write made at a new level meanwhile.
        try Placement.apply(sharing, to: try ownRings().map(\.serial).filter { !rings.contains($0) })
        try takeBackSavedValues(of: membersWrote)
    }

    /// Stops sharing the service: the group loses every right on its keyrings and items
    /// at once. Keyrings first, so no member can find an item while the rest follow.
    public func unshare() throws(KeychainError) {
        let membersWrote = try itemsMembersMayWrite()
        try Placement.apply(nil, to: try ownRings().map(\.serial))
        // Again, listing the keyrings afresh: a concurrent write may have made one at a
        // new level and let it join the sharing before this unshare reached the others.
        guard let service = serviceName else { return }
        try Placement.apply(nil, to: try OwnService(name: service, home: .whenUnlocked).rings().map(\.serial))
        try takeBackSavedValues(of: membersWrote)
    }

    /// The caller's items of this service that members of a group-writable share may
    /// write now: their kernel values may be members'.
    private func itemsMembersMayWrite() throws(KeychainError) -> [KeyName] {
        var names: [KeyName] = []
        for ring in try ownRings() {
            for item in (try? ring.serial.linkedKeys()) ?? [] {
                guard let info = try? item.describe(), info.type == "user", info.uid == geteuid(),
                      info.permissions != info.permissions.withoutWriteForOthers else { continue }
                names.append(info.description)
            }
        }
        return names
    }

    /// After members lost write (an unshare, or a read-only share): the items they may
    /// have written get the owner's saved value back from the vault where it differs, so
    /// that nothing treats a member's value as the owner's from now on (the vault, which
    /// saves an owner's item again from the kernel; `kc exec --env`). Needs the vault
    /// unlocked (``KeychainError/vaultLockedForMembersItem(service:item:)`` otherwise,
    /// after the sharing changed). An item the vault does not keep keeps its value.
    private func takeBackSavedValues(of names: [KeyName]) throws(KeychainError) {
        guard let service = serviceName, !names.isEmpty else { return }
        let journal = try Self.journal()
        guard journal.persists else { return }
        try journal.withLock { journal throws(KeychainError) in
            for name in names where journal.keeps(name, in: service) {
                guard var saved = try journal.keptValue(of: name, in: service) else { continue }
                defer { saved.overwriteWithZeros() }
                let own = OwnService(name: service, home: .whenUnlocked)
                guard let located = try own.locate(name, exactLevel: true),
                      var current = try Placement.value(of: located.item) else { continue }
                defer { current.overwriteWithZeros() }
                if current.withUnsafeBytes({ constantTimeEquals($0, saved) }) { continue }
                let record = located.deadlineRecord
                _ = try saved.withValueBytes { bytes throws(KeychainError) in
                    try Placement.replace(bytes, of: located, named: name, deadline: record?.deadline ?? located.shownDeadline,
                                          record: record, like: located.likeOwnItem(named: name))
                }
            }
        }
    }

    /// How the caller's service is shared, or nil if it is private.
    public func sharing() throws(KeychainError) -> Sharing? {
        try Self.currentSharing(of: ownRings().map(\.serial))
    }

    /// Services other users share with the caller through a group it belongs to,
    /// sorted by owner and name; optionally only one group's or one owner's.
    ///
    /// Reads /proc/keys (the kernel lists there the keys a caller may view) and
    /// confirms each candidate with `keyctl_describe`.
    public static func sharedServices(group: String? = nil, owner: String? = nil) throws(KeychainError) -> [SharedService] {
        var gid: UInt32? = nil
        if let group {
            let resolved = try AccessGroup(named: group)
            try resolved.requireCaller()
            gid = resolved.gid
        }
        var uid: UInt32? = nil
        if let owner {
            guard let found = Accounts.uid(ofUserNameOrNumber: owner) else { throw .unknownUser(owner) }
            uid = found
        }
        return SharedServices.visible(group: gid, owner: uid)
    }

    // MARK: Internals

    /// Whether this keychain may reach another user's service at all. Private keychains
    /// never read /proc/keys.
    internal var reachesShared: Bool { accessGroup != nil || owner != nil }

    /// The other user's service this keychain works on, or nil when it works on the
    /// caller's own. The caller's own service wins when it has one (and no other owner
    /// was named). A write with `accessGroup` alone always goes to the caller's own
    /// service (created and shared if need be): writing into another user's service
    /// takes naming that user (`owner`), so a member who shares a service of the same
    /// name first cannot receive the caller's secret.
    internal func sharedService(forWriting: Bool) throws(KeychainError) -> SharedService? {
        guard reachesShared, let service = serviceName else { return nil }
        if owner == geteuid() { return nil }
        if owner == nil && forWriting { return nil }
        if owner == nil, try serviceExists() { return nil }
        let found = SharedServices.visible(service: service, group: accessGroup?.gid, owner: owner)
        if found.count > 1 { throw .sharedByMany(service: service.description, owners: found.map(\.ownerName)) }
        if let only = found.first { return only }
        throw .notShared(service: service.description, group: accessGroup?.name,
                         owner: owner.map { Accounts.name(ofUser: $0) ?? String($0) })
    }

    /// The sharing of the first shared ring, or nil if none is.
    private static func currentSharing(of rings: [KeySerial]) throws(KeychainError) -> Sharing? {
        for ring in rings {
            if let info = try Placement.describeUnlessGone(ring), let sharing = Sharing(info) { return sharing }
        }
        return nil
    }

    /// Every keyring of the caller's own service; throws if there is none.
    private func ownRings() throws(KeychainError) -> [ServiceKeyring] {
        guard let service = serviceName else { throw .serviceRequired }
        let rings = try OwnService(name: service, home: .whenUnlocked).rings()
        guard !rings.isEmpty else { throw .noSuchService(service.description) }
        return rings
    }
}
