import Keyrings
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The kernel side of every operation on the caller's own service. Each takes what the
// public call resolved, changes the kernel only, and never calls the public API.

extension OwnService {
    /// Finds the item: at its home level first (one search for the service keyring,
    /// one for the item), then the other levels.
    ///
    /// A search from the session keyring also finds rings of the user keyring nested in
    /// it; with `exactLevel` the home keyring counts only if it is linked in the home
    /// anchor directly (one more call), so the level found is the item's true level, as
    /// a journal entry needs. Without it a home hit's level is nil (unknown).
    /// `forReading`: only to read the item, so a recent owner check of its keyring
    /// stands (``RecentOwnerChecks``).
    func locate(_ key: KeyName, exactLevel: Bool = false, forReading: Bool = false) throws(KeychainError) -> LocatedItem? {
        var probed: [ServiceKeyring]? = nil
        return try locate(key, exactLevel: exactLevel, forReading: forReading, probed: &probed)
    }

    /// ``locate(_:exactLevel:forReading:)``; when it finds nothing, `probed` is every
    /// keyring of the service, which it had to look through: a write that follows plans
    /// with them instead of probing again (see ``store(_:forKey:until:absentFrom:)``).
    func locate(_ key: KeyName, exactLevel: Bool = false, forReading: Bool = false,
                probed: inout [ServiceKeyring]?) throws(KeychainError) -> LocatedItem? {
        // The common case, kept free of collections: on this path in a short-lived
        // process the runtime's first generic-type lookups cost more than the syscalls.
        var home: KeySerial? = nil
        var foundHome: (serial: KeySerial, info: KeyDescription?)? = nil
        var homeInfo: KeyDescription? = nil
        var anchorLinks: [KeySerial]? = nil
        if let anchor = try self.home.anchor.serialForReading(),
           let found = try ServiceKeyring.findDescribed(ringDescription(self.home.marker), under: anchor,
                                                        trustingRecentCheck: forReading && !exactLevel) {
            home = found.serial
            foundHome = found
            homeInfo = found.info
            if exactLevel {
                anchorLinks = try Placement.linkedKeys(of: anchor)
                if anchorLinks?.contains(found.serial) != true { home = nil }
            }
        }
        if let home, let item = try Placement.search(ring: home, for: key) {
            return LocatedItem(ring: home, item: item, accessibility: exactLevel ? self.home : nil, ringInfo: homeInfo)
        }
        // The home keyring the search above found and checked is not searched for again,
        // nor its anchor's links read again.
        let rings = try ServiceKeyring.rings(of: name, startingWith: self.home, knownFirst: foundHome,
                                             knownFirstAnchorLinks: anchorLinks)
        for ring in rings where ring.serial != home {
            if let item = try Placement.search(ring: ring.serial, for: key) {
                return LocatedItem(ring: ring.serial, item: item, accessibility: ring.accessibility)
            }
        }
        // The home hit counts as one of the rings only where it is linked there directly
        // (the probe checked that): a ring nested in the home anchor is in `rings` anyway.
        probed = rings
        return nil
    }

    /// Stores the value at the home level, expiring at `deadline` (nil: never).
    ///
    /// An item is one kernel key. If it exists at another level, that same key is moved
    /// here (`keyctl_move`) and updated, so it is never absent in between. Writers at two
    /// levels racing on a new item can each add a key; then every writer, after its own
    /// write, keeps the copy with the lowest serial and unlinks the others. Every unlink
    /// is justified by a lower serial that existed when it was decided, so the lowest
    /// never goes: some item always survives, and exactly one is left when they are done.
    ///
    /// A new key goes into a service keyring that a removal of the empty service (`kc rm`
    /// of its last item, ``removeIfEmpty()``) may be detaching at that moment. The writer
    /// holds the keyring while its key goes in, so it cannot be destroyed with the key,
    /// and puts it back if it was detached: no such removal ever takes an item stored
    /// meanwhile, and a store that reports success has its key where readers find it.
    ///
    /// A removal of the empty service bars its keyrings while it reads them (see
    /// ``removeIfEmpty()``): a write refused by such a bar waits it out and is made again.
    func store(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, until deadline: Deadline?) throws(KeychainError) {
        try store(bytes, forKey: key, until: deadline, absentFrom: nil)
    }

