import Keyrings

// Item- and service-level operations the filesystem view needs (stat, xattrs, mkdir).

extension Keychain {
    /// The size in bytes of the item's value, or nil if there is no such item. As cheap
    /// as a read: two searches and a `keyctl_read` that copies nothing.
    public func size(ofItem key: String) throws(KeychainError) -> Int? {
        try validateName(key, as: .item)
        guard let located = try locate(key) else { return nil }
        do {
            return try located.item.payloadSize()
        } catch {
            if error.meansKeyIsGone { return nil }
            throw KeychainError(error)
        }
    }

    /// What the kernel knows of one item (level, serial, size, time left), or nil.
    public func item(_ key: String) throws(KeychainError) -> KeychainItem? {
        guard let service else { throw .serviceRequired }
        try validateName(key, as: .item)
        for ring in try listedRings() {
            do {
                guard let serial = try ring.serial.search(type: "user", description: key) else { continue }
                let size = try serial.payloadSize()
                let owner = (try? serial.describe().uid) ?? ring.owner
                return KeychainItem(service: service, name: key, accessibility: ring.accessibility,
                                    serial: serial, size: size, secondsLeft: ProcKeys.expiries()[serial],
                                    owner: owner, sharing: ring.sharing)
            } catch {
                if error.meansKeyIsGone { continue }
                throw KeychainError(error)
            }
        }
        return nil
    }

    /// Moves the item to another accessibility, keeping its value; any timeout is
    /// replaced by this keychain's. Returns false if there is no such item.
    @discardableResult
    public func move(_ key: String, to accessibility: Accessibility) throws(KeychainError) -> Bool {
        if let shared = try sharedService(forWriting: true) { throw .ownerOnly(shared, action: "change an item's level") }
        guard var value = try data(forKey: key) else { return false }
        defer { value.overwriteWithZeros() }
        try self.accessibility(accessibility).set(value, forKey: key)
        return true
    }

    /// Sets (or with nil, clears) the kernel expiry of an existing item.
    /// Returns false if there is no such item.
    ///
    /// The kernel call is `keyctl_set_timeout`.
    @discardableResult
    public func setTimeout(_ timeout: Duration?, forKey key: String) throws(KeychainError) -> Bool {
        let seconds = try timeout.map { (timeout) throws(KeychainError) in try timeoutSeconds(timeout) } ?? 0
        try validateName(key, as: .item)
        if let shared = try sharedService(forWriting: true) { throw .ownerOnly(shared, action: "set an item's lifetime") }
        guard let located = try locate(key) else { return false }
        do {
            try located.item.setTimeout(seconds: seconds)
            return true
        } catch {
            if error.meansKeyIsGone { return false }
            throw KeychainError(error)
        }
    }

    /// Creates the service's keyring at this keychain's accessibility, if the service
    /// has none there yet (race-free, as for the first item written).
    public func createService() throws(KeychainError) {
        guard let service else { throw .serviceRequired }
        _ = try ServiceKeyring.findOrCreate(service: service, marker: accessibility.marker, anchor: accessibility.anchor)
    }

    /// Whether the service has a keyring at any accessibility (it may hold no items).
    /// Stops at the first keyring found, so the common case is one `keyctl_search`.
    public func serviceExists() throws(KeychainError) -> Bool {
        guard let service else { return true }
        for anchor in Anchor.probeOrder(startingWith: accessibility.anchor) {
            let anchorSerial = try anchor.serial()
            for marker in ServiceMarker.allCases {
                if try ServiceKeyring.find(service: service, marker: marker, under: anchorSerial) != nil { return true }
            }
        }
        return false
    }
}
