import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The kernel side of a member's operations on another user's shared service, and of
// the sharing an owner's write gives a new item.

extension SharedService {
    /// Finds an item in the shared service. `group` names the access group the caller
    /// reached it through, for the refusal if it was unshared meanwhile.
    func locate(_ key: KeyName, group: String?) throws(KeychainError) -> LocatedItem? {
        for ring in rings {
            do {
                // Members may not search the owner's keys (see ``Sharing``): the
                // keyring's list, then each key's description. Only the owner's own
                // key is the owner's item.
                for item in try ring.serial.linkedKeys() {
                    guard let info = try? item.describe(), info.type == "user", info.uid == owner,
                          info.description == key else { continue }
                    return LocatedItem(ring: ring.serial, item: item, accessibility: nil)
                }
            } catch {
                // Unshared between the scan and the search.
                if error.errno == .permissionDenied { throw .notShared(service: service.description, group: group, owner: ownerName) }
                throw KeychainError(error)
            }
        }
        // A search answers "none" for a keyring that has died, too: tell the two apart.
        if rings.allSatisfy({ (try? $0.serial.describe()) == nil }) { throw .sharedServiceGone(self) }
        return nil
    }

    /// A member's write: the item must exist (only its owner adds items, which keeps
    /// every key of the service in the owner's quota and under the owner's control),
    /// and its value is replaced in place, keeping serial, owner, permissions and level.
    func update(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, group: String?) throws(KeychainError) {
        guard sharing.isGroupWritable else { throw .sharedReadOnly(self) }
        guard let located = try locate(key, group: group) else { throw .ownerOnly(self, action: "add items") }
        if try !write(bytes, into: located, named: key) { throw .ownerOnly(self, action: "add items") }
    }

    /// A member's save of an existing item. False if it is gone.
    func replace(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, group: String?) throws(KeychainError) -> Bool {
        guard let located = try locate(key, group: group) else { return false }
        guard sharing.isGroupWritable else { throw .sharedReadOnly(self) }
        return try write(bytes, into: located, named: key)
    }

    /// The one way a member changes an owner's item: `keyctl_update`, in place. A
    /// member cannot make a new key in the owner's keyring (no write on it), so:
    /// - an item with a deadline is refused: the update would clear its expiry, which
    ///   only the owner may set again (such items carry no member write; see ``Sharing``);
    /// - the value may not be larger than the item is now, since the owner's quota pays
    ///   for the key (a member could otherwise fill it), nor over a page, the most
    ///   `keyctl_update` takes;
    /// - a full quota is named as the owner's.
    /// False if the item vanished.
    private func write(_ bytes: UnsafeRawBufferPointer, into located: LocatedItem, named key: KeyName) throws(KeychainError) -> Bool {
        let refusal: MemberWriteLimit?
        do throws(KeyctlError) {
            let current = try located.item.payloadSize()
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            if !(try located.item.describe().permissions.groupRights.contains(.write)) {
                refusal = .hasDeadline
            } else if ItemValue.needsFreshKey(bytes) {
                refusal = .emptyOrNul
            } else if bytes.count > current {
                refusal = .larger(current: current, new: bytes.count)
            } else if bytes.count > page {
                refusal = .overPage(new: bytes.count, page: page)
            } else {
                try located.item.update(payload: bytes)
                return true
            }
        } catch {
            if error.meansKeyIsGone { return false }
            if error.errno == .diskQuotaExceeded { throw .quotaExceeded(error, usage: KeyQuota.of(uid: owner)) }
            throw KeychainError(error)
        }
        if let refusal { throw .memberWriteRefused(self, item: key.description, refusal) }
        return false
    }

    /// A member's removal: never allowed. Removing takes write on the owner's keyring,
    /// which would also let members link keys of their own into it (see ``Sharing``).
    func refuseRemoval() throws(KeychainError) -> Never {
        guard sharing.isGroupWritable else { throw .sharedReadOnly(self) }
        throw .ownerOnly(self, action: "remove items")
    }
}

extension OwnService {
    /// The sharing an owner's write gives the new item. A keychain with an access group
    /// shares a private service first; a ring just made at a new level joins the
    /// sharing of the service's other rings.
    ///
    /// Each ring is described once: deciding from one read and acting on another would
    /// let a write re-share a keyring that an `unshare` stripped in between. A ring that
    /// joins is checked against its source afterwards and made private again if the
    /// source was unshared meanwhile (`unshare` strips every keyring twice before the
    /// items, so one of the two sees the join).
    ///
    /// A ring the probe that found it described (``ServiceKeyring/info``) is not
    /// described again: that read is the one its sharing is decided and acted on from, and
    /// the re-check after the write (``store(_:forKey:until:)``) sees any change since.
    func sharingForWrite(rings: [ServiceKeyring]) throws(KeychainError) -> Sharing? {
        var states: [(ring: KeySerial, sharing: Sharing?)] = []
        for ring in rings {
            if let info = ring.info {
                states.append((ring.serial, Sharing(info)))
                continue
            }
            guard let info = try Placement.describeUnlessGone(ring.serial) else { continue }
            states.append((ring.serial, Sharing(info)))
        }
        let source = states.first { $0.sharing != nil }
        if let group = accessGroup {
            if let current = source?.sharing {
                guard current.group.gid == group.gid else {
                    throw .sharedWithAnotherGroup(service: name.description, current: current.group, requested: group)
                }
            } else {
                let sharing = Sharing(group: group, isGroupWritable: groupWritable)
                try Placement.apply(sharing, to: rings.map(\.serial))
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
}
