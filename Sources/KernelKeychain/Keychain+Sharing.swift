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
        let rings = try ownRings().map(\.serial)
        try Self.apply(sharing, to: rings)
        // A keyring a concurrent write made at a new level meanwhile.
        try Self.apply(sharing, to: try ownRings().map(\.serial).filter { !rings.contains($0) })
    }

    /// Stops sharing the service: the group loses every right on its keyrings and items
    /// at once. Keyrings first, so no member can find an item while the rest follow.
    public func unshare() throws(KeychainError) {
        try Self.apply(nil, to: try ownRings().map(\.serial))
        // Again, listing the keyrings afresh: a concurrent write may have made one at a
        // new level and let it join the sharing before this unshare reached the others.
        guard let service = serviceName else { return }
        try Self.apply(nil, to: try ServiceKeyring.rings(of: service).map(\.serial))
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

    /// Finds an item in another user's shared service.
    internal func locate(_ key: KeyName, in shared: SharedService) throws(KeychainError) -> (ring: KeySerial, item: KeySerial)? {
        for ring in shared.rings {
            do {
                // Only the owner's own key is the owner's item.
                if let item = try ring.serial.search(type: "user", description: key),
                   (try? item.describe().uid) == shared.owner {
                    return (ring.serial, item)
                }
            } catch {
                // Unshared between the scan and the search.
                if error.errno == .permissionDenied { throw .notShared(service: shared.service.description, group: accessGroup?.name, owner: shared.ownerName) }
                throw KeychainError(error)
            }
        }
        // A search answers "none" for a keyring that has died, too: tell the two apart.
        if shared.rings.allSatisfy({ (try? $0.serial.describe()) == nil }) { throw .sharedServiceGone(shared) }
        return nil
    }

    /// A member's write: the item must exist (only its owner adds items, which keeps
    /// every key of the service in the owner's quota and under the owner's control),
    /// and its value is replaced in place, keeping owner, permissions and expiry.
    internal func update(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, in shared: SharedService) throws(KeychainError) {
        guard shared.sharing.isGroupWritable else { throw .sharedReadOnly(shared) }
        guard timeout == nil else { throw .ownerOnly(shared, action: "set an item's lifetime") }
        guard let located = try locate(key, in: shared) else { throw .ownerOnly(shared, action: "add items") }
        do {
            try located.item.update(payload: bytes)
        } catch {
            if error.meansKeyIsGone { throw .ownerOnly(shared, action: "add items") }
            throw KeychainError(error)
        }
    }

    /// A member's removal: never allowed. Removing takes write on the owner's keyring,
    /// which would also let members link keys of their own into it (see ``Sharing``).
    internal func remove(_ key: KeyName, from shared: SharedService) throws(KeychainError) -> Bool {
        guard shared.sharing.isGroupWritable else { throw .sharedReadOnly(shared) }
        throw .ownerOnly(shared, action: "remove items")
    }

    /// The sharing an owner's write gives the new item. A keychain with an access group
    /// shares a private service first; a ring just made at a new level joins the
    /// sharing of the service's other rings.
    ///
    /// Each ring is described once: deciding from one read and acting on another would
    /// let a write re-share a keyring that an `unshare` stripped in between. A ring that
    /// joins is checked against its source afterwards and made private again if the
    /// source was unshared meanwhile (`unshare` strips every keyring twice before the
    /// items, so one of the two sees the join).
    internal func sharingForWrite(rings: [KeySerial]) throws(KeychainError) -> Sharing? {
        var states: [(ring: KeySerial, sharing: Sharing?)] = []
        for ring in rings {
            do {
                states.append((ring, Sharing(try ring.describe())))
            } catch {
                if !error.meansKeyIsGone { throw KeychainError(error) }
            }
        }
        let source = states.first { $0.sharing != nil }
        if let group = accessGroup {
            if let current = source?.sharing {
                guard current.group.gid == group.gid else {
                    throw .sharedWithAnotherGroup(service: service ?? "", current: current.group, requested: group)
                }
            } else {
                let sharing = Sharing(group: group, isGroupWritable: groupWritable)
                try Self.apply(sharing, to: rings)
                return sharing
            }
        }
        guard let source, let current = source.sharing else { return nil }
        for (ring, sharing) in states where sharing == nil {
            do throws(KeyctlError) {
                try Sharing.apply(current, to: ring, as: .keyring)
                if Sharing(try source.ring.describe()) == nil {
                    try Sharing.apply(nil, to: ring, as: .keyring)
                    return nil
                }
            } catch {
                if !error.meansKeyIsGone { throw KeychainError(error) }
            }
        }
        return current
    }

    /// The sharing of the first shared ring, or nil if none is.
    private static func currentSharing(of rings: [KeySerial]) throws(KeychainError) -> Sharing? {
        for ring in rings {
            do {
                if let sharing = Sharing(try ring.describe()) { return sharing }
            } catch {
                if !error.meansKeyIsGone { throw KeychainError(error) }
            }
        }
        return nil
    }

    /// Every keyring of the caller's own service; throws if there is none.
    private func ownRings() throws(KeychainError) -> [ServiceKeyring] {
        guard let service = serviceName else { throw .serviceRequired }
        let rings = try ServiceKeyring.rings(of: service)
        guard !rings.isEmpty else { throw .noSuchService(service.description) }
        return rings
    }

    /// Shares each ring (items, keyring, then the items again, for any a concurrent
    /// write added in between) or unshares them (every keyring, every keyring again for
    /// any a concurrent write made join, then the items). With the re-checks in
    /// ``set(_:forKey:)`` and the second pass of ``share(with:writable:)`` and
    /// ``unshare()`` over freshly listed keyrings, every item ends up shared exactly as
    /// its keyring (`SharingLibraryTests` races writers at two levels against both).
    private static func apply(_ sharing: Sharing?, to rings: [KeySerial]) throws(KeychainError) {
        do throws(KeyctlError) {
            if let sharing {
                for ring in rings {
                    try ignoringGone { () throws(KeyctlError) in
                        try applyToItems(sharing, in: ring)
                        try Sharing.apply(sharing, to: ring, as: .keyring)
                        try applyToItems(sharing, in: ring)
                    }
                }
            } else {
                for _ in 0..<2 {
                    for ring in rings { try ignoringGone { () throws(KeyctlError) in try Sharing.apply(nil, to: ring, as: .keyring) } }
                }
                for ring in rings { try ignoringGone { () throws(KeyctlError) in try applyToItems(nil, in: ring) } }
            }
        } catch {
            throw KeychainError(error)
        }
    }

    /// Runs `body`, treating a key that vanished meanwhile as done.
    private static func ignoringGone(_ body: () throws(KeyctlError) -> Void) throws(KeyctlError) {
        do {
            try body()
        } catch {
            if !error.meansKeyIsGone { throw error }
        }
    }

    /// The items get the sharing; a key of another uid's found in the caller's keyring
    /// is unlinked rather than stopping a share or unshare for good.
    private static func applyToItems(_ sharing: Sharing?, in ring: KeySerial) throws(KeyctlError) {
        for item in try ring.linkedKeys() {
            do {
                guard let info = try? item.describe(), info.uid == geteuid() else {
                    try? item.unlink(from: ring)
                    continue
                }
                guard info.type == "user" else { continue }
                try Sharing.apply(sharing, to: item, as: .item)
            } catch {
                if !error.meansKeyIsGone { throw error }
            }
        }
    }
}

/// A keyring whose items ``Keychain/items()`` lists, with what is known of it.
internal struct ListedRing {
    var service: KeyName
    var serial: KeySerial
    var accessibility: Accessibility?
    var owner: UInt32
    var sharing: Sharing?

    init(service: KeyName, serial: KeySerial, accessibility: Accessibility?, owner: UInt32, sharing: Sharing?) {
        self.service = service
        self.serial = serial
        self.accessibility = accessibility
        self.owner = owner
        self.sharing = sharing
    }

    /// One of the caller's own rings; its sharing is read from the kernel.
    init(service: KeyName, ring: ServiceKeyring) {
        self.init(service: service, serial: ring.serial, accessibility: ring.accessibility, owner: geteuid(),
                  sharing: (try? ring.serial.describe()).flatMap(Sharing.init))
    }
}
