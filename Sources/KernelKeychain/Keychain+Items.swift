import Keyrings

// Item- and service-level operations beyond get and set: what the filesystem view needs
// (stat, xattrs, saves, renames, mkdir) and what `kc` offers for lifetimes and levels.

extension Keychain {
    /// The size in bytes of the item's value, or nil if there is no such item. As cheap
    /// as a read: two searches and a `keyctl_read` that copies nothing.
    public func size(ofItem key: some KeyNameConvertible) throws(KeychainError) -> Int? {
        let key = key.keyName
        try validateName(key, as: .item)
        guard let located = try locate(key, in: resolve(forWriting: false)) else { return nil }
        do {
            return try unlessGone { () throws(KeyctlError) in try located.item.payloadSize() }
        } catch {
            throw KeychainError(error)
        }
    }

    /// What the kernel knows of one item (level, serial, size, deadline), or nil.
    public func item(_ key: some KeyNameConvertible) throws(KeychainError) -> KeychainItem? {
        let key = key.keyName
        try validateName(key, as: .item)
        for ring in try listedRings() {
            guard let serial = try search(ring: ring.serial, for: key) else { continue }
            do throws(KeyctlError) {
                guard let size = try unlessGone({ () throws(KeyctlError) in try serial.payloadSize() })
                else { continue }
                let owner = (try? serial.describe().uid) ?? ring.owner
                return KeychainItem(service: ring.service, name: key, accessibility: ring.accessibility,
                                    serial: serial, size: size, deadline: DeadlineRecords.deadline(of: serial),
                                    owner: owner, sharing: ring.sharing)
            } catch {
                throw KeychainError(error)
            }
        }
        return nil
    }

    /// When the item expires (exactly, if kc set its timeout), or nil for no expiry or
    /// no such item.
    public func deadline(forKey key: some KeyNameConvertible) throws(KeychainError) -> Deadline? {
        let key = key.keyName
        try validateName(key, as: .item)
        guard let located = try locate(key, in: resolve(forWriting: false)) else { return nil }
        return DeadlineRecords.deadline(of: located.item)
    }

    /// Replaces the value of an existing item, keeping everything else about it
    /// exactly: its level, device-only flag, deadline, owner and sharing. Returns false,
    /// storing nothing, if there is no such item. This is a save of a file, where
    /// ``set(_:forKey:)-(Bytes,_)`` is a store at this keychain's level and timeout.
    ///
    /// An item without expiry is updated in place (`keyctl_update`, which needs write
    /// permission: kc's items grant it to their owner). The kernel's update of a `user`
    /// key also clears its expiry, so an item with a deadline is replaced by a new key
    /// made whole first (value, permissions, the same deadline) in the thread keyring
    /// and moved over the old one (`keyctl_move`, which displaces it atomically): the
    /// secret is never without its deadline, even if the process is killed midway.
    @discardableResult
    public func replace<Bytes: Collection<UInt8>>(_ value: Bytes, forKey key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        let key = key.keyName
        try validateName(key, as: .item)
        var copy = Array(value)
        defer { copy.overwriteWithZeros() }
        guard !copy.isEmpty else { throw .emptyValue }
        guard copy.count <= KeychainError.maximumValueSize else { throw .valueTooLarge(size: copy.count) }
        let scope = try resolve(forWriting: true)
        if case .anyService = scope { throw .serviceRequired }
        if case .own(let service) = scope {
            return try keepingVaultInStep(items: [(service, key)], changed: { $0 }) { () throws(KeychainError) in
                try replaceInKernel(copy, forKey: key, in: scope)
            }
        }
        return try replaceInKernel(copy, forKey: key, in: scope)
    }

    private func replaceInKernel(_ copy: [UInt8], forKey key: KeyName, in scope: Scope) throws(KeychainError) -> Bool {
        guard let located = try locate(key, in: scope) else { return false }
        if case .shared(let shared) = scope, !shared.sharing.isGroupWritable { throw .sharedReadOnly(shared) }
        let deadline = DeadlineRecords.deadline(of: located.item)
        let replaced = copy.withUnsafeBytes { bytes in
            Result { () throws(KeyctlError) -> Bool in
                guard let deadline else {
                    return try unlessGone { () throws(KeyctlError) in try located.item.update(payload: bytes) } != nil
                }
                guard let info = try unlessGone({ () throws(KeyctlError) in try located.item.describe() }) else { return false }
                let fresh = try KeySerial.prepare(bytes, named: key, like: info, until: deadline)
                guard try fresh.place(in: located.ring) else { return false }
                DeadlineRecords.forget([located.item])  // displaced by the new key
                return true
            }
        }
        switch replaced {
        case .success(let done): return done
        case .failure(let error): throw KeychainError(error)
        }
    }

