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
    /// The service's name for people (see ``KeyName/description``); nil for ``anyService``.
    public var service: String? { serviceName?.description }
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
    /// Whether items written through this keychain stay in the kernel only: with a
    /// ``Vault``, other writes are also saved to it to come back after a reboot; an
    /// ephemeral write is not (and removes a saved copy), as kc behaves without a vault.
    public var isEphemeral: Bool = false

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
        service: some KeyNameConvertible, accessibility: Accessibility = .whenUnlocked, timeout: Duration? = nil,
        accessGroup: String? = nil, owner: String? = nil, groupWritable: Bool = false
    ) throws(KeychainError) {
        let service = service.keyName
        try validateName(service, as: .service)
        if let timeout { _ = try timeoutSeconds(timeout) }
        self.serviceName = service
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
        self.serviceName = nil
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
            if let fromEnvironment = getenv("KC_SERVICE").map({ KeyName(cString: $0) }), !fromEnvironment.bytes.isEmpty {
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
    public func withBytes<R>(forKey key: some KeyNameConvertible, _ body: (UnsafeRawBufferPointer) -> R) throws(KeychainError) -> R? {
        let key = key.keyName
        try validateName(key, as: .item)
        let scope = try resolve(forWriting: false)
        var found = try locate(key, in: scope)
        if found == nil { found = try reloadedFromVault(key, in: scope) }
        guard let located = found else { return nil }
        do {
            return try located.item.withPayload(body)
        } catch {
            if error.meansKeyIsGone { return nil }  // removed or expired since the search
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

    /// Stores `value` under `key`, replacing any value atomically, at this keychain's
    /// accessibility and timeout. An item has one home: a copy at another accessibility
    /// is removed.
    ///
    /// The kernel calls are `add_key` (creates or updates the `user` key),
    /// `keyctl_setperm` (owner-only) and `keyctl_set_timeout`.
    /// - Throws: ``KeychainError/emptyValue``, ``KeychainError/valueTooLarge(size:)``,
    ///   ``KeychainError/quotaExceeded(_:usage:)`` and the kernel's refusals.
    public func set<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: some KeyNameConvertible) throws(KeychainError) {
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        let key = key.keyName
        try copy.withUnsafeBytes { bytes in
            Result { () throws(KeychainError) in try store(bytes, forKey: key) }
        }.get()
    }

    /// Stores `value` at this keychain's accessibility, expiring at `deadline` (or with
    /// nil, as ``timeout``): a copy of an item keeps the original's deadline exactly.
    public func set<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: some KeyNameConvertible, until deadline: Deadline?) throws(KeychainError) {
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        try store(copy, forKey: key.keyName, until: deadline)
    }

    /// Stores text as its UTF-8 bytes. See ``set(_:forKey:)-(Bytes,_)``.
    public func set(_ value: String, forKey key: some KeyNameConvertible) throws(KeychainError) {
        var text = value
        let key = key.keyName
        try text.withUTF8 { bytes in
            Result { () throws(KeychainError) in try store(UnsafeRawBufferPointer(bytes), forKey: key) }
        }.get()
    }

    /// Removes the item from wherever it is. Returns whether there was one.
    ///
    /// The kernel call is `keyctl_unlink` from its service keyring.
    @discardableResult
    public func remove(_ key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        let key = key.keyName
        try validateName(key, as: .item)
        switch try resolve(forWriting: true) {
        case .anyService:
            throw .serviceRequired
        case .shared(let shared):
            return try remove(key, from: shared)
        case .own(let service):
            return try changingVault { () throws(KeychainError) in
                var removed: [KeySerial] = []
                for copy in try copies(of: key, in: ServiceKeyring.rings(of: service, startingWith: accessibility)) {
                    if try unlinkIgnoringGone(copy.item, from: copy.ring.serial) { removed.append(copy.item) }
                }
                DeadlineRecords.forget(removed)
                return !removed.isEmpty
            } then: { vault, removed in
                vault.removeItem(key, in: service) || removed
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
        case .own(let service):
            try changingVault { () throws(KeychainError) in
                for ring in try ServiceKeyring.rings(of: service, startingWith: accessibility) {
                    DeadlineRecords.forget((try? ring.serial.linkedKeys()) ?? [])
                    do throws(KeyctlError) {
                        _ = try unlessGone { () throws(KeyctlError) in try ring.serial.clear() }
                    } catch {
                        throw KeychainError(error)
                    }
                    _ = try unlinkIgnoringGone(ring.serial, from: ring.anchor.serial())
                }
            } then: { vault, _ in
                vault.removeService(service)
            }
        }
    }

    // MARK: Listing

    /// The names of the service's items as text, at every accessibility, sorted by their
    /// bytes. A name that is not UTF-8 shows its other bytes as U+FFFD and cannot be used
    /// to read the item: ``allKeyNames()`` has the exact names.
    public func allKeys() throws(KeychainError) -> [String] {
        try allKeyNames().map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    /// The exact names of the service's items, at every accessibility, sorted by their
    /// bytes. Cheaper than ``items()``: a describe per item, no size or expiry.
    public func allKeyNames() throws(KeychainError) -> [KeyName] {
        var names: [KeyName] = []
        for ring in try listedRings() {
            for (_, info) in try userKeys(in: ring) { names.append(info.description) }
        }
        return names.sorted()
    }

    /// The names ``items()`` lists, sorted, without the deadlines: no read of /proc/keys.
    public func itemNames() throws(KeychainError) -> [KeyName] {
        var names: [KeyName] = []
        for ring in try listedRings() {
            for (serial, info) in try userKeys(in: ring) where Self.size(of: serial) != nil { names.append(info.description) }
        }
        return names.sorted()
    }

    /// The service's items with what the kernel knows of them, sorted by name.
    /// Expired items are skipped (and unlinked, so the kernel frees them sooner).
    public func items() throws(KeychainError) -> [KeychainItem] {
        var found: [KeychainItem] = []
        var expiries: [KeySerial: ProcKeysEntry.Expiry]? = nil
        for ring in try listedRings() {
            for (serial, info) in try userKeys(in: ring) {
                guard let size = Self.size(of: serial) else { continue }
                if expiries == nil { expiries = DeadlineRecords.shownExpiries() }
                let deadline = expiries?[serial].flatMap { DeadlineRecords.deadline(of: serial, shown: $0) }
                found.append(KeychainItem(
                    service: ring.service, name: info.description, accessibility: ring.accessibility,
                    serial: serial, size: size, deadline: deadline,
                    owner: info.uid, sharing: ring.sharing))
            }
        }
        return found.sorted { ($0.name, $0.service) < ($1.name, $1.service) }
    }

    /// The keyrings whose items this keychain lists: the service's (the caller's own, or
    /// the one shared with it), or with ``anyService`` every service's.
    internal func listedRings() throws(KeychainError) -> [ListedRing] {
        switch try resolve(forWriting: false) {
        case .anyService:
            return try ServiceKeyring.everywhere().map { ListedRing(service: $0.name, ring: $0.ring) }
        case .shared(let shared):
            return shared.rings.map {
                ListedRing(service: shared.service, serial: $0.serial, accessibility: nil, owner: shared.owner, sharing: shared.sharing)
            }
        case .own(let service):
            return try ServiceKeyring.rings(of: service, startingWith: accessibility).map { ListedRing(service: service, ring: $0) }
        }
    }

    /// The size of a listed item; nil if it vanished. Like ``search(ring:for:)``, a key
    /// readable only by a possessor makes the user keyring possessed and is read again.
    private static func size(of item: KeySerial) -> Int? {
        if let size = try? item.payloadSize() { return size }
        guard (try? Anchor.user.serialForWriting()) != nil else { return nil }
        return try? item.payloadSize()
    }

    /// The `user` keys linked in a ring, described. A key that expired is unlinked. Only
    /// the ring owner's keys are the service's items: a key another uid linked there is
    /// skipped (and unlinked from the caller's own ring; a view of any key the caller
    /// cannot describe is skipped as well).
    private func userKeys(in ring: ListedRing) throws(KeychainError) -> [(KeySerial, KeyDescription)] {
        var keys: [(KeySerial, KeyDescription)] = []
        do throws(KeyctlError) {
            for serial in try unlessGone({ () throws(KeyctlError) in try ring.serial.linkedKeys() }) ?? [] {
                if let info = try? serial.describe() {
                    guard info.uid == ring.owner else {
                        if ring.owner == geteuid() { try? serial.unlink(from: ring.serial) }
                        continue
                    }
                    if info.type == "user" { keys.append((serial, info)) }
                } else {
                    try? serial.unlink(from: ring.serial)  // expired: let the kernel free it sooner
                }
            }
        } catch {
            throw KeychainError(error)
        }
        return keys
    }

    /// The names of every service that has a keyring at any accessibility, sorted by
    /// their bytes.
    public static func services() throws(KeychainError) -> [KeyName] {
        Array(Set(try ServiceKeyring.everywhere().map(\.name))).sorted()
    }

    // MARK: Internals

    /// Where this keychain's items live, decided once per call: every public method
    /// resolves, then acts on what it got.
    internal enum Scope {
        /// The caller's own service (it may not exist yet).
        case own(KeyName)
        /// Another user's service, shared with the caller through a group.
        case shared(SharedService)
        /// ``Keychain/anyService``: whichever of the caller's services holds the item.
        case anyService
    }

    internal func resolve(forWriting: Bool) throws(KeychainError) -> Scope {
        guard let service = serviceName else { return .anyService }
        if reachesShared, let shared = try sharedService(forWriting: forWriting) { return .shared(shared) }
        return .own(service)
    }

    /// Finds the item: in its own service, the keychain's own accessibility first (one
    /// search for the service keyring, one for the item), then the other levels.
    internal func locate(_ key: KeyName, in scope: Scope) throws(KeychainError) -> (ring: KeySerial, item: KeySerial)? {
        switch scope {
        case .anyService:
            return try locateInAnyService(key)
        case .shared(let shared):
            return try locate(key, in: shared)
        case .own(let service):
            // The common case, kept free of collections: on this path in a short-lived
            // process the runtime's first generic-type lookups cost more than the syscalls.
            var home: KeySerial? = nil
            if let anchor = try accessibility.anchor.serialForReading() {
                home = try ServiceKeyring.find(service: service, marker: accessibility.marker, under: anchor)
            }
            if let home, let item = try search(ring: home, for: key) { return (home, item) }
            for ring in try ServiceKeyring.rings(of: service, startingWith: accessibility) where ring.serial != home {
                if let item = try search(ring: ring.serial, for: key) { return (ring.serial, item) }
            }
            return nil
        }
    }

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
    internal func search(ring: KeySerial, for key: KeyName) throws(KeychainError) -> KeySerial? {
        do {
            return try ring.search(type: "user", description: key)
        } catch where error.errno == .permissionDenied {
            guard (try? Anchor.user.serialForWriting()) != nil else { throw KeychainError(error) }
            do {
                return try ring.search(type: "user", description: key)
            } catch where error.errno == .permissionDenied {
                do {
                    return try ownLinkedKey(type: "user", description: key, in: ring, unlinkingOthers: true)
                } catch {
                    throw KeychainError(error)
                }
            } catch {
                throw KeychainError(error)
            }
        } catch {
            throw KeychainError(error)
        }
    }

    private func locateInAnyService(_ key: KeyName) throws(KeychainError) -> (ring: KeySerial, item: KeySerial)? {
        for (_, ring) in try ServiceKeyring.everywhere().sorted(by: { $0.name < $1.name }) {
            if let item = try search(ring: ring.serial, for: key) { return (ring.serial, item) }
        }
        return nil
    }

    /// Every key named `key` in the rings, with its ring. Normally one; two while
    /// writers at two levels race (see ``store(_:forKey:until:)``).
    internal func copies(of key: KeyName, in rings: [ServiceKeyring]) throws(KeychainError) -> [(ring: ServiceKeyring, item: KeySerial)] {
        var found: [(ring: ServiceKeyring, item: KeySerial)] = []
        for ring in rings {
            if let item = try search(ring: ring.serial, for: key) { found.append((ring, item)) }
        }
        return found
    }

    /// Stores the value at this keychain's accessibility, with the deadline given, else
    /// this keychain's timeout, else none.
    ///
    /// An item is one kernel key. If it exists at another level, that same key is moved
    /// here (`keyctl_move`) and updated, so it is never absent in between. Writers at two
    /// levels racing on a new item can each add a key; then every writer, after its own
    /// write, keeps the copy with the lowest serial and unlinks the others. Every unlink
    /// is justified by a lower serial that existed when it was decided, so the lowest
    /// never goes: some item always survives, and exactly one is left when they are done.
    internal func store(_ value: [UInt8], forKey key: KeyName, until deadline: Deadline?) throws(KeychainError) {
        try value.withUnsafeBytes { bytes in
            Result { () throws(KeychainError) in try store(bytes, forKey: key, until: deadline) }
        }.get()
    }

    /// With a vault (and unless ephemeral), the item's file is written first, to a
    /// temporary file flushed to disk (a full disk fails here, before the kernel
    /// changed), then the kernel, then the file is renamed into place: a crash leaves
    /// the old value or the new one, never neither. All under the vault's lock, so the
    /// last writer wins in both.
    internal func store(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, until deadline: Deadline? = nil) throws(KeychainError) {
        guard let vault = try Vault.forWriting(), case .own(let service) = try resolve(forWriting: true) else {
            return try storeInKernel(bytes, forKey: key, until: deadline)
        }
        try validateName(key, as: .item)
        guard !bytes.isEmpty else { throw .emptyValue }
        guard bytes.count <= KeychainError.maximumValueSize else { throw .valueTooLarge(size: bytes.count) }
        let timeoutDeadline = try timeout.map { (timeout) throws(KeychainError) in Deadline.fromNow(seconds: UInt64(try timeoutSeconds(timeout))) }
        let effective = deadline ?? timeoutDeadline
        try vault.directory.withLock { () throws(KeychainError) in
            if isEphemeral {
                try VaultHooks.suspended { () throws(KeychainError) in try storeInKernel(bytes, forKey: key, until: effective) }
                vault.removeItem(key, in: service)
                return
            }
            var record = VaultRecord(service: service, name: key, accessibility: accessibility, deadline: effective, value: Array(bytes))
            defer { record.value.overwriteWithZeros() }
            let staged = try vault.stage(record)
            do throws(KeychainError) {
                try VaultHooks.suspended { () throws(KeychainError) in try storeInKernel(bytes, forKey: key, until: effective) }
            } catch {
                vault.directory.remove(staged.path)
                throw error
            }
            try vault.commit(staged, for: record)
        }
    }

    /// The kernel part of ``store(_:forKey:until:)``.
    private func storeInKernel(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, until deadline: Deadline?) throws(KeychainError) {
        try validateName(key, as: .item)
        guard !bytes.isEmpty else { throw .emptyValue }
        guard bytes.count <= KeychainError.maximumValueSize else { throw .valueTooLarge(size: bytes.count) }
        var seconds = try timeout.map { (timeout) throws(KeychainError) in try timeoutSeconds(timeout) } ?? 0
        if let deadline { seconds = UInt32(clamping: max(deadline.secondsLeft, 1)) }

        let service: KeyName
        switch try resolve(forWriting: true) {
        case .anyService: throw .serviceRequired
        case .shared(let shared): return try update(bytes, forKey: key, in: shared)
        case .own(let own): service = own
        }

        let (home, rings) = try ServiceKeyring.rings(of: service, home: accessibility)
        let sharing = try sharingForWrite(rings: rings.map(\.serial))
        let previous = try gather(key, into: home, from: rings)
        do throws(KeyctlError) {
            let item: KeySerial
            if seconds > 0 {
                // Made whole with its deadline before it is placed: an update would
                // leave the value without expiry until the timeout is set again.
                let like = KeyDescription(type: "user", uid: geteuid(), gid: sharing?.group.gid ?? getegid(),
                                          permissions: sharing?.permissions(for: .item) ?? .ownerOnly, description: key)
                let fresh = try KeySerial.prepare(bytes, named: key, like: like, until: deadline ?? .fromNow(seconds: UInt64(seconds)))
                guard try fresh.place(in: home.serial) else { return }
                if let previous { DeadlineRecords.forget([previous]) }  // displaced by the new key
                item = fresh
            } else {
                item = try KeySerial.add(type: "user", description: key, payload: bytes, into: home.serial)
            }
            do throws(KeyctlError) {
                // (The kernel's add_key leaves a created or updated key without expiry,
                // so a store without a timeout needs no keyctl_set_timeout.)
                if seconds == 0 {
                    if let sharing { try Sharing.apply(sharing, to: item, as: .item) } else { try item.setPermissions(.ownerOnly) }
                }
                // A share or unshare of the service may have run since its sharing was
                // read: the item follows its keyring as it is now. (Unshare changes the
                // keyring before the items, and share goes over the items again after
                // the keyring, so whichever way they interleave every item ends up as
                // its keyring.)
                let now = Sharing(try home.serial.describe())
                if now != sharing { try Sharing.apply(now, to: item, as: .item) }
            } catch {
                // Another process removed the item, or its whole service, between add_key
                // and here: this set happened, then that removal did (found by the soak
                // test). A removed key is gone (ENOKEY), or still alive but no longer
                // possessed (EACCES). The link lists tell which (the owner may read them
                // without possession): if the key is still linked in its keyring and the
                // keyring in its anchor, the failure is this write's own.
                if error.meansKeyIsGone || !Self.isStillLinked(item, in: home) { return }
                throw error
            }
        } catch {
            // The service keyring was removed after it was found (kc rm of the whole
            // service, rmdir): this write happened first, then the removal.
            if error.meansKeyIsGone { return }
            throw KeychainError(error)
        }
        try keepOneCopy(of: key, in: rings)
    }

    /// Whether `item` is linked in `ring` and `ring` in its anchor. False also when a
    /// list cannot be read (a keyring that is gone).
    private static func isStillLinked(_ item: KeySerial, in ring: ServiceKeyring) -> Bool {
        guard let anchor = try? ring.anchor.serial(),
              let rings = try? anchor.linkedKeys(), rings.contains(ring.serial),
              let items = try? ring.serial.linkedKeys()
        else { return false }
        return items.contains(item)
    }

    /// Before a write: the item's copy with the lowest serial is moved into `home` (the
    /// same key, so level changes keep it), and any other copy is unlinked.
    /// Returns the key kept, if there was one.
    @discardableResult
    private func gather(_ key: KeyName, into home: ServiceKeyring, from rings: [ServiceKeyring]) throws(KeychainError) -> KeySerial? {
        let found = try copies(of: key, in: rings)
        guard let keep = found.min(by: { $0.item.rawValue < $1.item.rawValue }) else { return nil }
        try unlink(found.filter { $0.item != keep.item })
        guard keep.ring != home else { return keep.item }
        do {
            try keep.item.move(from: keep.ring.serial, to: home.serial, exclusive: true)
        } catch {
            // Moved or removed by another writer, or a concurrent writer added one at
            // home: the write goes ahead and the copies are settled afterwards.
            let settledLater: [Errno] = [.noSuchFileOrDirectory, .fileExists]
            if !error.meansKeyIsGone && !settledLater.contains(error.errno) { throw KeychainError(error) }
        }
        return keep.item
    }

    /// After a write: one copy stays, the one with the lowest serial.
    internal func keepOneCopy(of key: KeyName, in rings: [ServiceKeyring]) throws(KeychainError) {
        let found = try copies(of: key, in: rings)
        guard found.count > 1, let keep = found.min(by: { $0.item.rawValue < $1.item.rawValue }) else { return }
        try unlink(found.filter { $0.item != keep.item })
    }

    /// Unlinks copies of an item that lost to the kept one, and their deadline records.
    private func unlink(_ copies: [(ring: ServiceKeyring, item: KeySerial)]) throws(KeychainError) {
        var unlinked: [KeySerial] = []
        for copy in copies where try unlinkIgnoringGone(copy.item, from: copy.ring.serial) { unlinked.append(copy.item) }
        DeadlineRecords.forget(unlinked)
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
