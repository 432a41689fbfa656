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
    /// The service whose items this keychain reads and writes, byte for byte; nil for
    /// ``anyService``.
    public let serviceName: KeyName?
    /// `kc:SERVICE`, the description of the service's keyrings of portable items (the
    /// default home), made once here rather than at every read; nil for ``anyService``.
    internal let portableRingDescription: KeyName?
    /// The service's name for people (see ``KeyName/description``); nil for ``anyService``.
    public var service: String? { serviceName?.description }
    /// Where ``set(_:forKey:)-(Bytes,_)`` puts items. Reads find an item at any level.
    ///
    /// Unless it was chosen (`Keychain(service:accessibility:)`,
    /// ``accessibility(_:)``, ``thisDeviceOnly(_:)``, or set here), a new value for an
    /// existing item keeps the item's level and device-only flag, and a new item goes
    /// to ``Accessibility/whenUnlocked``: changing a secret that a cron job reads at
    /// `.always` does not move it into the login session. See ``choosesAccessibility``.
    public var accessibility: Accessibility {
        get { Accessibility(level: chosenLevel ?? .whenUnlocked, thisDeviceOnly: chosenThisDeviceOnly ?? false) }
        set {
            chosenLevel = newValue.level
            chosenThisDeviceOnly = newValue.isThisDeviceOnly
        }
    }
    /// How long items written through this keychain live. Nil: a new value for an
    /// existing item keeps its deadline (or none), and a new item has no expiry.
    /// The kernel keeps whole seconds, rounded up.
    public var timeout: Duration?

    /// The level writes put items at, if chosen; nil keeps an existing item's.
    private var chosenLevel: Accessibility.Level?
    /// Whether written items are device-only, if chosen; nil keeps an existing item's.
    private var chosenThisDeviceOnly: Bool?

    /// Whether this keychain's writes put an existing item at ``accessibility`` (it was
    /// chosen, whole or in part), rather than keeping the item's own level and
    /// device-only flag.
    public var choosesAccessibility: Bool { chosenLevel != nil || chosenThisDeviceOnly != nil }

    /// The Unix group this keychain shares its service with (see ``Sharing``): reads
    /// also find a service another member shares with the group, and writes share the
    /// caller's own service with it. Nil for a private keychain.
    public let accessGroup: AccessGroup?
    /// Only another user's shared service: this uid's. Nil for the caller's own service,
    /// or with ``accessGroup``, whichever member shares it.
    public let owner: UInt32?
    /// Whether a write that first shares the service lets the group change its items.
    public var groupWritable: Bool
    /// Whether items written through this keychain stay in the kernel only: with a
    /// ``Vault``, other writes are also saved to it to come back after a reboot; an
    /// ephemeral write is not (and removes a saved copy), as kc behaves without a vault.
    public var isEphemeral: Bool = false

    /// A keychain for `service`.
    ///
    /// With an `accessibility`, writes put items there (an existing item moves to it);
    /// without one, an existing item keeps its level and device-only flag, and new
    /// items go to ``Accessibility/whenUnlocked``. Likewise a `timeout` gives every
    /// written item that lifetime; without one an existing item keeps its deadline.
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
        service: some KeyNameConvertible, accessibility: Accessibility? = nil, timeout: Duration? = nil,
        accessGroup: String? = nil, owner: String? = nil, groupWritable: Bool = false
    ) throws(KeychainError) {
        let service = service.keyName
        try validateName(service, as: .service)
        if let timeout { _ = try timeoutSeconds(timeout) }
        self.serviceName = service
        self.portableRingDescription = ServiceMarker.portable.keyringDescription(for: service)
        self.chosenLevel = accessibility?.level
        self.chosenThisDeviceOnly = accessibility?.isThisDeviceOnly
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
        self.serviceName = nil
        self.portableRingDescription = nil
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
            if let fromEnvironment = getenv("KC_SERVICE").map({ KeyName(cString: $0) }), !fromEnvironment.bytes.isEmpty {
                return try Keychain(service: fromEnvironment)
            }
            let executable = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 }
            return try Keychain(service: executable ?? "kc")
        }
    }

    /// This keychain, writing at another accessibility: its level and device-only flag,
    /// for new items and existing ones alike.
    public func accessibility(_ accessibility: Accessibility) -> Keychain {
        var copy = self
        copy.accessibility = accessibility
        return copy
    }

    /// This keychain, writing items device-only (true) or not, at the level chosen with
    /// ``accessibility(_:)`` if any, else at an existing item's own level (a new item:
    /// ``Accessibility/whenUnlocked``).
    public func thisDeviceOnly(_ thisDeviceOnly: Bool = true) -> Keychain {
        var copy = self
        copy.chosenThisDeviceOnly = thisDeviceOnly
        return copy
    }

    /// This keychain, writing items to the kernel only (true) or to the vault as well.
    public func ephemeral(_ ephemeral: Bool = true) -> Keychain {
        var copy = self
        copy.isEphemeral = ephemeral
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
    ///
    /// A key that went between the search and the read was removed, expired, or replaced
    /// by a new key (a write of a deadline, of the empty value or of one NUL byte makes
    /// one): the item is looked up again, so a replaced item is read, never "no item".
    public func withBytes<R>(forKey key: some KeyNameConvertible, _ body: (UnsafeRawBufferPointer) -> R) throws(KeychainError) -> R? {
        let key = key.keyName
        try validateName(key, as: .item)
        for _ in 1...3 {
            guard let located = try locate(key, in: resolve(forWriting: false), reloading: true, forReading: true) else { return nil }
            // A buffer malloc keeps at hand (its per-thread cache serves up to 1032
            // bytes): most secrets fit; a longer one costs a second read.
            if let read = try Self.read(located, { (item) throws(KeyctlError) in try item.withValue(sizeHint: 1024, body) }) { return read }
        }
        return nil  // removed or expired since each search
    }

    /// The one read of a found item's key for ``withBytes(forKey:_:)`` and
    /// ``size(ofItem:)``: nil if the key went since it was found (look it up again),
    /// and then, or on a refusal, the recent owner check of its keyring is forgotten.
    @inline(__always)
    internal static func read<R>(_ located: LocatedItem, _ call: (KeySerial) throws(KeyctlError) -> R) throws(KeychainError) -> R? {
        do throws(KeyctlError) {
            return try call(located.item)
        } catch {
            RecentOwnerChecks.shared.forget(located.ring)
            if error.meansKeyIsGone { return nil }
            throw KeychainError(error)
        }
    }

    /// The item's bytes, or nil. The caller owns the copy; zero it when done.
    public func data(forKey key: some KeyNameConvertible) throws(KeychainError) -> [UInt8]? {
        try withBytes(forKey: key) { Array($0) }
    }

    /// The item as UTF-8 text, or nil.
    ///
    /// - Throws: ``KeychainError/decodingFailed(item:reason:)`` if the bytes are not UTF-8.
    public func string(forKey key: some KeyNameConvertible) throws(KeychainError) -> String? {
        let text: String?? = try withBytes(forKey: key) { String(validating: $0, as: UTF8.self) }
        guard let text else { return nil }
        guard let text else {
            throw .decodingFailed(item: key.keyName.description, reason: "the value is not valid UTF-8; read it with data(forKey:)")
        }
        return text
    }

    /// Whether the item exists (at any accessibility).
    public func contains(_ key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        let key = key.keyName
        try validateName(key, as: .item)
        return try locate(key, in: resolve(forWriting: false)) != nil
    }

    /// Compares `candidate` with the stored value in time that depends only on their
    /// lengths, not on where they differ (UYLPasswordManager's `validKey`). False if the
    /// item is missing.
    public func matches(_ candidate: some Collection<UInt8>, forKey key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        var probe = Array(candidate)
        defer { probe.overwriteWithZeros() }
        return try withBytes(forKey: key) { stored in constantTimeEquals(stored, probe) } ?? false
    }

    /// ``matches(_:forKey:)`` for text, compared as UTF-8.
    public func matches(_ candidate: String, forKey key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        try matches(candidate.utf8, forKey: key)
    }

    // MARK: Writing

    /// Stores `value` under `key`, replacing any value atomically. An item has one
    /// home: a copy at another accessibility is removed.
    ///
    /// A new value for an existing item keeps what the item is (its level, device-only
    /// flag and deadline), as a save through the mount does, except what this keychain
    /// chose: an ``accessibility`` given to it moves the item there, a ``timeout`` gives
    /// it a new deadline. A new item takes ``accessibility`` and ``timeout``.
    ///
    /// The kernel calls are `add_key` (creates or updates the `user` key),
    /// `keyctl_setperm` (owner-only) and `keyctl_set_timeout`.
    /// - Throws: ``KeychainError/valueTooLarge(size:)``,
    ///   ``KeychainError/quotaExceeded(_:usage:)`` and the kernel's refusals.
    public func set<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: some KeyNameConvertible) throws(KeychainError) {
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        try store(copy, forKey: key.keyName, deadline: writtenDeadline)
    }

    /// Stores `value` expiring at `deadline` exactly (nil: never), whatever deadline an
    /// existing item had: a copy of an item keeps the original's deadline. Its level is
    /// as for ``set(_:forKey:)-(Bytes,_)``.
    public func set<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: some KeyNameConvertible, until deadline: Deadline?) throws(KeychainError) {
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        try store(copy, forKey: key.keyName, deadline: .exactly(deadline))
    }

    /// Stores text as its UTF-8 bytes. See ``set(_:forKey:)-(Bytes,_)``.
    public func set(_ value: String, forKey key: some KeyNameConvertible) throws(KeychainError) {
        var copy = Array(value.utf8)
        defer { copy.overwriteWithZeros() }
        try store(copy, forKey: key.keyName, deadline: writtenDeadline)
    }

    /// ``set(_:forKey:)-(Bytes,_)`` for a caller that holds the vault's lock: the
    /// `alongside` of ``Vault/updateDocument(_:alongside:_:)`` passes the vault it was
    /// given, and the write is journaled under that lock (it would wait for ever for
    /// it otherwise). Nil: as ``set(_:forKey:)-(Bytes,_)``.
    public func set<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: some KeyNameConvertible, holding vault: Vault?) throws(KeychainError) {
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        try store(copy, forKey: key.keyName, deadline: writtenDeadline, holding: vault)
    }

    /// Removes the item from wherever it is. Returns whether there was one (in the
    /// kernel, or saved in the vault while it is locked).
    ///
    /// The kernel call is `keyctl_unlink` from its service keyring.
    @discardableResult
    public func remove(_ key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        try remove(key, holding: nil)
    }

    /// ``remove(_:)`` for a caller that holds the vault's lock (see
    /// ``set(_:forKey:holding:)``).
    @discardableResult
    public func remove(_ key: some KeyNameConvertible, holding vault: Vault?) throws(KeychainError) -> Bool {
        let key = key.keyName
        try validateName(key, as: .item)
        switch try resolve(forWriting: true) {
        case .anyService:
            throw .serviceRequired
        case .shared(let shared):
            try shared.refuseRemoval()
        case .own(let own):
            let journal = try Self.journal(holding: vault)
            return try journal.withLock { journal throws(KeychainError) in
                let kept = journal.keeps(key, in: own.name)
                let changes: [ItemChange] = kept ? [.removed(service: own.name, name: key)] : []
                return try journal.record(changes) { () throws(KeychainError) in try own.remove(key) } || kept
            }
        }
    }

    /// Removes every item of the service and the service itself, at every accessibility.
    ///
    /// The kernel calls are `keyctl_clear` and `keyctl_unlink` of the service keyrings.
    public func removeAll() throws(KeychainError) {
        switch try resolve(forWriting: true) {
        case .anyService:
            throw .serviceRequired
        case .shared(let shared):
            throw .ownerOnly(shared, action: "remove the whole service")
        case .own(let own):
            let journal = try Self.journal()
            let changes: [ItemChange] = journal.persists ? [.removedService(own.name)] : []
            try journal.record(changes) { () throws(KeychainError) in try own.removeAll() }
        }
    }

    // MARK: Listing

    /// The names of the service's items as text, at every accessibility, sorted by their
    /// bytes. Like every listing, with the vault unlocked it first loads the items the
    /// vault keeps for this session that the kernel lacks, as a read that misses does. A name that is not UTF-8 shows its other bytes as U+FFFD and cannot be used
    /// to read the item: ``allKeyNames()`` has the exact names.
    public func allKeys() throws(KeychainError) -> [String] {
        try allKeyNames().map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    /// The exact names of the service's items, at every accessibility, sorted by their
    /// bytes. Cheaper than ``items()``: a describe per item, no size or expiry.
    public func allKeyNames() throws(KeychainError) -> [KeyName] {
        try allKeyNames(journal: nil)
    }

    /// ``allKeyNames()``, asking `journal` (one a write holds the lock of) what to load.
    internal func allKeyNames(journal: (any ItemJournal)?) throws(KeychainError) -> [KeyName] {
        let rings = try resolve(forWriting: false)
        return try Self.listing(rings, journal: journal, names: { $0 }) { () throws(KeychainError) in try rings.itemNames(checkingSize: false) }
    }

    /// The names ``items()`` lists, sorted, without the deadlines: no read of /proc/keys.
    public func itemNames() throws(KeychainError) -> [KeyName] {
        let rings = try resolve(forWriting: false)
        return try Self.listing(rings, names: { $0 }) { () throws(KeychainError) in try rings.itemNames(checkingSize: true) }
    }

    /// The service's items with what the kernel knows of them, sorted by name.
    /// Expired items are skipped (and unlinked, so the kernel frees them sooner).
    public func items() throws(KeychainError) -> [KeychainItem] {
        let rings = try resolve(forWriting: false)
        return try Self.listing(rings, names: { $0.map(\.name) }) { () throws(KeychainError) in try rings.items() }
    }

    /// The names of every service that has a keyring at any accessibility, sorted by
    /// their bytes. With the vault unlocked, a service it keeps items of for this
    /// session that the kernel lacks is loaded first, as ``allKeyNames()`` does.
    public static func services() throws(KeychainError) -> [KeyName] {
        let listed = try Placement.serviceNames()
        let loaded = (try? Journals.forWriting())?.loadMissingServices(listed: listed) ?? false
        return loaded ? try Placement.serviceNames() : listed
    }

    /// A listing of the caller's own service shows what the vault holds for this
    /// session, as a read does: with the vault unlocked, items it keeps that the
    /// kernel's listing lacks (a new login session, an expired persistent keyring) are
    /// loaded (``ItemJournal/loadMissing(of:listed:)``) and the service is listed again.
    /// `journal`: the one a caller already holds (a write under its lock), else the
    /// write's journal is looked up, for the caller's own service only; one that cannot
    /// be used loads nothing.
    internal static func listing<Listed>(_ rings: ServiceRings, journal: (any ItemJournal)? = nil, names: (Listed) -> [KeyName],
                                         _ list: () throws(KeychainError) -> Listed) throws(KeychainError) -> Listed {
        let listed = try list()
        guard case .own(let own) = rings, let journal = journal ?? (try? Journals.forWriting()),
              journal.loadMissing(of: own.name, listed: names(listed)) else { return listed }
        return try list()
    }

    // MARK: Internals

    /// Finds the item where this keychain resolved to. With `reloading` (a read), an
    /// item of the caller's own that the kernel misses but the vault holds is loaded
    /// back first: the journal for reading is looked up only then (see
    /// ``ItemJournal/reloadIfKept(_:in:)``), so a read that finds its item pays nothing for it.
    internal func locate(_ key: KeyName, in rings: ServiceRings, reloading: Bool = false, forReading: Bool = false) throws(KeychainError) -> LocatedItem? {
        switch rings {
        case .anyService:
            return try Placement.locateInAnyService(key)
        case .shared(let shared):
            return try shared.locate(key, group: accessGroup?.name)
        case .own(let own):
            if let found = try own.locate(key, forReading: forReading) { return found }
            guard reloading, try Journals.forReading().reloadIfKept(key, in: own.name) else { return nil }
            return try own.locate(key, forReading: forReading)
        }
    }

    /// The journal this keychain's writes go through: the vault if there is one, else
    /// none; `held` if that is the vault and the caller holds its lock.
    internal static func journal(holding held: Vault? = nil) throws(KeychainError) -> any ItemJournal {
        try Journals.forWriting(holding: held)
    }

    /// The deadline a write gives an item: a timeout's from now, else an existing item's own.
    private var writtenDeadline: WrittenDeadline {
        get throws(KeychainError) {
            guard let timeout else { return .existingItems }
            return .exactly(Deadline.fromNow(seconds: UInt64(try timeoutSeconds(timeout))))
        }
    }

    /// Stores the value: stage in the journal (unless ephemeral: then any saved copy
    /// goes), change the kernel, commit. An existing item keeps what this keychain did
    /// not choose of its level, device-only flag and deadline; when it keeps all three,
    /// this is the mount's save (``replaceExisting(_:forKey:of:in:)``).
    internal func store(_ value: [UInt8], forKey key: KeyName, deadline: WrittenDeadline, holding held: Vault? = nil) throws(KeychainError) {
        try validateName(key, as: .item)
        guard value.count <= KeychainError.maximumValueSize else { throw .valueTooLarge(size: value.count) }
        switch try resolve(forWriting: true) {
        case .anyService:
            throw .serviceRequired
        case .shared(let shared):
            guard shared.sharing.isGroupWritable else { throw .sharedReadOnly(shared) }
            if timeout != nil { throw .ownerOnly(shared, action: "set an item's lifetime") }
            if choosesAccessibility { throw .ownerOnly(shared, action: "choose an item's level or device-only flag") }
            try value.withValueBytes { bytes throws(KeychainError) in try shared.update(bytes, forKey: key, group: accessGroup?.name) }
        case .own(let own):
            let journal = try Self.journal(holding: held)
            try journal.withLock { journal throws(KeychainError) in
                var home = own.home
                var effective: Deadline? = nil
                if case .exactly(let given) = deadline { effective = given }
                let keepsDeadline = if case .existingItems = deadline { true } else { false }
                let keepsAll = !choosesAccessibility && keepsDeadline
                // Everything kept: the mount's save. It found no item if it returns false.
                let saved = keepsAll && !isEphemeral && accessGroup == nil
                // Where the item is looked for once and found nowhere, the service's
                // keyrings that search went through plan the write (no second probe).
                var probed: [ServiceKeyring]? = nil
                if saved, try Self.replaceExisting(value, forKey: key, of: own, in: journal, savingUnkept: true, probed: &probed) { return }
                if chosenLevel == nil || chosenThisDeviceOnly == nil || keepsDeadline {
                    var existing = saved ? nil : try own.locate(key, exactLevel: true, probed: &probed)
                    // A saved item the kernel lacks (a new login session, a reboot): with
                    // the vault unlocked it is loaded first, as a read would, so that what
                    // this write keeps of it is what it was; locked, its file's level is kept.
                    let keptLevels = existing == nil ? journal.keptLevels(of: key, in: own.name) : []
                    if !keptLevels.isEmpty, (try? journal.reloadIfKept(key, in: own.name)) == true {
                        probed = nil
                        existing = try own.locate(key, exactLevel: true, probed: &probed)
                    }
                    if existing != nil { probed = nil }
                    if let level = existing?.accessibility ?? keptLevels.first {
                        home = Accessibility(level: chosenLevel ?? level.level, thisDeviceOnly: chosenThisDeviceOnly ?? level.isThisDeviceOnly)
                    }
                    if keepsDeadline, let existing { effective = existing.shownDeadline }
                }
                let target = own.at(home)
                var changes: [ItemChange] = []
                if isEphemeral {
                    if journal.keeps(key, in: own.name) { changes = [.removed(service: own.name, name: key)] }
                } else if journal.persists {
                    changes = [.saved(JournaledItem(service: own.name, name: key, accessibility: home, deadline: effective, value: value))]
                }
                try journal.record(changes) { () throws(KeychainError) in
                    try target.storeCopy(value, forKey: key, until: effective, absentFrom: probed)
                }
            }
        }
    }
}

/// The deadline a write gives an item.
internal enum WrittenDeadline {
    /// An existing item's own (none for a new item).
    case existingItems
    /// This one exactly; nil for none.
    case exactly(Deadline?)
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
    /// `withUnsafeBytes` for a body that throws ``KeychainError`` (the standard one
    /// rethrows untyped).
    internal func withValueBytes<R>(_ body: (UnsafeRawBufferPointer) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try withUnsafeBytes { bytes in Result { () throws(KeychainError) in try body(bytes) } }.get()
    }

    /// Overwrites every byte with zero, for buffers that held a secret.
    public mutating func overwriteWithZeros() {
        for index in indices { self[index] = 0 }
    }
}
