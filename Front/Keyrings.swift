import CFront

// The kernel calls the front makes, each as the full kc makes it
// (Sources/KernelKeychain/Placement), and what their answers mean. Anything the full kc
// would answer by changing the kernel (repairing a mask, unlinking another uid's key,
// linking the user keyring to gain possession) or by reporting an error is `uncertain`
// here: the front then hands the command over.

/// What a search found: a key, certainly nothing, or something the front leaves to the
/// full kc.
enum Search {
    case found(key_serial_t)
    case absent
    case uncertain

    /// `keyctl_search` of `ring` (and the keyrings nested in it) for a key of `type`
    /// described `description`. The errnos the full kc reads as "no such key"
    /// (`KeyctlError.meansKeyIsGone`: ENOKEY, EKEYEXPIRED, EKEYREVOKED) are `absent`.
    init(in ring: key_serial_t, type: UnsafePointer<CChar>, description: UnsafePointer<CChar>) {
        let key = keyctl_search(ring, type, description, 0)
        if key > 0 {
            self = .found(key_serial_t(truncatingIfNeeded: key))
            return
        }
        let error = CFront_errno()
        self = error == ENOKEY || error == EKEYEXPIRED || error == EKEYREVOKED ? .absent : .uncertain
    }
}

/// The anchors a service's keyrings live under, in the order the full kc probes a
/// service whose home is when-unlocked (`Anchor.probeOrder(startingWith: .session)`).
enum Anchor {
    case session, user, persistent

    static let probeOrder: [Anchor] = [.session, .user, .persistent]

    /// The serial the full kc names the anchor by for a read (`Anchor.serialForReading`),
    /// in the initial user namespace (``UserNamespace/isInitial``): the special ids for
    /// session and user; the persistent keyring fetched with `keyctl_get_persistent`
    /// and linked into this thread's keyring, as the full kc fetches it (which creates
    /// it if need be and restarts its expiry: the same call, so the same effect). Nil if
    /// that call fails: the full kc reports it.
    var serialForReading: key_serial_t? {
        switch self {
        case .session: return KEY_SPEC_SESSION_KEYRING
        case .user: return KEY_SPEC_USER_KEYRING
        case .persistent:
            let ring = keyctl_get_persistent(uid_t.max, KEY_SPEC_THREAD_KEYRING)
            return ring > 0 ? key_serial_t(truncatingIfNeeded: ring) : nil
        }
    }
}

/// The kernel's user namespace: the full kc anchors elsewhere inside one
/// (Sources/KernelKeychain/UserNamespace.swift), so the front serves only outside.
enum UserNamespace {
    /// Whether this is the initial user namespace, as the full kc tells it: the inode of
    /// /proc/self/ns/user is the kernel's fixed `PROC_USER_INIT_INO`. False also when
    /// that cannot be read (the full kc then assumes the initial one; the front does not guess).
    static var isInitial: Bool {
        var status = stat()
        return stat("/proc/self/ns/user", &status) == 0 && status.st_ino == 0xEFFF_FFFD
    }
}

/// A service's own keyrings, found as the full kc finds them
/// (Sources/KernelKeychain/Placement/ServiceKeyring.swift).
enum ServiceKeyrings {
    /// The markers of a service's keyrings, portable first (the home's marker).
    static let prefixes: [StaticString] = ["kc:", "kc.local:"]

