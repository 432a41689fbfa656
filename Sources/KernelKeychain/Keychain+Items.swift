import Keyrings

// Item- and service-level operations beyond get and set: what the filesystem view needs
// (stat, xattrs, saves, renames, mkdir) and what `kc` offers for lifetimes and levels.
// Each resolves, then acts: a change to items the journal keeps is staged from the
// bytes in hand before the kernel changes, and committed after.

extension Keychain {
    /// The size in bytes of the item's value, or nil if there is no such item. As cheap
    /// as a read: two searches and a `keyctl_read` that copies nothing. Like a read, a
    /// miss loads the item from the vault if it is unlocked (a locked vault's item is nil
    /// here, as in a listing: the mount's lookup).
    public func size(ofItem key: some KeyNameConvertible) throws(KeychainError) -> Int? {
        let key = key.keyName
        try validateName(key, as: .item)
        // A key replaced between the search and the size is looked up again, as a read does.
        for _ in 1...3 {
            let found: LocatedItem?
            do {
                // A read: a recent owner check of the service keyring stands, as for
                // ``withBytes(forKey:_:)`` (the mount asks this at every lookup and stat).
                found = try locate(key, in: resolve(forWriting: false), reloading: true, forReading: true)
            } catch {
                guard case .vaultLocked = error else { throw error }
                found = nil
            }
            guard let located = found else { return nil }
            if let size = try Self.read(located, { (item) throws(KeyctlError) in try item.valueSize() }) { return size }
        }
        return nil
    }

    /// What the kernel knows of one item (level, serial, size, deadline), or nil.
    /// `withDeadline: false` leaves ``KeychainItem/deadline`` nil and skips reading
    /// /proc/keys, which costs more than the rest together (the kernel checks every key
    /// it lists): for a caller that wants the level or the size of many items.
    public func item(_ key: some KeyNameConvertible, withDeadline: Bool = true) throws(KeychainError) -> KeychainItem? {
        let key = key.keyName
        try validateName(key, as: .item)
        return try resolve(forWriting: false).item(key, withDeadline: withDeadline)
    }

    /// When the item expires (exactly, if kc set its timeout), or nil for no expiry or
    /// no such item.
    public func deadline(forKey key: some KeyNameConvertible) throws(KeychainError) -> Deadline? {
        let key = key.keyName
        try validateName(key, as: .item)
        guard let located = try locate(key, in: resolve(forWriting: false)) else { return nil }
        return located.shownDeadline
    }