    /// ``store(_:forKey:until:)`` planned from a locate that found the item nowhere, in
    /// `absentFrom` (every keyring of the service, probed once): there is nothing to
    /// update at home and nothing to gather, so the write goes straight to adding the
    /// key, into the rings already found. A copy another writer made meanwhile is
    /// settled as any race between writers is: the lowest serial is kept afterwards.
    func store(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, until deadline: Deadline?,
               absentFrom probed: [ServiceKeyring]?) throws(KeychainError) {
        // The plan holds for the first attempt only: a removal's bar that sends the
        // write round again has changed what the service's keyrings are.
        var plan = probed
        try waitingOutBars { () throws(KeychainError) in
            var known = plan
            plan = nil
            if known == nil, accessGroup == nil, try updateAtHome(bytes, forKey: key, until: deadline) { return }
            for _ in 1...8 {
                if try storeNew(bytes, forKey: key, until: deadline, probed: known) { return }
                known = nil  // the plan did not hold: probe again
            }
            // Each time the service's keyring was gone before the key could go in (a
            // removal of the whole service, eight times over): nothing was stored.
            throw KeychainError(KeyctlError(.noKey, call: "add_key"))
        }
    }

    /// ``store(_:forKey:until:)`` once: false if the home keyring was gone before the
    /// new key went in (nothing was stored), so that the store must be made again.
    ///
    /// The home keyring is held (linked into the thread keyring) from before the key is
    /// added until it is settled. A removal of the empty service that detached it
    /// meanwhile, having read it empty before the key came, drops only its own link: the
    /// keyring lives on with the key, the key is possessed through it (so its
    /// permissions can be set), and ``putBack(_:heldIn:)`` puts it back.
    private func storeNew(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, until deadline: Deadline?,
                          probed known: [ServiceKeyring]? = nil) throws(KeychainError) -> Bool {
        let probed: [ServiceKeyring]
        if let known { probed = known } else { probed = try ServiceKeyring.rings(of: name, startingWith: home) }
        if probed.isEmpty, accessGroup == nil, try storeInNewService(bytes, forKey: key, until: deadline) {
            // A first writer at another level may have made the service there meanwhile,
            // with its own copy: the same rule as below keeps one.
            let rings = try ServiceKeyring.rings(of: name, startingWith: home)
            if rings.count > 1 { try Placement.keepOneCopy(of: key, in: rings) }
            return true
        }
        let (homeRing, rings) = try ServiceKeyring.rings(of: name, home: home, probed: probed.isEmpty ? nil : probed)
        let sharing = try sharingForWrite(rings: rings)
        // Planned from a locate that found no copy: none to gather.
        let previous = known == nil ? try gather(key, into: homeRing, from: rings) : nil
        let previousRecord = previous.flatMap { DeadlineRecords.record(of: $0) }
        let holder = SpecialKeyring.thread.serial
        do throws(KeyctlError) {
            do { try homeRing.serial.link(into: holder) } catch where error.meansKeyIsGone { return false }
            defer { try? homeRing.serial.unlink(from: holder) }  // no-op once moved back
            let item: KeySerial
            let made = deadline != nil || previousRecord != nil || ItemValue.needsFreshKey(bytes)
            if made {
                // Made whole with its deadline (or none) before it is placed: an update
                // would leave the value without expiry until the timeout is set again,
                // and would leave the old key's record to be dropped afterwards (see
                // ``updateAtHome(_:forKey:until:)``).
                let like = KeyDescription.ownItem(named: key, sharedAs: sharing)
                let fresh = try KeySerial.prepare(bytes, named: key, like: like, until: deadline, table: previousRecord?.table)
                guard try fresh.place(in: homeRing.serial) else { return false }
                if let previousRecord { DeadlineRecords.drop(previousRecord) }  // its key is displaced
                item = fresh
            } else {
                // The kernel's add_key leaves a created or updated key without expiry,
                // so a store without a deadline needs no keyctl_set_timeout.
                item = try KeySerial.add(type: "user", description: key, payload: bytes, into: homeRing.serial)
            }
            do throws(KeyctlError) {
                if !made {
                    if let sharing { try Sharing.apply(sharing, to: item, as: .item, expiring: false) } else { try item.setPermissions(.ownerOnly) }
                }
                // A share or unshare of the service may have run since its sharing was
                // read: the item follows its keyring as it is now. (Unshare changes the
                // keyring before the items, and share goes over the items again after
                // the keyring, so whichever way they interleave every item ends up as
                // its keyring.)
                let now = Sharing(try homeRing.serial.describe())
                if now != sharing { try Sharing.apply(now, to: item, as: .item) }
            } catch {
                // Another process removed the item, or its whole service, between add_key
                // and here (found by the soak test): this set happened, then that removal
                // did. A removed key is gone (ENOKEY), or alive but no longer possessed
                // (EACCES) once unlinked from the held keyring. The keyring's link list
                // tells which: if the key is still in it, the failure is this write's own.
                let stillThere = (try? homeRing.serial.linkedKeys())?.contains(item) ?? false
                if !error.meansKeyIsGone && stillThere { throw error }
            }
            try putBack(homeRing, heldIn: holder)
        } catch {
            // The service keyring was gone before the key went in: made again, after it.
            if error.meansKeyIsGone { return false }
            throw KeychainError(error)
        }
        try Placement.keepOneCopy(of: key, in: rings)
        return true
    }

