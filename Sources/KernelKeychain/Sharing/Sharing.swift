import Keyrings
import KeyringCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a service is shared: the Unix group whose members may read it, and whether
/// they may also change and remove its items.
///
/// In the kernel this is the group id and the group byte of the permission mask of the
/// service keyring and of every item in it: view and read (`0x003f0300`). A
/// group-writable share adds write to the items (`0x003f0700`), so members can change
/// their values, and marks the keyring with the group's link right (`0x003f1300`),
/// which lets a member link the keyring into its own keyrings and nothing more.
///
/// Never search: the kernel lets anyone with search on a key invalidate it
/// (`keyctl_invalidate`), which would let any member destroy the owner's service or
/// items. Members find an item by reading the keyring's list and describing each key.
/// (Write lets the kernel take `keyctl_revoke` from a member too: the price of a
/// group-writable share, as a member could write garbage anyway.) Write
/// on a keyring is never granted: it would let members link keys of their own into the
/// owner's service, or unlink the owner's. Setattr is never granted, so members cannot
/// change a key's lifetime, owner or mask.
///
/// An item with a deadline never gets members' write, even in a group-writable share:
/// the kernel clears a key's expiry whenever its value is updated, and only the owner
/// may set it again, so a member's write would make the secret last for ever.
public struct Sharing: Hashable, Sendable, CustomStringConvertible {
    public var group: AccessGroup
    public var isGroupWritable: Bool

    public init(group: AccessGroup, isGroupWritable: Bool = false) {
        self.group = group
        self.isGroupWritable = isGroupWritable
    }

    /// The sharing a key's description shows, or nil if its group cannot search it.
    /// (Group write on a keyring is how kc before 0.3 marked a writable share.)
    internal init?(_ info: KeyDescription) {
        // The core's rule, which the front's `--group` read confirms keyrings by too.
        guard let writable = SharedServiceKeyring.groupWritability(permissions: info.permissions.rawValue,
                                                                  isKeyring: info.type == "keyring") else { return nil }
        self.init(group: AccessGroup(gid: info.gid), isGroupWritable: writable)
    }

    /// What a key of this role gets: see the type's description. `expiring`: an item
    /// with a deadline, which members may read but not write.
    internal func permissions(for role: SharedKeyRole, expiring: Bool = false) -> KeyPermissions {
        var rights: KeyPermissions.Rights = [.view, .read]
        if isGroupWritable && !(role == .item && expiring) { rights.insert(role == .keyring ? .link : .write) }
        return KeyPermissions.ownerOnly.union(.group(rights))
    }

    public var description: String {
        isGroupWritable ? "\(group.name) (writable)" : group.name
    }

    /// Applies this sharing to one key: its group, then its mask. With nil, the mask
    /// first (which is what cuts members off), then the caller's own gid back.
    /// `expiring`: whether the item has a deadline, if the caller knows; else a writable
    /// share looks it up in /proc/keys.
    internal static func apply(_ sharing: Sharing?, to key: KeySerial, as role: SharedKeyRole, expiring: Bool? = nil) throws(KeyctlError) {
        // An item keeps its mark of the empty value (``ItemValue``), which is not a right.
        var mark: KeyPermissions = []
        if role == .item, ItemValue.isMarkedEmpty(try key.describe().permissions) { mark = ItemValue.emptyMark }
        if let sharing {
            let expires = role == .item && sharing.isGroupWritable && (expiring ?? (DeadlineRecords.deadline(of: key) != nil))
            try key.setGroup(sharing.group.gid)
            try key.setPermissions(sharing.permissions(for: role, expiring: expires).union(mark))
        } else {
            try key.setPermissions(KeyPermissions.ownerOnly.union(mark))
            try key.setGroup(getegid())
        }
    }
}

/// What a shared key is: a service keyring or an item; they get different group rights.
internal enum SharedKeyRole {
    case keyring, item
}