    /// Replaces the value of an existing item, keeping everything else about it
    /// exactly: its level, device-only flag, deadline, owner and sharing. Returns false,
    /// storing nothing, if there is no such item. This is a save of a file, where
    /// ``set(_:forKey:)-(Bytes,_)`` is a store at this keychain's level and timeout.
    ///
    /// An item without expiry is updated in place (`keyctl_update`); one with a deadline
    /// is replaced by a new key made whole first and moved over the old one
    /// (`keyctl_move`), so the secret is never without its deadline.
    @discardableResult
    public func replace<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        let key = key.keyName
        try validateName(key, as: .item)
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        guard copy.count <= KeychainError.maximumValueSize else { throw .valueTooLarge(size: copy.count) }
        switch try resolve(forWriting: true) {
        case .anyService:
            throw .serviceRequired
        case .shared(let shared):
            return try copy.withValueBytes { bytes throws(KeychainError) in try shared.replace(bytes, forKey: key, group: accessGroup?.name) }
        case .own(let own):
            return try Self.replaceExisting(copy, forKey: key, of: own, in: Self.journal())
        }
    }

    /// The one save of a new value into an existing item of the caller's own, keeping
    /// its level, device-only flag and deadline exactly: for ``replace(_:forKey:)`` (the
    /// mount) and for a ``set(_:forKey:)-(Bytes,_)`` that chose none of them. False,
    /// storing nothing, if there is no such item. The journal saves the new value if
    /// it keeps the item, or with `savingUnkept` (a set, which is saved unless
    /// ephemeral) if it keeps anything; a save through the mount leaves an item stored
    /// `--ephemeral` in the kernel only.
    internal static func replaceExisting(_ value: [UInt8], forKey key: KeyName, of own: OwnService,
                                         in journal: some ItemJournal, savingUnkept: Bool = false) throws(KeychainError) -> Bool {
        var probed: [ServiceKeyring]? = nil
        return try replaceExisting(value, forKey: key, of: own, in: journal, savingUnkept: savingUnkept, probed: &probed)
    }

    /// ``replaceExisting(_:forKey:of:in:savingUnkept:)``; when there is no such item,
    /// `probed` holds the service's keyrings the search looked through, for the store
    /// that follows to plan with.
    internal static func replaceExisting(_ value: [UInt8], forKey key: KeyName, of own: OwnService,
                                         in journal: some ItemJournal, savingUnkept: Bool,
                                         probed: inout [ServiceKeyring]?) throws(KeychainError) -> Bool {
        try journal.withLock { journal throws(KeychainError) in
            // Where the journal keeps the item at the home level only, a home hit is
            // at that level: the kernel has a ring there, and a search from the home
            // anchor finds it before any nested one. Otherwise the level is made sure of.
            let levels = journal.keptLevels(of: key, in: own.name)
            let saves = !levels.isEmpty || (savingUnkept && journal.persists)
            let homeIsExact = levels == [own.home]
            guard let located = try own.locate(key, exactLevel: saves && !homeIsExact, probed: &probed) else { return false }
            let record = located.deadlineRecord
            var changes: [ItemChange] = []
            if saves, let level = located.accessibility ?? (homeIsExact ? own.home : nil) {
                changes = [.saved(JournaledItem(service: own.name, name: key, accessibility: level, deadline: record?.deadline, value: value))]
            }
            return try journal.record(changes, committing: { $0 }) { () throws(KeychainError) in
                try value.withValueBytes { bytes throws(KeychainError) in
                    try Placement.replace(bytes, of: located, named: key, deadline: record?.deadline,
                                          record: record, like: located.likeOwnItem(named: key))
                }
            }
        }
    }

    /// Refuses now what storing `size` bytes under `key` would be refused for before the
    /// kernel changed: the vault's disk has no room for the item's file
    /// (``KeychainError/vaultFull(path:reason:)``: statvfs(2) shows no inode left or too
    /// few free blocks), or the vault cannot be used (gone while unlocked, unsafe). For a
    /// writer that learns the value's size before it stores it: the mount asks at each
    /// write(2), so `printf v > f` on a full disk fails at the write, which a shell
    /// reports, and not only at close, which it ignores. Nothing is checked without a
    /// vault, for an ephemeral keychain, or for an existing item the vault does not keep
    /// (one stored `--ephemeral`: a save keeps it so). No keyring call unless the vault
    /// holds no file of the item.
    public func checkRoomToSave(_ size: Int, forKey key: some KeyNameConvertible) throws(KeychainError) {
        let key = key.keyName
        try validateName(key, as: .item)
        guard !isEphemeral, case .own(let own) = try resolve(forWriting: true) else { return }
        let journal = try Self.journal()
        guard journal.persists else { return }
        if !journal.keeps(key, in: own.name), try own.locate(key) != nil { return }
        try journal.checkRoom(forItemOf: size)
    }

    /// Moves the item to another accessibility: the same kernel key changes keyring
    /// (`keyctl_move`), so its value, deadline and serial stay. Returns false if there is
    /// no such item.
    @discardableResult
    public func move(_ key: some KeyNameConvertible, to accessibility: Accessibility) throws(KeychainError) -> Bool {
        let key = key.keyName
        try validateName(key, as: .item)
        let own = try ownService(toDo: "change an item's level").at(accessibility)
        let journal = try Self.journal()
        return try journal.withLock { journal throws(KeychainError) in
            guard journal.keeps(key, in: own.name) else { return try own.moveHome(key) }
            return try Self.changingKept(key, of: own, in: journal) { located, value throws(KeychainError) in
                let deadline = located.shownDeadline
                let entry = JournaledItem(service: own.name, name: key, accessibility: accessibility, deadline: deadline, value: value)
                return ([.saved(entry)], { () throws(KeychainError) in try own.moveHome(key) })
            }
        }
    }

    /// Sets (or with nil, clears) the kernel expiry of an existing item.
    /// Returns false if there is no such item.
    ///
    /// The kernel call is `keyctl_set_timeout`.
    @discardableResult
    public func setTimeout(_ timeout: Duration?, forKey key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        let key = key.keyName
        let seconds = try timeout.map { (timeout) throws(KeychainError) in try timeoutSeconds(timeout) }
        try validateName(key, as: .item)
        let own = try ownService(toDo: "set an item's lifetime")
        let deadline = seconds.map { Deadline.fromNow(seconds: UInt64($0)) }
        let journal = try Self.journal()
        return try journal.withLock { journal throws(KeychainError) in
            guard journal.keeps(key, in: own.name) else {
                guard let located = try own.locate(key) else { return false }
                return try own.setDeadline(deadline, of: located)
            }
            return try Self.changingKept(key, of: own, in: journal) { located, value throws(KeychainError) in
                guard let level = located.accessibility else { return ([], { false }) }
                let entry = JournaledItem(service: own.name, name: key, accessibility: level, deadline: deadline, value: value)
                return ([.saved(entry)], { () throws(KeychainError) in try own.setDeadline(deadline, of: located, saved: value) })
            }
        }
    }

    /// A change to an item the journal keeps, described from what the kernel holds
    /// before it (its exact level and value, read first): `describe` gives the journal's
    /// changes and the kernel change, which then runs between stage and commit.
    private static func changingKept(
        _ key: KeyName, of own: OwnService, in journal: some ItemJournal,
        _ describe: (LocatedItem, [UInt8]) throws(KeychainError) -> ([ItemChange], () throws(KeychainError) -> Bool)
    ) throws(KeychainError) -> Bool {
        guard let located = try own.locate(key, exactLevel: true), var value = try Placement.value(of: located.item) else { return false }
        defer { value.overwriteWithZeros() }
        try takeSavedValue(into: &value, of: located, named: key, in: own.name, from: journal)
        let (changes, change) = try describe(located, value)
        return try journal.record(changes, committing: { $0 }, change)
    }

    /// For a journal entry: replaces the kernel's `value` of an item that members of a
    /// group-writable share may write with the value the journal holds (the owner's last
    /// save), so a vault never saves a value another uid may have written. Nothing
    /// changes for an item only its owner may write, or one the journal does not keep.
    private static func takeSavedValue(into value: inout [UInt8], of located: LocatedItem, named key: KeyName, in service: KeyName,
                                       from journal: some ItemJournal) throws(KeychainError) {
        guard journal.persists, Placement.othersMayWrite(located.item),
              var saved = try journal.keptValue(of: key, in: service) else { return }
        swap(&value, &saved)
        saved.overwriteWithZeros()
    }

    /// Renames an item, within this service or into `target`'s (another of the caller's
    /// own services). Returns false if there is no such item.
    ///
    /// - An existing item at the new name keeps its level, device-only flag and deadline
    ///   and takes the value (an editor's save-by-rename); with `replacing` false it is
    ///   left alone and this throws ``KeychainError/alreadyExists(service:name:)``.
    /// - Otherwise the item keeps its own: under the same name the same key moves to the
    ///   other service's keyring at its level (`keyctl_move`); under a new name a new key
    ///   is made at its level with its exact deadline (see ``Deadline``).
    @discardableResult
    public func rename(_ key: some KeyNameConvertible, to newKey: some KeyNameConvertible, in target: Keychain? = nil, replacing: Bool = true) throws(KeychainError) -> Bool {
        let key = key.keyName
        let newKey = newKey.keyName
        try validateName(key, as: .item)
        try validateName(newKey, as: .item)
        let from = try ownService(toDo: "rename items")
        let to = try (target ?? self).ownService(toDo: "add items")
        let journal = try Self.journal()
        return try journal.withLock { journal throws(KeychainError) in
            guard let moving = try from.locate(key, exactLevel: true), let level = moving.accessibility else { return false }
            if from.name == to.name && key == newKey { return true }
            let existing = try to.locate(newKey, exactLevel: true)
            if existing != nil && !replacing { throw .alreadyExists(service: to.name.description, name: newKey.description) }
            let deadline = moving.shownDeadline
            let sameKey = existing == nil && key == newKey
            // The value in hand: for the journal, and for a new key under the new name.
            let kept = journal.keeps(key, in: from.name) || journal.keeps(newKey, in: to.name)
            guard kept || !sameKey else { return try from.move(moving, at: level, named: key, to: to) }
            guard var value = try Placement.value(of: moving.item) else { return false }
            defer { value.overwriteWithZeros() }
            // The journal gets the owner's saved value for an item members may write;
            // the kernel keeps what it holds (a member's, perhaps) under the new name.
            var saved = value
            defer { saved.overwriteWithZeros() }
            if kept { try Self.takeSavedValue(into: &saved, of: moving, named: key, in: from.name, from: journal) }

            var changes: [ItemChange] = []
            if kept {
                let targetLevel = existing?.accessibility ?? level
                let targetDeadline = existing.map(\.shownDeadline) ?? deadline
                changes = [.saved(JournaledItem(service: to.name, name: newKey, accessibility: targetLevel, deadline: targetDeadline, value: saved)),
                           .removed(service: from.name, name: key)]
            }
            return try journal.record(changes, committing: { $0 }) { () throws(KeychainError) in
                if sameKey { return try from.move(moving, at: level, named: key, to: to) }
                if let existing {
                    let targetDeadline = existing.shownDeadline
                    let replaced = try value.withValueBytes { bytes throws(KeychainError) in
                        try Placement.replace(bytes, of: existing, named: newKey, deadline: targetDeadline)
                    }
                    if !replaced { try to.at(level).storeCopy(value, forKey: newKey, until: deadline) }
                } else {
                    try to.at(level).storeCopy(value, forKey: newKey, until: deadline)
                }
                _ = try from.remove(moving)
                return true
            }
        }
    }

    /// Renames the whole service: each of its keyrings gets a new one at the same level
    /// under the new name and every key moves over (`keyctl_move`), so every item keeps
    /// its serial, level, device-only flag and deadline. Fails with
    /// ``KeychainError/alreadyExists(service:name:)`` if the new name has items.
    public func renameService(to newService: some KeyNameConvertible) throws(KeychainError) {
        let newService = newService.keyName
        try validateName(newService, as: .service)
        let own = try ownService(toDo: "rename the service")
        if own.name == newService { return }
        guard try Keychain(service: newService).allKeyNames().isEmpty else { throw .alreadyExists(service: newService.description, name: nil) }
        let journal = try Self.journal()
        try journal.withLock { journal throws(KeychainError) in
            var values: [[UInt8]] = []
            defer { for index in values.indices { values[index].overwriteWithZeros() } }
            var changes: [ItemChange] = []
            for name in journal.keptNames(in: own.name) {
                // A saved item the kernel does not hold (the vault is locked, or kc lock
                // dropped it) cannot be saved again under the new name without the vault's
                // key: refuse rather than leave it behind or lose it.
                guard let located = try own.locate(name, exactLevel: true), let level = located.accessibility,
                      let value = try Placement.value(of: located.item)
                else { throw .vaultLocked(service: own.name.description, item: name.description) }
                values.append(value)
                changes.append(.saved(JournaledItem(service: newService, name: name, accessibility: level,
                                                   deadline: located.shownDeadline, value: value)))
            }
            if !changes.isEmpty { changes.append(.removedService(own.name)) }
            try journal.record(changes) { () throws(KeychainError) in try own.rename(to: newService) }
        }
    }

    /// Creates the service's keyring at this keychain's accessibility, if the service
    /// has none there yet (race-free, as for the first item written).
    public func createService() throws(KeychainError) {
        guard let service = serviceName else { throw .serviceRequired }
        try OwnService(name: service, home: accessibility).create()
    }

    /// Whether the service has a keyring at any accessibility (it may hold no items).
    /// Stops at the first keyring found, so the common case is one `keyctl_search`.
    /// With none, the vault's items of the service for this session are loaded if it
    /// is unlocked (see ``allKeyNames()``).
    public func serviceExists() throws(KeychainError) -> Bool {
        guard let service = serviceName else { return true }
        let own = OwnService(name: service, home: accessibility)
        if try own.exists() { return true }
        // A service the unlocked vault keeps items of for this session, as in a listing.
        guard let journal = try? Self.journal(), journal.loadMissing(of: service, listed: []) else { return false }
        return try own.exists()
    }
}