    /// The first item of a service that has no keyring anywhere: the keyring is made
    /// with the item already in it (in the thread keyring) and only then moved into its
    /// anchor, exclusively. So a service keyring never shows in an anchor empty for a
    /// moment for a removal of the empty service to take (``removeIfEmpty()``), and two
    /// first writers never displace each other's keyring. False if another writer's
    /// keyring got there first (nothing is left behind): the ordinary store follows.
    private func storeInNewService(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, until deadline: Deadline?) throws(KeychainError) -> Bool {
        let anchor = try home.anchor.serialForWriting()
        let thread = SpecialKeyring.thread.serial
        do throws(KeyctlError) {
            let ring = try KeySerial.add(type: "keyring", description: ringDescription(home.marker), payload: nil, into: thread)
            defer { try? ring.unlink(from: thread) }  // no-op once moved
            try ring.setPermissions(.ownerOnly)
            if deadline != nil || ItemValue.needsFreshKey(bytes) {
                let like = KeyDescription.ownItem(named: key, sharedAs: nil)
                let fresh = try KeySerial.prepare(bytes, named: key, like: like, until: deadline)
                guard try fresh.place(in: ring) else { return false }
            } else {
                let item = try KeySerial.add(type: "user", description: key, payload: bytes, into: ring)
                try item.setPermissions(.ownerOnly)
            }
            do {
                try ring.move(from: thread, to: anchor, exclusive: true)
                return true
            } catch where error.errno == .fileExists {
                return false  // another first writer won: its keyring takes this item
            }
        } catch {
            throw KeychainError(error)
        }
    }

    /// After a key was linked into `ring`: if the ring is no longer in its anchor, a
    /// removal detached it (of the empty service, which checked before the key came, or
    /// of the whole service, which cleared it before). With any key in it, the ring is
    /// put back (see ``putBack(_:heldIn:)``): the write came after that removal. False
    /// when the ring is gone, the key with it: the write must be made again.
    func settle(_ ring: ServiceKeyring) throws(KeyctlError) -> Bool {
        guard try isDetached(ring) else { return true }
        let holder = SpecialKeyring.thread.serial
        do { try ring.serial.link(into: holder) } catch where error.meansKeyIsGone { return false }
        defer { try? ring.serial.unlink(from: holder) }  // no-op once moved back
        try putBack(ring, heldIn: holder)
        return true
    }

    /// ``settle(_:)`` for a ring the caller holds in `holder`, which cannot be gone: a
    /// detached ring that holds a key goes back (``restore(_:heldIn:under:)``); an empty
    /// one is left to go when its holders let it.
    private func putBack(_ ring: ServiceKeyring, heldIn holder: KeySerial) throws(KeyctlError) {
        guard try isDetached(ring), try !ring.serial.linkedKeys().isEmpty else { return }
        do {
            try restore(ring, heldIn: holder, under: ring.anchor.serial())
        } catch {
            throw error.underlying ?? KeyctlError(.fileExists, call: "keyctl_move")
        }
    }

    /// Whether the ring is missing from its anchor (a removal detached it). False when the
    /// anchor is gone: there is nowhere to put it back.
    private func isDetached(_ ring: ServiceKeyring) throws(KeyctlError) -> Bool {
        let anchor: KeySerial
        do { anchor = try ring.anchor.serial() } catch { return false }
        return try !anchor.linkedKeys().contains(ring.serial)
    }