    /// Moves the item to another accessibility: the same kernel key changes keyring
    /// (`keyctl_move`), so its value, deadline and serial stay. Returns false if there is
    /// no such item.
    @discardableResult
    public func move(_ key: some KeyNameConvertible, to accessibility: Accessibility) throws(KeychainError) -> Bool {
        let key = key.keyName
        try validateName(key, as: .item)
        let service = try ownService(toDo: "change an item's level")
        return try keepingVaultInStep(items: [(service, key)], changed: { $0 }) { () throws(KeychainError) in
            try moveInKernel(key, of: service, to: accessibility)
        }
    }

    private func moveInKernel(_ key: KeyName, of service: KeyName, to accessibility: Accessibility) throws(KeychainError) -> Bool {
        let (home, rings) = try ServiceKeyring.rings(of: service, home: accessibility)
        let sharing = try self.accessibility(accessibility).sharingForWrite(rings: rings.map(\.serial))
        for _ in 0..<8 {
            let found = try copies(of: key, in: rings)
            guard let keep = found.min(by: { $0.item.rawValue < $1.item.rawValue }) else { return false }
            if keep.ring == home { break }
            do throws(KeyctlError) {
                // Not exclusive: a key of the same name at home is displaced, which is
                // the one-item rule (the moved key is the item).
                try keep.item.move(from: keep.ring.serial, to: home.serial, exclusive: false)
                if let sharing { try Sharing.apply(sharing, to: keep.item, as: .item) }
                break
            } catch {
                if error.meansKeyIsGone || error.errno == .noSuchFileOrDirectory { continue }  // raced: look again
                throw KeychainError(error)
            }
        }
        try keepOneCopy(of: key, in: rings)
        return true
    }

    /// Sets (or with nil, clears) the kernel expiry of an existing item.
    /// Returns false if there is no such item.
    ///
    /// The kernel call is `keyctl_set_timeout`.
    @discardableResult
    public func setTimeout(_ timeout: Duration?, forKey key: some KeyNameConvertible) throws(KeychainError) -> Bool {
        let key = key.keyName
        let seconds = try timeout.map { (timeout) throws(KeychainError) in try timeoutSeconds(timeout) } ?? 0
        try validateName(key, as: .item)
        let scope = try resolve(forWriting: true)
        if case .shared(let shared) = scope { throw .ownerOnly(shared, action: "set an item's lifetime") }
        guard let service = serviceName else { throw .serviceRequired }
        return try keepingVaultInStep(items: [(service, key)], changed: { $0 }) { () throws(KeychainError) in
            guard let located = try locate(key, in: scope) else { return false }
            do throws(KeyctlError) {
                return try unlessGone { () throws(KeyctlError) in try DeadlineRecords.setTimeout(seconds, of: located.item) } != nil
            } catch {
                throw KeychainError(error)
            }
        }
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
        let target = target ?? self
        try validateName(key, as: .item)
        try validateName(newKey, as: .item)
        guard let fromService = serviceName, let toService = target.serviceName else { throw .serviceRequired }
        if case .shared(let shared) = try resolve(forWriting: true) { throw .ownerOnly(shared, action: "rename items") }
        if case .shared(let shared) = try target.resolve(forWriting: true) { throw .ownerOnly(shared, action: "add items") }
        return try keepingVaultInStep(items: [(fromService, key), (toService, newKey)], changed: { $0 }) { () throws(KeychainError) in
            try renameInKernel(key, of: fromService, to: newKey, in: target, toService: toService, replacing: replacing)
        }
    }

    private func renameInKernel(_ key: KeyName, of fromService: KeyName, to newKey: KeyName, in target: Keychain,
                                toService: KeyName, replacing: Bool) throws(KeychainError) -> Bool {
        guard let moving = try item(key), let level = moving.accessibility else { return false }
        if fromService == toService && key == newKey { return true }
        var value: [UInt8] = []
        defer { value.overwriteWithZeros() }

        if try target.item(newKey) != nil {
            guard replacing else { throw .alreadyExists(service: toService.description, name: newKey.description) }
            guard let bytes = try data(forKey: key) else { return false }
            value = bytes
            if try !target.replace(value, forKey: newKey) {
                try target.accessibility(level).store(value, forKey: newKey, until: moving.deadline)
            }
        } else if key == newKey {
            let home = try ServiceKeyring.rings(of: toService, home: level).home
            let from = try ringHolding(moving)
            do {
                try moving.serial.move(from: from, to: home.serial, exclusive: true)
            } catch {
                if error.meansKeyIsGone || error.errno == .noSuchFileOrDirectory { return false }
                if error.errno == .fileExists { throw .alreadyExists(service: toService.description, name: newKey.description) }
                throw KeychainError(error)
            }
            return true
        } else {
            guard let bytes = try data(forKey: key) else { return false }
            value = bytes
            try target.accessibility(level).store(value, forKey: newKey, until: moving.deadline)
        }
        if try unlinkIgnoringGone(moving.serial, from: ringHolding(moving)) { DeadlineRecords.forget([moving.serial]) }
        return true
    }

