import CKeyutils

// The kernel calls that find a service's keyrings and items, and what their answers mean
// to both programs. An answer the full kc would meet by changing the kernel (repairing a
// mask, unlinking another uid's key, linking the user keyring to gain possession) or by
// reporting an error is `uncertain`: the front then hands the command over, and the full
// kc takes its own longer path (Sources/KernelKeychain/Placement).

/// What a search found: a key, certainly nothing, or something only the full kc can settle.
public enum KernelSearch: Equatable, Sendable {
    case found(Int32)
    case absent
    case uncertain

    /// `keyctl_search` of `ring` (and the keyrings nested in it) for a key of `type`
    /// described `description`. The errnos that mean "no such key" (``meansKeyIsGone(_:)``) are `absent`.
    public init(in ring: Int32, type: UnsafePointer<CChar>, description: UnsafePointer<CChar>) {
        let key = keyctl_search(ring, type, description, 0)
        if key > 0 {
            self = .found(Int32(truncatingIfNeeded: key))
            return
        }
        self = Self.meansKeyIsGone(CKeyutils_errno()) ? .absent : .uncertain
    }

    /// ENOKEY, EKEYEXPIRED and EKEYREVOKED: the key is not there, or is there no more.
    public static func meansKeyIsGone(_ error: Int32) -> Bool {
        error == ENOKEY || error == EKEYEXPIRED || error == EKEYREVOKED
    }
}

/// The anchors a service's keyrings live under, in the order a service whose home is
/// when-unlocked is probed.
public enum ProbeAnchor: Sendable {
    case session, user, persistent

    public static let probeOrder: [ProbeAnchor] = [.session, .user, .persistent]

    /// The serial the anchor is named by for a read in the initial user namespace: the
    /// special ids for session and user; the persistent keyring fetched with
    /// `keyctl_get_persistent` and linked into this thread's keyring (which creates it if
    /// need be and restarts its expiry). Nil if that call fails.
    public var serialForReading: Int32? {
        switch self {
        case .session: return KEY_SPEC_SESSION_KEYRING
        case .user: return KEY_SPEC_USER_KEYRING
        case .persistent:
            let ring = keyctl_get_persistent(uid_t.max, KEY_SPEC_THREAD_KEYRING)
            return ring > 0 ? Int32(truncatingIfNeeded: ring) : nil
        }
    }
}

/// The kernel's initial user namespace: kc anchors elsewhere inside another one.
public enum InitialUserNamespace {
    /// The inode of /proc/self/ns/user is the kernel's fixed `PROC_USER_INIT_INO` there.
    public static let inode: UInt64 = 0xEFFF_FFFD

    /// Whether this process is in it; nil when /proc/self/ns/user cannot be looked at
    /// (no /proc). The full kc then assumes it is; the front does not guess.
    public static var contains: Bool? {
        var status = stat()
        guard stat("/proc/self/ns/user", &status) == 0 else { return nil }
        return UInt64(status.st_ino) == inode
    }
}

/// A service's own keyrings, found from each anchor by their descriptions.
public enum ServiceKeyringProbe {
    /// The markers of a service's keyrings, portable first (the home's marker).
    public static let prefixes: [StaticString] = ["kc:", "kc.local:"]

    /// For each anchor and marker, a search of the anchor for the service keyring and the
    /// owner check; for a keyring found, whether it is linked in the anchor directly (a
    /// read of the anchor's links). `visit` gets each keyring found and that answer, and
    /// returns false to stop. False if the probe stopped, or anything was not as the full
    /// kc takes it without a change or an error.
    public static func probe(_ service: UnsafePointer<CChar>, _ visit: (_ ring: Int32, _ linkedDirectly: Bool) -> Bool) -> Bool {
        for anchor in ProbeAnchor.probeOrder {
            guard let anchorSerial = anchor.serialForReading else { return false }
            var links: [Int32]? = nil
            for prefix in prefixes {
                switch find(service, prefix: prefix, under: anchorSerial) {
                case .absent: continue
                case .uncertain: return false
                case .found(let ring):
                    if links == nil { links = linkedKeys(of: anchorSerial) }
                    guard let links else { return false }
                    guard visit(ring, links.contains(ring)) else { return false }
                }
            }
        }
        return true
    }

    /// The service keyring found from `anchor`, if it is the caller's own with a mask kc
    /// makes; `uncertain` for any other.
    public static func find(_ service: UnsafePointer<CChar>, prefix: StaticString, under anchor: Int32) -> KernelSearch {
        var description = ByteText()
        description.append(prefix)
        description.append(service)
        let found = description.withCString { KernelSearch(in: anchor, type: "keyring", description: $0) }
        guard case .found(let ring) = found else { return found }
        return isOwnAsKcMakesIt(ring) ? found : .uncertain
    }