extension OwnService {
    /// ``store(_:forKey:until:)`` of a value held in an array.
    func storeCopy(_ value: [UInt8], forKey key: KeyName, until deadline: Deadline?,
                   absentFrom probed: [ServiceKeyring]? = nil) throws(KeychainError) {
        try value.withValueBytes { bytes throws(KeychainError) in try store(bytes, forKey: key, until: deadline, absentFrom: probed) }
    }
}

extension Keychain {
    /// Replaces the service's items with exactly `items`, at this keychain's level, in
    /// one step: a reader finds either the old set or the new one, never some of each,
    /// and one that already holds the old set reads it whole. For a mirror of another
    /// store, such as a KV secret's version or a certificate with its key. Items at other
    /// levels go; an empty set removes the service.
    ///
    /// Every value is checked first: a bad name or a value over 32767 bytes changes
    /// nothing. An ephemeral keychain keeps the new set in the kernel only (and drops
    /// what the vault kept of the service's items); otherwise the vault, if there is one,
    /// saves the new set as ``set(_:forKey:)`` would.
    ///
    /// The kernel calls: a keyring made in the thread keyring, one `add_key` per item,
    /// and one `keyctl_move` over the old keyring.
    public func replaceAllItems(with items: [(key: KeyName, value: [UInt8])], until deadline: Deadline? = nil) throws(KeychainError) {
        var seen = Swift.Set<KeyName>()
        for (key, value) in items {
            try validateName(key, as: .item)
            guard value.count <= KeychainError.maximumValueSize else { throw .valueTooLarge(size: value.count) }
            guard seen.insert(key).inserted else { throw .alreadyExists(service: service ?? "", name: key.description) }
        }
        switch try resolve(forWriting: true) {
        case .anyService:
            throw .serviceRequired
        case .shared(let shared):
            throw .ownerOnly(shared, action: "replace the whole service")
        case .own(let own):
            let journal = try Self.journal()
            try journal.withLock { journal throws(KeychainError) in
                let before = try allKeyNames(journal: journal)
                var changes: [ItemChange] = []
                for key in before where !seen.contains(key) && journal.keeps(key, in: own.name) {
                    changes.append(.removed(service: own.name, name: key))
                }
                for (key, value) in items {
                    if isEphemeral || !journal.persists {
                        if journal.keeps(key, in: own.name) { changes.append(.removed(service: own.name, name: key)) }
                    } else {
                        changes.append(.saved(JournaledItem(service: own.name, name: key, accessibility: own.home, deadline: deadline, value: value)))
                    }
                }
                try journal.record(changes) { () throws(KeychainError) in
                    try own.replaceContents(items.map { (name: $0.key, value: $0.value) }, until: deadline)
                }
            }
        }
    }
}

extension Keychain {
    /// The service's items with their values, as one set: read from the keyrings found
    /// once, and read again if a ``replaceAllItems(with:until:)`` replaced them meanwhile,
    /// so a program handed a mirrored secret's keys (`kc exec`) never gets some from one
    /// version and some from the next. Sorted by name; empty when there is no service.
    public func allValues() throws(KeychainError) -> [(key: KeyName, value: [UInt8])] {
        for _ in 0..<64 {
            if let values = try resolve(forWriting: false).values() { return values }
        }
        // Replaced 64 times over during reads: a writer far faster than any mirror.
        throw KeychainError(KeyctlError(.resourceTemporarilyUnavailable, call: "keyctl_read"))
    }
}
