import Keyrings
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A dictionary of secrets for one service, stored in the kernel's keyrings.
///
/// ```swift
/// let keychain = Keychain(service: "com.example.app")
/// try keychain.set("s3cret", forKey: "token")
/// let token = try keychain.string(forKey: "token")   // "s3cret"
/// ```
///
/// A `Keychain` holds no state of its own: every call is a few keyring system calls,
/// so any thread may use one, and `cat ~/kc/com.example.app/token`, `kc get` and
/// `keyctl` all see the same items. A service is a keyring described `kc:<service>`
/// under the anchor keyring of the item's ``Accessibility``; an item is a `user` key in
/// it whose payload is the value's bytes.
public struct Keychain: Sendable, Hashable {
    /// The service whose items this keychain reads and writes; nil for ``anyService``.
    public let service: String?
    /// Where ``set(_:forKey:)`` puts items. Reads find an item at any level.
    public var accessibility: Accessibility
    /// How long items written through this keychain live; nil for no expiry.
    /// The kernel keeps whole seconds, rounded up.
    public var timeout: Duration?

    /// The Unix group this keychain shares its service with (see ``Sharing``): reads
    /// also find a service another member shares with the group, and writes share the
    /// caller's own service with it. Nil for a private keychain.
    public let accessGroup: AccessGroup?
    /// Only another user's shared service: this uid's. Nil for the caller's own service,
    /// or with ``accessGroup``, whichever member shares it.
    public let owner: UInt32?
    /// Whether a write that first shares the service lets the group change its items.
    public var groupWritable: Bool

    /// A keychain for `service`.
    ///
    /// With `accessGroup` (a Unix group the caller belongs to) or `owner` (a user name or
    /// uid), it reaches a service shared across users: the caller's own if it has one
    /// (writes then share it with the group), else the one a member of the group
    /// shares. Finding another user's service reads /proc/keys, so only such keychains
    /// pay for it.
    ///
    /// - Throws: ``KeychainError/invalidName(kind:problem:)`` for a service name that is
    ///   empty, `.` or `..`, longer than 255 bytes, or contains `/` or NUL;
    ///   ``KeychainError/invalidTimeout(_:)`` for a timeout under a second or over what
    ///   the kernel can hold; ``KeychainError/unknownGroup(_:)``,
    ///   ``KeychainError/notInGroup(_:addedSinceLogin:)`` and
    ///   ``KeychainError/unknownUser(_:)`` for a group or owner that cannot be used.
    public init(
        service: String, accessibility: Accessibility = .whenUnlocked, timeout: Duration? = nil,
        accessGroup: String? = nil, owner: String? = nil, groupWritable: Bool = false
    ) throws(KeychainError) {
        try validateName(service, as: .service)
        if let timeout { _ = try timeoutSeconds(timeout) }
        self.service = service
        self.accessibility = accessibility
        self.timeout = timeout
        self.groupWritable = groupWritable
        if let accessGroup {
            let group = try AccessGroup(named: accessGroup)
            try group.requireCaller()
            self.accessGroup = group
        } else {
            self.accessGroup = nil
        }
        if let owner {
            guard let uid = Accounts.uid(ofUserNameOrNumber: owner) else { throw .unknownUser(owner) }
            self.owner = uid
        } else {
            self.owner = nil
        }
    }

    private init(wildcard: Void) {
        self.service = nil
        self.accessibility = .whenUnlocked
        self.timeout = nil
        self.accessGroup = nil
        self.owner = nil
        self.groupWritable = false
    }

    /// Reads an item from whichever service holds it (the first found, services in
    /// name order). It cannot write or remove.
    public static let anyService = Keychain(wildcard: ())