    /// The common write, an existing item at its home level set again: without a
    /// deadline (and none before) `add_key` updates that same key in place; else a new
    /// key made like it is moved over it (``Placement/replace(_:of:named:deadline:)``). Either keeps
    /// its permissions, sharing and one home, so none of them is looked at again. False
    /// when the item is not at home, or the key was replaced or removed since the search
    /// (`add_key` then made a new one): the full store settles that.
    private func updateAtHome(_ bytes: UnsafeRawBufferPointer, forKey key: KeyName, until deadline: Deadline?) throws(KeychainError) -> Bool {
        let anchor = try home.anchor.serialForWriting()
        guard let (ring, ringInfo) = try ServiceKeyring.findDescribed(ringDescription(home.marker), under: anchor),
              try Placement.isLinked(ring, in: anchor),
              let existing = try Placement.search(ring: ring, for: key)
        else { return false }
        // An item kc gave a deadline has a record. Updating it in place would clear the
        // kernel's expiry first and drop the record after: killed in between, the
        // record would give the item a deadline again at the next save. So it is
        // displaced by a new key instead (whose serial no old record names), as a timed
        // store always is.
        let record = DeadlineRecords.record(of: existing)
        if deadline != nil || record != nil || ItemValue.needsFreshKey(bytes) {
            // The keyring is held meanwhile, as a new item's is (see ``storeNew``): a
            // `kc rm` of this item and the removal of the service it left empty may both
            // run between the search and the move.
            let holder = SpecialKeyring.thread.serial
            do throws(KeyctlError) { try ring.link(into: holder) } catch {
                if error.meansKeyIsGone { return false }
                throw KeychainError(error)
            }
            defer { try? ring.unlink(from: holder) }  // no-op once moved back
            let located = LocatedItem(ring: ring, item: existing, accessibility: home, ringInfo: ringInfo)
            guard try Placement.replace(bytes, of: located, named: key, deadline: deadline, displacing: true,
                                        record: record, like: located.likeOwnItem(named: key))
            else { return false }
            try Placement.kernel { () throws(KeyctlError) in
                try putBack(ServiceKeyring(serial: ring, anchor: home.anchor, marker: home.marker), heldIn: holder)
            }
            return true
        }
        let updated: KeySerial
        do {
            updated = try KeySerial.add(type: "user", description: key, payload: bytes, into: ring)
        } catch {
            if error.meansKeyIsGone { return false }
            throw KeychainError(error)
        }
        return updated == existing
    }