    /// Renames the whole service: each of its keyrings gets a new one at the same level
    /// under the new name and every key moves over (`keyctl_move`), so every item keeps
    /// its serial, level, device-only flag and deadline. Fails with
    /// ``KeychainError/alreadyExists(service:name:)`` if the new name has items.
    public func renameService(to newService: some KeyNameConvertible) throws(KeychainError) {
        let newService = newService.keyName
        try validateName(newService, as: .service)
        let service = try ownService(toDo: "rename the service")
        if service == newService { return }
        let target = try Keychain(service: newService)
        guard try target.allKeyNames().isEmpty else { throw .alreadyExists(service: newService.description, name: nil) }
        let saved = (try? Vault.forWriting())?.itemNames(in: service) ?? []
        // A saved item the kernel does not hold (the vault is locked, or kc lock dropped
        // it) cannot be saved again under the new name without the vault's key: refuse
        // rather than leave it behind or lose it.
        for name in saved where try item(name) == nil {
            throw .vaultLocked(service: service.description, item: name.description)
        }
        let items = saved.map { (service: service, name: $0) } + saved.map { (service: newService, name: $0) }
        try keepingVaultInStep(items: items, changed: { true }) { () throws(KeychainError) in
            try renameServiceInKernel(service, to: newService)
        }
    }

    private func renameServiceInKernel(_ service: KeyName, to newService: KeyName) throws(KeychainError) {
        let rings = try ServiceKeyring.rings(of: service, startingWith: accessibility)
        guard !rings.isEmpty else { throw .noSuchService(service.description) }
        for ring in rings {
            let destination = try ServiceKeyring.findOrCreate(service: newService, marker: ring.marker, anchor: ring.anchor)
            do throws(KeyctlError) {
                if let sharing = Sharing(try ring.serial.describe()) { try Sharing.apply(sharing, to: destination.serial, as: .keyring) }
                for key in try unlessGone({ () throws(KeyctlError) in try ring.serial.linkedKeys() }) ?? [] {
                    do {
                        try key.move(from: ring.serial, to: destination.serial, exclusive: true)
                    } catch {
                        if error.meansKeyIsGone || error.errno == .noSuchFileOrDirectory { continue }
                        throw error
                    }
                }
            } catch {
                throw KeychainError(error)
            }
            _ = try unlinkIgnoringGone(ring.serial, from: ring.anchor.serial())
        }
    }

    /// The keyring an item of the caller's own was found in: its service's ring at its level.
    private func ringHolding(_ item: KeychainItem) throws(KeychainError) -> KeySerial {
        guard let service = serviceName, let level = item.accessibility,
              let ring = try ServiceKeyring.rings(of: service, startingWith: level).first(where: { $0.accessibility == level })
        else { throw .noSuchService(service ?? "") }
        return ring.serial
    }

    /// Creates the service's keyring at this keychain's accessibility, if the service
    /// has none there yet (race-free, as for the first item written).
    public func createService() throws(KeychainError) {
        guard let service = serviceName else { throw .serviceRequired }
        _ = try ServiceKeyring.findOrCreate(service: service, marker: accessibility.marker, anchor: accessibility.anchor)
    }

    /// Whether the service has a keyring at any accessibility (it may hold no items).
    /// Stops at the first keyring found, so the common case is one `keyctl_search`.
    public func serviceExists() throws(KeychainError) -> Bool {
        guard let service = serviceName else { return true }
        return try !ServiceKeyring.rings(of: service, startingWith: accessibility, stopAtFirst: true).isEmpty
    }

    /// The caller's own service, for what only its owner may do (`action` completes
    /// the refusal "only OWNER ... can").
    private func ownService(toDo action: String) throws(KeychainError) -> KeyName {
        switch try resolve(forWriting: true) {
        case .anyService: throw .serviceRequired
        case .shared(let shared): throw .ownerOnly(shared, action: action)
        case .own(let own): return own
        }
    }
}