    /// The keyring is used as it is only if its uid is the caller's and its mask grants
    /// possessors nothing and the group neither write nor search (``needsRepair(_:)``).
    private static func isOwnAsKcMakesIt(_ ring: Int32) -> Bool {
        KeyDescribe.read(ring) { fields, _ in
            fields.uid == geteuid() && !needsRepair(permissions: fields.permissions)
        } ?? false
    }

    /// Whether a service keyring's mask is one kc never makes and repairs before use:
    /// rights for possessors (another uid in the owner's session possesses it), or write
    /// or search for the group (members read through the links, never search or change).
    public static func needsRepair(permissions: UInt32) -> Bool {
        let possessor = (permissions >> 24) & 0x3f, group = (permissions >> 8) & 0x3f
        let groupWriteOrSearch: UInt32 = 0x04 | 0x08
        return possessor != 0 || group & groupWriteOrSearch != 0
    }

    /// Appends the names of the `user` keys linked in `ring`, each the caller's, with
    /// `checkingSize` only those whose size can be read; false where ``userKeys(of:)`` is
    /// nil or a size cannot be read.
    public static func appendUserKeyNames(of ring: Int32, to names: inout [[UInt8]], checkingSize: Bool) -> Bool {
        guard let keys = userKeys(of: ring) else { return false }
        for key in keys {
            if checkingSize, keyctl_read(key.serial, nil, 0) < 0 { return false }
            names.append(key.name)
        }
        return true
    }

    /// The `user` keys linked in `ring`, each the caller's, with their names (keys of
    /// other types passed over); nil where the full kc would unlink a key (another uid's,
    /// or one that cannot be described), link the user keyring to read again, or report
    /// an error.
    public static func userKeys(of ring: Int32) -> [(serial: Int32, name: [UInt8])]? {
        guard let keys = linkedKeys(of: ring) else { return nil }
        var found: [(serial: Int32, name: [UInt8])] = []
        for key in keys {
            let described: (isUser: Bool, name: [UInt8])?? = KeyDescribe.read(key) { fields, text in
                guard fields.uid == geteuid() else { return nil }
                let name = text.cString(at: fields.descriptionOffset)
                return (fields.hasType("user", in: text), Array(UnsafeRawBufferPointer(start: name, count: strlen(name))))
            }
            guard let described, let described else { return nil }
            if described.isUser { found.append((key, described.name)) }
        }
        return found
    }

    /// The serials linked in `ring` (`keyctl_read`, size-probed), or nil if it cannot be read.
    public static func linkedKeys(of ring: Int32) -> [Int32]? {
        var capacity = 64
        while true {
            var serials = [Int32](repeating: 0, count: capacity)
            let length = serials.withUnsafeMutableBytes { bytes in
                keyctl_read(ring, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
            }
            guard length >= 0 else { return nil }
            let count = Int(length) / MemoryLayout<Int32>.size
            if count <= capacity { return Array(serials[0..<count]) }
            capacity = count
        }
    }
}

/// What makes another user's keyring a service shared with the caller's groups: a
/// keyring of that owner, described `kc:NAME` or `kc.local:NAME`, whose group may view and
/// read it. Both programs confirm each candidate from /proc/keys by this rule on a
/// `keyctl_describe` (the full kc's `SharedServices.visible`, the front's `--group` read).
public struct SharedServiceKeyring: Sendable {
    /// Whether the marker is `kc.local:` (a this-device-only level).
    public let isDeviceOnly: Bool
    /// Where the service's name starts in the description.
    public let nameOffset: Int
    /// The group it is shared with.
    public let gid: UInt32
    /// Whether members may change it: write, or for a keyring, link.
    public let isGroupWritable: Bool

    /// The group's rights: view and read, which sharing grants.
    public static let groupViewAndRead: UInt32 = 0x01 | 0x02

    /// Nil unless the described key is a keyring of `owner` with a service marker,
    /// shared for reading with its group.
    public init?(isKeyring: Bool, uid: UInt32, gid: UInt32, permissions: UInt32, description: UnsafeRawBufferPointer, owner: UInt32) {
        guard isKeyring, uid == owner else { return nil }
        if description.starts(with: staticBytes("kc:")) {
            isDeviceOnly = false
            nameOffset = 3
        } else if description.starts(with: staticBytes("kc.local:")) {
            isDeviceOnly = true
            nameOffset = 9
        } else {
            return nil
        }
        guard let writable = Self.groupWritability(permissions: permissions, isKeyring: true) else { return nil }
        self.gid = gid
        isGroupWritable = writable
    }

    /// For a key shared with its group: whether members may change it (write; for a
    /// keyring, link); nil if the group may not view and read it (not shared).
    public static func groupWritability(permissions: UInt32, isKeyring: Bool) -> Bool? {
        let rights = (permissions >> 8) & 0x3f
        guard rights & groupViewAndRead == groupViewAndRead else { return nil }
        return rights & 0x04 != 0 || (isKeyring && rights & 0x10 != 0)
    }
}