    /// Before a write: the item's copy with the lowest serial is moved into `home` (the
    /// same key, so level changes keep it), and any other copy is unlinked.
    /// Returns the key kept, if there was one.
    private func gather(_ key: KeyName, into home: ServiceKeyring, from rings: [ServiceKeyring]) throws(KeychainError) -> KeySerial? {
        let found = try Placement.copies(of: key, in: rings)
        guard let keep = found.min(by: { $0.item.rawValue < $1.item.rawValue }) else { return nil }
        try Placement.unlink(found.filter { $0.item != keep.item })
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

    /// Moves the item to the home level: the same kernel key changes keyring
    /// (`keyctl_move`), so its value, deadline and serial stay. False if there is none.
    func moveHome(_ key: KeyName) throws(KeychainError) -> Bool {
        let (homeRing, rings) = try ServiceKeyring.rings(of: name, home: home)
        let sharing = try sharingForWrite(rings: rings)
        for _ in 0..<8 {
            let found = try Placement.copies(of: key, in: rings)
            guard let keep = found.min(by: { $0.item.rawValue < $1.item.rawValue }) else { return false }
            if keep.ring == homeRing { break }
            do throws(KeyctlError) {
                // Not exclusive: a key of the same name at home is displaced, which is
                // the one-item rule (the moved key is the item).
                try keep.item.move(from: keep.ring.serial, to: homeRing.serial, exclusive: false)
                if let sharing { try Sharing.apply(sharing, to: keep.item, as: .item) }
                break
            } catch {
                if error.meansKeyIsGone || error.errno == .noSuchFileOrDirectory { continue }  // raced: look again
                throw KeychainError(error)
            }
        }
        try Placement.keepOneCopy(of: key, in: rings)
        return true
    }

    /// Sets (or with nil, clears) the kernel expiry of a found item, recording the
    /// deadline exactly. False if it vanished. In a group-writable share, an item loses
    /// members' write before it gets a deadline, and gets it back when the deadline goes
    /// (see ``Sharing``).
    ///
    /// A deadline for an item others may write is given by displacement, as a timed
    /// store is: a member's `keyctl_update` that passed its permission check before the
    /// write right was taken away could still land after the timeout was set, and clear
    /// it. The new key is made whole (value, no member write, deadline) before it replaces
    /// the old one, which a late update then changes harmlessly. It holds `saved` (the
    /// owner's value the journal keeps, if the caller has it) rather than the kernel's:
    /// without members' write it would count as the owner's own at the next lock.
    func setDeadline(_ deadline: Deadline?, of located: LocatedItem, saved: [UInt8]? = nil) throws(KeychainError) -> Bool {
        let seconds = deadline.map { UInt32(clamping: max($0.secondsLeft, 1)) } ?? 0
        if seconds > 0, let info = try? located.item.describe(), info.permissions != info.permissions.withoutWriteForOthers {
            var kernelValue: [UInt8]? = nil
            if saved == nil { kernelValue = try Placement.value(of: located.item) }
            guard var value = saved ?? kernelValue else { return false }
            kernelValue?.overwriteWithZeros()
            defer { value.overwriteWithZeros() }
            return try value.withValueBytes { bytes throws(KeychainError) in
                try Placement.replace(bytes, of: located, named: info.description, deadline: deadline, displacing: true, like: info)
            }
        }
        return try Placement.kernelUnlessGone { () throws(KeyctlError) -> Void in
            try DeadlineRecords.setTimeout(seconds, of: located.item, deadline: deadline)
            if seconds == 0, let sharing = Sharing(try located.ring.describe()), sharing.isGroupWritable {
                try Sharing.apply(sharing, to: located.item, as: .item, expiring: false)
            }
        } != nil
    }

    /// Removes every copy of the item. Returns whether there was one.
    func remove(_ key: KeyName) throws(KeychainError) -> Bool {
        try waitingOutBars { () throws(KeychainError) -> Bool in try removeCopies(of: key) }
    }

    private func removeCopies(of key: KeyName) throws(KeychainError) -> Bool {
        var removed: [KeySerial] = []
        for copy in try Placement.copies(of: key, in: ServiceKeyring.rings(of: name, startingWith: home)) {
            if try unlinkIgnoringGone(copy.item, from: copy.ring.serial) { removed.append(copy.item) }
        }
        DeadlineRecords.forget(removed)
        return !removed.isEmpty
    }

    /// Removes a found item from its keyring. Returns whether this call removed it.
    func remove(_ located: LocatedItem) throws(KeychainError) -> Bool {
        guard try unlinkIgnoringGone(located.item, from: located.ring) else { return false }
        DeadlineRecords.forget([located.item])
        return true
    }

    /// Drops a found item from the kernel, as `kc lock` does: the key is invalidated
    /// (`keyctl_invalidate`, which needs search permission), so it leaves every keyring at
    /// once and its serial reads nothing from then on; an unlink from the service's
    /// keyring would leave it readable by serial wherever else it is linked. A key that
    /// cannot be invalidated is unlinked. Returns whether this call dropped it.
    ///
    /// It is unlinked from its keyring first: a link that the kernel's collector prunes
    /// after an invalidation stays charged to the keyring owner's key quota (4 bytes) for
    /// as long as that keyring lives, while an unlink gives the 4 bytes back. (A user
    /// keyring that lives for months would otherwise lose its quota to `kc lock`s.)
    func drop(_ located: LocatedItem) throws(KeychainError) -> Bool {
        var unlinked = false
        var unlinkError: KeychainError?
        do { unlinked = try unlinkIgnoringGone(located.item, from: located.ring) } catch { unlinkError = error }
        do {
            try located.item.invalidate()
        } catch {
            // Gone once unlinked (it was linked nowhere else), or before this call.
            if let unlinkError, !error.meansKeyIsGone { throw unlinkError }
            if !unlinked { return false }
        }
        DeadlineRecords.forget([located.item])
        return true
    }

    /// Clears and unlinks every keyring of the service, in the service's removal turn
    /// (``ServiceRemovalTurn``).
    func removeAll() throws(KeychainError) {
        try ServiceRemovalTurn.taking(for: name) { (held) throws(KeychainError) in
            if held { liftBarsInTurn() }
            try waitingOutBars { () throws(KeychainError) in try removeAllInTurn() }
        }
    }

    private func removeAllInTurn() throws(KeychainError) {
        for ring in try ServiceKeyring.rings(of: name, startingWith: home) { try clearAndDetach(ring) }
    }

    /// Empties one of the service's keyrings (its items' deadline records first) and
    /// unlinks it from its anchor.
    func clearAndDetach(_ ring: ServiceKeyring) throws(KeychainError) {
        DeadlineRecords.forget((try? ring.serial.linkedKeys()) ?? [])
        _ = try Placement.kernelUnlessGone { () throws(KeyctlError) in try ring.serial.clear() }
        _ = try unlinkIgnoringGone(ring.serial, from: ring.anchor.serial())
    }

    /// Moves a found item (at `level`) into `target`'s keyring at that level under the
    /// same name: the same key, so it keeps its serial, value and deadline.
    ///
    /// The key is held in the thread keyring meanwhile: if the target's keyring is
    /// being removed as empty (``removeIfEmpty()``) and goes with it, the key is linked
    /// into a new one (see ``settle(_:)``).
    func move(_ located: LocatedItem, at level: Accessibility, named key: KeyName, to target: OwnService) throws(KeychainError) -> Bool {
        let holder = SpecialKeyring.thread.serial
        let held = (try? located.item.link(into: holder)) != nil
        defer { if held { try? located.item.unlink(from: holder) } }
        var destination = try ServiceKeyring.findOrCreate(service: target.name, marker: level.marker, anchor: level.anchor)
        do throws(KeyctlError) {
            try located.item.move(from: located.ring, to: destination.serial, exclusive: true)
            for _ in 0..<8 {
                if try settle(destination) { return true }
                guard held else { break }
                do throws(KeychainError) {
                    destination = try ServiceKeyring.findOrCreate(service: target.name, marker: level.marker, anchor: level.anchor)
                } catch {
                    throw error.underlying ?? KeyctlError(.noKey, call: "keyctl_search")
                }
                try located.item.link(into: destination.serial)
            }
            throw KeyctlError(.noKey, call: "keyctl_move")
        } catch {
            if error.meansKeyIsGone || error.errno == .noSuchFileOrDirectory { return false }
            if error.errno == .fileExists { throw .alreadyExists(service: target.name.description, name: key.description) }
            throw KeychainError(error)
        }
    }

    /// Renames the whole service: each of its keyrings gets a new one at the same level
    /// under the new name and every key moves over (`keyctl_move`), so every item keeps
    /// its serial, level, device-only flag and deadline. It takes the old name's
    /// keyrings out of their anchors in that name's removal turn (``ServiceRemovalTurn``).
    func rename(to newService: KeyName) throws(KeychainError) {
        try ServiceRemovalTurn.taking(for: name) { (held) throws(KeychainError) in
            if held { liftBarsInTurn() }
            try waitingOutBars { () throws(KeychainError) in try renameInTurn(to: newService) }
        }
    }

    private func renameInTurn(to newService: KeyName) throws(KeychainError) {
        let rings = try ServiceKeyring.rings(of: name, startingWith: home)
        guard !rings.isEmpty else { throw .noSuchService(name.description) }
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

    /// Creates the service's keyring at the home level, if it has none there yet
    /// (race-free, as for the first item written).
    func create() throws(KeychainError) {
        _ = try ServiceKeyring.findOrCreate(service: name, marker: home.marker, anchor: home.anchor)
    }

    /// Every keyring of the service, the home level's first.
    func rings() throws(KeychainError) -> [ServiceKeyring] {
        try ServiceKeyring.rings(of: name, startingWith: home)
    }

    /// Whether the service has a keyring at any level (it may hold no items). Stops at
    /// the first keyring found, so the common case is one `keyctl_search`.
    func exists() throws(KeychainError) -> Bool {
        // A question that changes nothing: a recent owner check of the keyring stands
        // (the mount asks it at every path walk through the service's directory).
        try !ServiceKeyring.rings(of: name, startingWith: home, stopAtFirst: true, trustingRecentCheck: true).isEmpty
    }
}