    /// The keychain of this program: service `$KC_SERVICE`, else the executable's name.
    public static var `default`: Keychain {
        get throws(KeychainError) {
            if let fromEnvironment = getenv("KC_SERVICE").map({ String(cString: $0) }), !fromEnvironment.isEmpty {
                return try Keychain(service: fromEnvironment)
            }
            let executable = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 }
            return try Keychain(service: executable ?? "kc")
        }
    }

    /// This keychain, writing at another accessibility.
    public func accessibility(_ accessibility: Accessibility) -> Keychain {
        var copy = self
        copy.accessibility = accessibility
        return copy
    }

    /// This keychain, giving items it writes a lifetime.
    public func timeout(_ timeout: Duration?) throws(KeychainError) -> Keychain {
        if let timeout { _ = try timeoutSeconds(timeout) }
        var copy = self
        copy.timeout = timeout
        return copy
    }

    // MARK: Reading

    /// Calls `body` with the item's bytes, or returns nil if there is no such item. The
    /// buffer is zeroed afterwards: the secret outlives the call only if `body` copies it.
    ///
    /// The kernel calls are `keyctl_search` (service keyring, then item) and
    /// `keyctl_read`; the caller needs search and read permission, which items made by
    /// kc grant to their owner's uid.
    public func withBytes<R>(forKey key: String, _ body: (UnsafeRawBufferPointer) -> R) throws(KeychainError) -> R? {
        try validateName(key, as: .item)
        guard let located = try locate(key) else { return nil }
        do {
            return try located.item.withPayload(body)
        } catch {
            if error.meansKeyIsGone { return nil }  // removed or expired since the search
            throw KeychainError(error)
        }
    }

    /// The item's bytes, or nil. The caller owns the copy; zero it when done.
    public func data(forKey key: String) throws(KeychainError) -> [UInt8]? {
        try withBytes(forKey: key) { Array($0) }
    }

    /// The item as UTF-8 text, or nil.
    ///
    /// - Throws: ``KeychainError/decodingFailed(item:reason:)`` if the bytes are not UTF-8.
    public func string(forKey key: String) throws(KeychainError) -> String? {
        let text: String?? = try withBytes(forKey: key) { String(validating: $0, as: UTF8.self) }
        guard let text else { return nil }
        guard let text else {
            throw .decodingFailed(item: key, reason: "the value is not valid UTF-8; read it with data(forKey:)")
        }
        return text
    }

    /// Whether the item exists (at any accessibility).
    public func contains(_ key: String) throws(KeychainError) -> Bool {
        try validateName(key, as: .item)
        return try locate(key) != nil
    }

    /// Compares `candidate` with the stored value in time that depends only on their
    /// lengths, not on where they differ (UYLPasswordManager's `validKey`). False if the
    /// item is missing.
    public func matches(_ candidate: some Collection<UInt8>, forKey key: String) throws(KeychainError) -> Bool {
        var probe = Array(candidate)
        defer { probe.overwriteWithZeros() }
        return try withBytes(forKey: key) { stored in constantTimeEquals(stored, probe) } ?? false
    }

    /// ``matches(_:forKey:)`` for text, compared as UTF-8.
    public func matches(_ candidate: String, forKey key: String) throws(KeychainError) -> Bool {
        try matches(candidate.utf8, forKey: key)
    }

    // MARK: Writing

    /// Stores `value` under `key`, replacing any value atomically, at this keychain's
    /// accessibility and timeout. An item has one home: a copy at another accessibility
    /// is removed.
    ///
    /// The kernel calls are `add_key` (creates or updates the `user` key),
    /// `keyctl_setperm` (owner-only) and `keyctl_set_timeout`.
    /// - Throws: ``KeychainError/emptyValue``, ``KeychainError/valueTooLarge(size:)``,
    ///   ``KeychainError/quotaExceeded(_:usage:)`` and the kernel's refusals.
    public func set<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: String) throws(KeychainError) {
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        try copy.withUnsafeBytes { bytes in
            Result { () throws(KeychainError) in try store(bytes, forKey: key) }
        }.get()
    }

    /// Stores text as its UTF-8 bytes. See ``set(_:forKey:)-(Bytes,_)``.
    public func set(_ value: String, forKey key: String) throws(KeychainError) {
        var text = value
        try text.withUTF8 { bytes in
            Result { () throws(KeychainError) in try store(UnsafeRawBufferPointer(bytes), forKey: key) }
        }.get()
    }

    /// Removes the item from wherever it is. Returns whether there was one.
    ///
    /// The kernel call is `keyctl_unlink` from its service keyring.
    @discardableResult
    public func remove(_ key: String) throws(KeychainError) -> Bool {
        guard let service else { throw .serviceRequired }
        try validateName(key, as: .item)
        if let shared = try sharedService(forWriting: true) { return try remove(key, from: shared) }
        var removed = false
        for ring in try existingRings(of: service) {
            do {
                if let item = try ring.serial.search(type: "user", description: key) {
                    try item.unlink(from: ring.serial)
                    removed = true
                }
            } catch {
                if !error.meansKeyIsGone && error.errno != .noSuchFileOrDirectory { throw KeychainError(error) }
            }
        }
        return removed
    }

    /// Removes every item of the service and the service itself, at every accessibility.
    ///
    /// The kernel calls are `keyctl_clear` and `keyctl_unlink` of the service keyrings.
    public func removeAll() throws(KeychainError) {
        guard let service else { throw .serviceRequired }
        if let shared = try sharedService(forWriting: true) { throw .ownerOnly(shared, action: "remove the whole service") }
        for anchor in Anchor.allCases {
            let anchorSerial = try anchor.serial()
            for (name, ring) in try ServiceKeyring.all(in: anchor) where name == service {
                do {
                    try ring.serial.clear()
                    try ring.serial.unlink(from: anchorSerial)
                } catch {
                    if !error.meansKeyIsGone && error.errno != .noSuchFileOrDirectory { throw KeychainError(error) }
                }
            }
        }
    }

    // MARK: Listing

    /// The names of the service's items, sorted, at every accessibility. Cheaper than
    /// ``items()``: a describe per item, no size or expiry.
    public func allKeys() throws(KeychainError) -> [String] {
        var names: [String] = []
        for ring in try listedRings() {
            for (_, info) in try userKeys(in: ring) { names.append(info.description) }
        }
        return names.sorted()
    }

    /// The service's items with what the kernel knows of them, sorted by name.
    /// Expired items are skipped (and unlinked, so the kernel frees them sooner).
    public func items() throws(KeychainError) -> [KeychainItem] {
        var found: [KeychainItem] = []
        var expiries: [KeySerial: UInt64]? = nil
        for ring in try listedRings() {
            for (serial, info) in try userKeys(in: ring) {
                guard let size = try? serial.payloadSize() else { continue }
                if expiries == nil { expiries = ProcKeys.expiries() }
                found.append(KeychainItem(
                    service: ring.service, name: info.description, accessibility: ring.accessibility,
                    serial: serial, size: size, secondsLeft: expiries?[serial],
                    owner: info.uid, sharing: ring.sharing))
            }
        }
        return found.sorted { ($0.name, $0.service) < ($1.name, $1.service) }
    }

    /// The keyrings whose items this keychain lists: the service's (the caller's own, or
    /// the one shared with it), or with ``anyService`` every service's.
    internal func listedRings() throws(KeychainError) -> [ListedRing] {
        guard let service else {
            return try ServiceKeyring.everywhere().map { ListedRing(service: $0.name, ring: $0.ring) }
        }
        if let shared = try sharedService(forWriting: false) {
            return shared.rings.map {
                ListedRing(service: service, serial: $0.serial, accessibility: nil, owner: shared.owner, sharing: shared.sharing)
            }
        }
        return try existingRings(of: service).map { ListedRing(service: service, ring: $0) }
    }

    /// The `user` keys linked in a ring, described. A key that expired is unlinked.
    private func userKeys(in ring: ListedRing) throws(KeychainError) -> [(KeySerial, KeyDescription)] {
        let linked: [KeySerial]
        do { linked = try ring.serial.linkedKeys() } catch {
            if error.meansKeyIsGone { return [] }
            throw KeychainError(error)
        }
        var keys: [(KeySerial, KeyDescription)] = []
        for serial in linked {
            do {
                let info = try serial.describe()
                if info.type == "user" { keys.append((serial, info)) }
            } catch {
                if error.meansKeyIsGone { try? serial.unlink(from: ring.serial) }
            }
        }
        return keys
    }

    /// The names of every service that has a keyring at any accessibility, sorted.
    public static func services() throws(KeychainError) -> [String] {
        Set(try ServiceKeyring.everywhere().map(\.name)).sorted()
    }

    // MARK: Internals

    /// Finds the item: the keychain's own accessibility first (one search for the
    /// service keyring, one for the item), then the other levels.
    internal func locate(_ key: String) throws(KeychainError) -> (ring: KeySerial, item: KeySerial)? {
        guard let service else { return try locateInAnyService(key) }
        if reachesShared, let shared = try sharedService(forWriting: false) { return try locate(key, in: shared) }
        // The common case, kept free of collections: on this path in a short-lived
        // process the runtime's first generic-type lookups cost more than the syscalls.
        let home = try ServiceKeyring.find(service: service, marker: accessibility.marker, under: accessibility.anchor.serial())
        if let home, let item = try search(ring: home, for: key) { return (home, item) }

        var searched: [KeySerial] = home.map { [$0] } ?? []
        for anchor in Anchor.allCases {
            let anchorSerial = try anchor.serial()
            for marker in ServiceMarker.allCases where (anchor, marker) != (accessibility.anchor, accessibility.marker) {
                guard let ring = try ServiceKeyring.find(service: service, marker: marker, under: anchorSerial),
                      !searched.contains(ring)
                else { continue }
                searched.append(ring)
                if let item = try search(ring: ring, for: key) { return (ring, item) }
            }
        }
        return nil
    }

    private func search(ring: KeySerial, for key: String) throws(KeychainError) -> KeySerial? {
        do {
            return try ring.search(type: "user", description: key)
        } catch {
            throw KeychainError(error)
        }
    }

    private func locateInAnyService(_ key: String) throws(KeychainError) -> (ring: KeySerial, item: KeySerial)? {
        for (_, ring) in try ServiceKeyring.everywhere().sorted(by: { $0.name < $1.name }) {
            do {
                if let item = try ring.serial.search(type: "user", description: key) { return (ring.serial, item) }
            } catch {
                if !error.meansKeyIsGone { throw KeychainError(error) }
            }
        }
        return nil
    }

    /// Every keyring of the service that exists, one per (anchor, marker). A search also
    /// descends into keyrings nested in the anchor (the user keyring, or a persistent
    /// keyring someone linked into the session), so a ring counts for an anchor only
    /// if it is linked there directly; it is found again under its own anchor.
    internal func existingRings(of service: String) throws(KeychainError) -> [ServiceKeyring] {
        var rings: [ServiceKeyring] = []
        for anchor in Anchor.allCases {
            let anchorSerial = try anchor.serial()
            var linked: [KeySerial]? = nil
            for marker in ServiceMarker.allCases {
                guard let ring = try ServiceKeyring.find(service: service, marker: marker, under: anchorSerial) else { continue }
                if linked == nil {
                    do { linked = try anchorSerial.linkedKeys() } catch { throw KeychainError(error) }
                }
                if linked?.contains(ring) == true {
                    rings.append(ServiceKeyring(serial: ring, anchor: anchor, marker: marker))
                }
            }
        }
        return rings
    }

    private func store(_ bytes: UnsafeRawBufferPointer, forKey key: String) throws(KeychainError) {
        guard let service else { throw .serviceRequired }
        try validateName(key, as: .item)
        guard !bytes.isEmpty else { throw .emptyValue }
        guard bytes.count <= KeychainError.maximumValueSize else { throw .valueTooLarge(size: bytes.count) }
        let seconds = try timeout.map { (timeout) throws(KeychainError) in try timeoutSeconds(timeout) } ?? 0

        if let shared = try sharedService(forWriting: true) {
            return try update(bytes, forKey: key, in: shared)
        }

        let home = try ServiceKeyring.findOrCreate(service: service, marker: accessibility.marker, anchor: accessibility.anchor)
        let rings = try existingRings(of: service)
        let sharing = try sharingForWrite(rings: rings.map(\.serial))
        do throws(KeyctlError) {
            let item = try KeySerial.add(type: "user", description: key, payload: bytes, into: home)
            do throws(KeyctlError) {
                if let sharing { try Sharing.apply(sharing, to: item) } else { try item.setPermissions(.ownerOnly) }
                // A share or unshare of the service may have run since its sharing was
                // read: the item follows its keyring as it is now. (Unshare changes the
                // keyring before the items, and share goes over the items again after
                // the keyring, so whichever way they interleave every item ends up as
                // its keyring.)
                let now = Sharing(try home.describe())
                if now != sharing { try Sharing.apply(now, to: item) }
                try item.setTimeout(seconds: seconds)
            } catch {
                // Another process removed the item between add_key and here: this set
                // happened, then that removal did (found by the soak test). A removed
                // key is gone (ENOKEY), or still alive but no longer possessed (EACCES).
                let current = try? home.search(type: "user", description: key)
                if error.meansKeyIsGone || current != item { return }
                throw error
            }
        } catch {
            throw KeychainError(error)
        }
        // One home: drop copies left at other accessibilities.
        for ring in rings where ring.serial != home {
            do {
                if let stale = try ring.serial.search(type: "user", description: key) {
                    try stale.unlink(from: ring.serial)
                }
            } catch {
                if !error.meansKeyIsGone && error.errno != .noSuchFileOrDirectory { throw KeychainError(error) }
            }
        }
    }
}

/// The kernel's expiry is whole seconds in an unsigned int; round up so a timeout
/// never ends early.
internal func timeoutSeconds(_ timeout: Duration) throws(KeychainError) -> UInt32 {
    let (seconds, attoseconds) = timeout.components
    let whole = attoseconds > 0 ? seconds + 1 : seconds
    guard whole >= 1, whole <= Int64(UInt32.max) else {
        throw .invalidTimeout("\(timeout)")
    }
    return UInt32(whole)
}

/// Equality in time that depends only on the lengths.
internal func constantTimeEquals(_ lhs: UnsafeRawBufferPointer, _ rhs: [UInt8]) -> Bool {
    var difference = UInt8(truncatingIfNeeded: lhs.count ^ rhs.count)
    let common = Swift.min(lhs.count, rhs.count)
    for index in 0..<common { difference |= lhs[index] ^ rhs[index] }
    if lhs.count != rhs.count { difference |= 1 }
    return difference == 0
}

extension Array where Element == UInt8 {
    /// Overwrites every byte with zero, for buffers that held a secret.
    public mutating func overwriteWithZeros() {
        for index in indices { self[index] = 0 }
    }
}