/// A service keyring of another user that this process may search through its group
/// permission.
public struct SharedService: Hashable, Sendable {
    public var service: KeyName
    /// The uid that owns the keyring, and its name (the number if it has none).
    public var owner: UInt32
    public var ownerName: String
    public var sharing: Sharing
    internal var rings: [SharedRing]
}

/// One keyring of a ``SharedService``: portable and device-only items live in sibling
/// keyrings, and a service can have one under each of its owner's anchors.
internal struct SharedRing: Hashable, Sendable {
    var serial: KeySerial
    var marker: ServiceMarker
}

internal enum SharedServices {
    private struct OwnerAndService: Hashable {
        var owner: UInt32
        var service: KeyName
    }

    /// Other users' service keyrings this process can see, found by reading /proc/keys,
    /// which lists every key the caller may view. Their owners' anchor keyrings are
    /// private, so this is the only way to find them. Each candidate line is confirmed
    /// with `keyctl_describe`, which is authoritative and exact where /proc/keys pads
    /// and truncates. Nothing is cached: a service unshared a moment ago is gone.
    static func visible(service: KeyName? = nil, group gid: UInt32? = nil, owner: UInt32? = nil) -> [SharedService] {
        guard let text = readProcBytes("/proc/keys") else { return [] }
        var byOwnerAndService: [OwnerAndService: SharedService] = [:]
        // Only services shared through a group this process carries: a key anyone may
        // view through its "other" rights is not shared with the caller by kc.
        let callerGroups = Set(CallerGroups.supplementary() + [getegid()])
        for (serial, uid) in candidates(inProcKeys: text, excludingOwner: geteuid()) where owner == nil || owner == uid {
            guard let info = try? serial.describe(), info.type == "keyring", info.uid == uid,
                  let (marker, name) = ServiceMarker.parse(keyringDescription: info.description),
                  service == nil || service == name,
                  gid == nil || gid == info.gid, callerGroups.contains(info.gid),
                  let sharing = Sharing(info)
            else { continue }
            let ring = SharedRing(serial: serial, marker: marker)
            let id = OwnerAndService(owner: uid, service: name)
            if var known = byOwnerAndService[id] {
                known.rings.append(ring)
                known.sharing.isGroupWritable = known.sharing.isGroupWritable && sharing.isGroupWritable
                byOwnerAndService[id] = known
            } else {
                byOwnerAndService[id] = SharedService(
                    service: name, owner: uid, ownerName: Accounts.name(ofUser: uid) ?? String(uid),
                    sharing: sharing, rings: [ring])
            }
        }
        return byOwnerAndService.values.sorted { ($0.ownerName, $0.service) < ($1.ownerName, $1.service) }
    }

    /// Keyrings in /proc/keys text whose description starts like a kc service keyring,
    /// with their owner, other than `excludingOwner`'s.
    /// The lines are the core's ``ProcKeysLine`` (``ProcKeysLine/isServiceKeyring(in:)``),
    /// as the front reads them.
    static func candidates(inProcKeys text: String, excludingOwner me: UInt32) -> [(serial: KeySerial, owner: UInt32)] {
        candidates(inProcKeys: Array(text.utf8), excludingOwner: me)
    }

    /// ``candidates(inProcKeys:excludingOwner:)-(String,_)`` of the file's bytes, as read:
    /// not decoded into text first.
    static func candidates(inProcKeys text: [UInt8], excludingOwner me: UInt32) -> [(serial: KeySerial, owner: UInt32)] {
        var found: [(serial: KeySerial, owner: UInt32)] = []
        text.withUnsafeBytes { text in
            ProcKeysLine.forEach(in: text) { line in
                if line.isServiceKeyring(in: text) && line.uid != me {
                    found.append((KeySerial(rawValue: Int32(bitPattern: line.serial)), line.uid))
                }
                return true
            }
        }
        return found
    }
}