    /// The full kc's probe (`ServiceKeyring.rings(of:startingWith: .whenUnlocked)`): for
    /// each anchor and marker, a search of the anchor for the service keyring and the
    /// owner check; for a keyring found, whether it is linked in the anchor directly (a
    /// read of the anchor's links, as the full kc reads them). `visit` gets each keyring
    /// found and that answer, and returns false to stop. False if the probe stopped, or
    /// anything was not as the full kc takes it without a change or an error.
    static func probe(_ service: UnsafePointer<CChar>, _ visit: (_ ring: key_serial_t, _ linkedDirectly: Bool) -> Bool) -> Bool {
        for anchor in Anchor.probeOrder {
            guard let anchorSerial = anchor.serialForReading else { return false }
            var links: [key_serial_t]? = nil
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

    /// The service keyring found from `anchor` (`ServiceKeyring.findDescribed`), if it
    /// is the caller's own with a mask kc makes; `uncertain` for any other.
    static func find(_ service: UnsafePointer<CChar>, prefix: StaticString, under anchor: key_serial_t) -> Search {
        var description = CText()
        description.append(prefix)
        description.append(service)
        let found = description.withCString { Search(in: anchor, type: "keyring", description: $0) }
        guard case .found(let ring) = found else { return found }
        return isOwnAsKcMakesIt(ring) ? found : .uncertain
    }

    /// `keyctl_describe` gives `type;uid;gid;perm;description`. The keyring is used only
    /// if its uid is the caller's and its mask grants possessors nothing and the group
    /// neither write nor search (the full kc repairs any other mask before it reads).
    private static func isOwnAsKcMakesIt(_ ring: key_serial_t) -> Bool {
        KeyDescription.read(ring) { fields in
            guard fields.skip(),  // type
                  let uid = fields.number(radix: 10), uid == UInt64(geteuid()),
                  fields.skip(),  // gid
                  let permissions = fields.number(radix: 16)
            else { return false }
            let possessor = (permissions >> 24) & 0x3f, group = (permissions >> 8) & 0x3f
            let groupWriteOrSearch: UInt64 = 0x04 | 0x08
            return possessor == 0 && group & groupWriteOrSearch == 0
        } ?? false
    }

    /// Appends the names of the `user` keys linked in `ring`, each the caller's
    /// (`ServiceRings.itemNames(checkingSize:)`), with `checkingSize` only those whose
    /// size can be read; false where the full kc would unlink a key (another uid's, or
    /// one that cannot be described), link the user keyring to read again, or report an
    /// error.
    static func appendUserKeyNames(of ring: key_serial_t, to names: inout [[UInt8]], checkingSize: Bool) -> Bool {
        guard let keys = linkedKeys(of: ring) else { return false }
        for key in keys {
            let described: (isUser: Bool, name: [UInt8])?? = KeyDescription.read(key) { fields in
                let isUser = fields.skip(ifEqualTo: "user")
                guard isUser || fields.skip(),
                      let uid = fields.number(radix: 10), uid == UInt64(geteuid()),
                      fields.number(radix: 10) != nil,  // gid
                      fields.number(radix: 16) != nil  // mask
                else { return nil }
                return (isUser, Array(UnsafeRawBufferPointer(start: fields.position, count: strlen(fields.position))))
            }
            guard let described, let described else { return false }
            guard described.isUser else { continue }
            if checkingSize, keyctl_read(key, nil, 0) < 0 { return false }
            names.append(described.name)
        }
        return true
    }

    /// The serials linked in `ring` (`keyctl_read`, size-probed), or nil if it cannot be read.
    static func linkedKeys(of ring: key_serial_t) -> [key_serial_t]? {
        var capacity = 64
        while true {
            var serials = [key_serial_t](repeating: 0, count: capacity)
            let length = serials.withUnsafeMutableBytes { bytes in
                keyctl_read(ring, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
            }
            guard length >= 0 else { return nil }
            let count = Int(length) / MemoryLayout<key_serial_t>.size
            if count <= capacity { return Array(serials[0..<count]) }
            capacity = count
        }
    }
}

/// One `keyctl_describe`, read field by field.
enum KeyDescription {
    /// Describes `key` and hands its fields to `body`; nil if the describe fails or
    /// does not fit (a description is at most 4095 bytes).
    static func read<Result>(_ key: key_serial_t, _ body: (inout DescribeFields) -> Result) -> Result? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 4096 + 128) { text -> Result? in
            guard let base = text.baseAddress else { return nil }
            let length = keyctl_describe(key, base, text.count)
            guard length > 0 && length <= text.count else { return nil }
            var fields = DescribeFields(base)
            return body(&fields)
        }
    }
}

/// The `;`-separated fields at the head of a describe string, read one by one.
struct DescribeFields {
    private(set) var position: UnsafePointer<CChar>

    init(_ text: UnsafePointer<CChar>) { position = text }

    /// Passes over the next field; false if there is no `;` after it.
    mutating func skip() -> Bool {
        guard let end = strchr(position, Int32(UInt8(ascii: ";"))) else { return false }
        position = UnsafePointer(end + 1)
        return true
    }

    /// Whether the next field is `text`; passes over it if so.
    mutating func skip(ifEqualTo text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard memcmp(position, text.utf8Start, count) == 0, position[count] == CChar(UInt8(ascii: ";")) else { return false }
        position += count + 1
        return true
    }

    /// The next field as an unsigned number of at most 32 bits (a uid, a gid, a mask),
    /// or nil for anything else (an empty field, `-1`, a field not ended by `;`).
    mutating func number(radix: UInt64) -> UInt64? {
        var value: UInt64 = 0, digits = 0
        while position[0] != CChar(UInt8(ascii: ";")) {
            let byte = UInt8(bitPattern: position[0])
            let digit: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt64(byte - UInt8(ascii: "a")) + 10
            default: return nil  // also the NUL at the end
            }
            guard digit < radix, digits < 10 else { return nil }
            value = value * radix + digit
            digits += 1
            position += 1
        }
        guard digits > 0, value <= 0xFFFF_FFFF else { return nil }
        position += 1
        return value
    }
}
