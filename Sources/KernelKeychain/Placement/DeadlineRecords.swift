import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Exact deadlines, kept in the kernel beside the items: a keyring `kc.expiry` in the
/// user keyring holds one `user` key per timed item, described by the item's serial,
/// whose payload is the deadline in decimal seconds since the epoch, and which expires
/// with the item; a record whose item went earlier is unlinked at a timed write that
/// finds the table holding ``recordsKeptUnchecked`` records or more
/// (``unlinkRecordsOfGoneItems(_:in:)``), so the table holds the records of live items
/// and fewer than that of gone ones. No kernel call reads a key's expiry
/// back, and /proc/keys rounds it (13 days show as `1w`), so without this a new key made
/// for an old item (a rename, an import, a save of a timed item) could only be given a
/// shorter life.
///
/// A write reads the record alone, never /proc/keys (whose cost grows with every key
/// the caller can see): every timeout kc sets is recorded first, and fails if it cannot
/// be (a full key quota), so an item kc gave a lifetime always has its record; a store
/// without a timeout drops the item's record. A timeout set outside kc (`keyctl
/// timeout`) has no record: a save through kc clears it, as `keyctl update` does. The
/// listings (``Keychain/items()``, ``Keychain/item(_:)``) show what /proc/keys says,
/// and trust a record only where it agrees.
internal enum DeadlineRecords {
    static let keyringDescription: KeyName = "kc.expiry"

    /// The owner's uid only, with no possessor rights: another uid that shares the
    /// owner's session keyring (after su or runuser) must not plant a record that would
    /// lengthen a deadline. Records hold no secret; possession is not needed to use them.
    static let recordPermissions: KeyPermissions = .user(.all)

    /// A record found: the deadline, and where the record is, so that a write that
    /// replaces its item drops it without searching again.
    struct Record {
        var deadline: Deadline
        var key: KeySerial
        var table: KeySerial
    }

    /// Sets the item's kernel expiry to `seconds` from now (0: none, and the record
    /// goes) and records the deadline first. The kernel call is `keyctl_set_timeout`
    /// on the item; the record costs an `add_key` in the thread keyring, a
    /// `keyctl_setperm`, a `keyctl_set_timeout` and a `keyctl_move` into `table`
    /// (found or made if not given). With `deadline` (a copy of another key's), that
    /// moment is recorded; `seconds` must then be its time left.
    static func setTimeout(_ seconds: UInt32, of item: KeySerial, deadline: Deadline? = nil, table: KeySerial? = nil) throws(KeyctlError) {
        guard seconds > 0 else {
            // The record first: killed in between, the item keeps its expiry without a
            // record, and a save makes it last, as asked; the other way round a stale
            // record would give it a deadline again at the next save.
            forget([item])
            try item.setTimeout(seconds: 0)
            return
        }
        var recorded = Deadline.fromNow(seconds: UInt64(seconds))
        if let deadline, deadline.secondsSinceEpoch <= recorded.secondsSinceEpoch { recorded = deadline }
        try record(recorded, seconds: seconds, for: item, in: table)
        do throws(KeyctlError) {
            try item.setTimeout(seconds: seconds)
        } catch {
            forget([item])
            throw error
        }
    }

    /// Writes the record whole in the thread keyring (owner-only, expiring just after
    /// the item) and moves it into the table, displacing any old record of that serial.
    private static func record(_ deadline: Deadline, seconds: UInt32, for item: KeySerial, in table: KeySerial?) throws(KeyctlError) {
        let ring: KeySerial
        if let table {
            // Given by a write that replaces a recorded key and drops its record (or,
            // failing to place the new key, this one): the table does not grow, so it
            // is not looked over (``unlinkRecordsOfGoneItemsIfMany(in:)``).
            ring = table
        } else {
            do {
                ring = try writableTable()
            } catch {
                throw error.underlying ?? KeyctlError(.permissionDenied, call: "keyctl_search")
            }
            unlinkRecordsOfGoneItemsIfMany(in: ring)
        }
        var text = Array(String(deadline.secondsSinceEpoch).utf8)
        defer { text.overwriteWithZeros() }
        let thread = SpecialKeyring.thread.serial
        let record = try text.withUnsafeBytes { bytes in
            Result { () throws(KeyctlError) in
                try KeySerial.add(type: "user", description: KeyName(String(item.rawValue)), payload: bytes, into: thread)
            }
        }.get()
        do throws(KeyctlError) {
            try record.setPermissions(recordPermissions)
            // Two seconds past the item's own: the item's timeout is set after this, maybe
            // in the next second, and must never outlive its record (a save would then
            // take it for an item without a deadline).
            try record.setTimeout(seconds: seconds > UInt32.max - 2 ? seconds : seconds + 2)
            try record.move(from: thread, to: ring, exclusive: false)
        } catch {
            try? record.unlink(from: thread)
            throw error
        }
    }

    /// The table a record goes into: the one readers find (``record(of:)`` searches the
    /// user keyring for it) if it is the caller's own keyring, at a search and a describe;
    /// else found or made race-free directly in the user keyring, readied for writing
    /// (``Anchor/serialForWriting()``: its owner and mask checked), and any other uid's
    /// keyring of that name there unlinked (``findOrCreateKeyring(described:in:permissions:)``).
    /// A table of the caller's needs nothing of the user keyring's possession: records
    /// are made in the thread keyring and moved in with the owner's own write right.
    private static func writableTable() throws(KeychainError) -> KeySerial {
        if let found = try? Anchor.user.serial().search(type: "keyring", description: keyringDescription),
           let info = try? found.describe(), info.type == "keyring", info.uid == geteuid(),
           !ServiceKeyring.needsSecuring(info) {
            return found
        }
        return try findOrCreateKeyring(described: keyringDescription, in: Anchor.user.serialForWriting(),
                                       permissions: recordPermissions)
    }

    /// How many records the table may hold before a timed write looks for records of gone
    /// items: at most this many records of gone items are ever left charged to the
    /// user's key quota (of an ordinary user's 200 keys and 20,000 bytes, 16 keys and
    /// under 600 bytes), and a user with fewer timed items pays one `keyctl_read` per
    /// timed write for them rather than two calls per record.
    static let recordsKeptUnchecked = 16

    /// ``unlinkRecordsOfGoneItems(_:in:)`` once the table holds ``recordsKeptUnchecked``
    /// records or more (one `keyctl_read` tells); below that, nothing more. Every write
    /// that adds a record to the table comes here first (one that replaces a recorded
    /// key drops the old record, and the count stays), so the table grows past that
    /// many only by records of live items, while a timed write of a user with a few
    /// timed items costs one call for them (issue 39). Logins, which leave a whole
    /// session's timed items gone at once, are looked over whole at each vault load
    /// (``unlinkRecordsOfGoneItemsAtLoad()``): they leave none behind (issue 35).
    private static func unlinkRecordsOfGoneItemsIfMany(in table: KeySerial) {
        guard let records = try? table.linkedKeys(), records.count >= recordsKeptUnchecked else { return }
        unlinkRecordsOfGoneItems(records, in: table)
    }

    /// The whole table looked over, whatever it holds, before a vault load writes its
    /// timed items: a load starts a login's session (its session step), and the items the
    /// last login's session keyring held went with it, all at once, each leaving its
    /// record (issue 35). So a login leaves the key count as the one before left it. A
    /// search and a describe of the table (the caller's own, else nothing is done: a
    /// write finds or makes it as ``writableTable()`` does), a read of its links, and two
    /// calls per record.
    static func unlinkRecordsOfGoneItemsAtLoad() {
        guard let table = try? Anchor.user.serial().search(type: "keyring", description: keyringDescription),
              let info = try? table.describe(), info.type == "keyring", info.uid == geteuid(),
              !ServiceKeyring.needsSecuring(info), let records = try? table.linkedKeys() else { return }
        unlinkRecordsOfGoneItems(records, in: table)
    }

    /// Unlinks those of `records` (the table's, as read) whose item is gone: a describe
    /// of each record and, for a record still live, a describe of the item it names (two
    /// calls per timed item; a write without a deadline never comes here). An item goes
    /// at its deadline (its record two seconds later), but also long before: removed by
    /// another tool, invalidated, or dropped with the session keyring of a login that
    /// ended (`pam_keyinit revoke` at logout, or its last process gone). Each login's
    /// session step loads the timed when-unlocked items as new keys with new records, so
    /// pruning expired records only left one record per timed item and login until its
    /// deadline: three 30-day items filled an ordinary user's 200-key quota in about 60
    /// logins (issue 35).
    ///
    /// The kernel says cheaply that an item is gone: a describe of its serial fails with
    /// ENOKEY (destroyed, or waiting for the collector), EKEYREVOKED (revoked or
    /// invalidated) or EKEYEXPIRED; and a serial the kernel has since drawn for another
    /// key (it draws them at random) shows another type or owner. Any other failure keeps
    /// the record: a record dropped for a live item would make its next save drop the
    /// item's deadline.
    ///
    /// Unlinked, not left to the kernel: an expired or invalidated record stays charged
    /// to the user's key quota until the collector takes it (`kernel.keys.gc_delay`, five
    /// minutes, for an expired one), and the collector's prune of its link keeps the 4
    /// bytes the link cost charged for as long as the table lives (it lives in the user
    /// keyring); an unlink gives back both at once.
    private static func unlinkRecordsOfGoneItems(_ records: [KeySerial], in table: KeySerial) {
        for record in records where isOfGoneItem(record) {
            try? record.unlink(from: table)
        }
    }

    /// Whether `record` is expired, or names an item that is gone (see
    /// ``unlinkRecordsOfGoneItems(_:in:)``).
    private static func isOfGoneItem(_ record: KeySerial) -> Bool {
        let named: KeyDescription
        do throws(KeyctlError) {
            named = try record.describe()
        } catch {
            return error.meansKeyIsGone
        }
        guard let text = named.description.text, let serial = Int32(text) else { return false }
        do throws(KeyctlError) {
            let item = try KeySerial(rawValue: serial).describe()
            return item.type != "user" || item.uid != named.uid
        } catch {
            return error.meansKeyIsGone
        }
    }

    /// The record kc made for the item, or nil if it set no deadline: what a write
    /// copies to the item's new key or to its journal entry. A search of `kc.expiry`
    /// (one call for a user who never set a timeout) and of the record; for a record
    /// found, a describe (only the caller's own records count) and a read.
    static func record(of item: KeySerial) -> Record? {
        guard let table = try? SpecialKeyring.user.serial.search(type: "keyring", description: keyringDescription),
              let key = try? table.search(type: "user", description: KeyName(String(item.rawValue))),
              let info = try? key.describe(), info.uid == geteuid(),
              let text = try? key.withPayload(sizeHint: 32, { String(decoding: $0, as: UTF8.self) }),
              let seconds = Int64(text)
        else { return nil }
        return Record(deadline: Deadline(secondsSinceEpoch: seconds), key: key, table: table)
    }

    /// The deadline of ``record(of:)``.
    static func recordedDeadline(of item: KeySerial) -> Deadline? {
        record(of: item)?.deadline
    }

    /// Drops a record whose item was replaced by a new key.
    static func drop(_ record: Record) {
        try? record.key.unlink(from: record.table)
    }

    /// The item's deadline given what /proc/keys shows of it: the record's if it agrees,
    /// else the earliest moment the rounded value allows. Nil for an item without expiry.
    static func deadline(of item: KeySerial, shown expiry: ProcKeysEntry.Expiry) -> Deadline? {
        let now = Deadline.now
        switch expiry {
        case .never:
            return nil
        case .expired:
            return Deadline(secondsSinceEpoch: now)
        case .within(let seconds, let unit):
            let earliest = now + Int64(seconds)
            if let recorded = recorded(for: item),
               recorded >= earliest - 1, recorded <= earliest + Int64(unit) {
                return Deadline(secondsSinceEpoch: recorded)
            }
            return Deadline(secondsSinceEpoch: earliest, isExact: seconds < 60)
        }
    }

    private static func recorded(for item: KeySerial) -> Int64? {
        guard let ring = try? SpecialKeyring.user.serial.search(type: "keyring", description: keyringDescription),
              let record = try? ring.search(type: "user", description: KeyName(String(item.rawValue))),
              let text = try? record.withPayload(sizeHint: 32, { String(decoding: $0, as: UTF8.self) })
        else { return nil }
        return Int64(text)
    }

    /// Drops the records of keys that are no longer items: removed, or replaced by a
    /// new key (a timed save makes one, with a record of its own). Without this, every
    /// timed save would leave a record behind until the old deadline, and an ordinary
    /// user's 200-key quota would fill. Best effort; costs nothing more than one search
    /// for a user who never set a timeout.
    static func forget(_ items: [KeySerial]) {
        guard !items.isEmpty,
              let ring = try? SpecialKeyring.user.serial.search(type: "keyring", description: keyringDescription)
        else { return }
        for item in items {
            if let record = try? ring.search(type: "user", description: KeyName(String(item.rawValue))) {
                try? record.unlink(from: ring)
            }
        }
    }

    /// Every item's deadline that /proc/keys shows, by serial (one read of /proc/keys).
    static func shownExpiries() -> [KeySerial: ProcKeysEntry.Expiry] {
        guard let text = readProcFile("/proc/keys") else { return [:] }
        var result: [KeySerial: ProcKeysEntry.Expiry] = [:]
        for entry in ProcKeysEntry.parse(text) { result[entry.serial] = entry.expiry }
        return result
    }

    /// One item's deadline, reading /proc/keys: only its own line is parsed (the file
    /// lists every key the caller can view, and parsing them all cost more than the
    /// rest of `git-credential-kc get`).
    static func deadline(of item: KeySerial) -> Deadline? {
        guard let bytes = readProcBytes("/proc/keys") else { return nil }
        let hex = String(UInt32(bitPattern: item.rawValue), radix: 16)
        let prefix = Array((String(repeating: "0", count: max(0, 8 - hex.count)) + hex + " ").utf8)
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            if end - start > prefix.count, bytes[start..<start + prefix.count].elementsEqual(prefix) {
                let line = String(decoding: bytes[start..<end], as: UTF8.self)
                guard let shown = ProcKeysEntry(parsing: Substring(line))?.expiry else { return nil }
                return deadline(of: item, shown: shown)
            }
            start = end + 1
        }
        return nil
    }
}

extension KeySerial {
    /// A new `user` key holding `bytes`, made whole before anyone can see it: in the
    /// thread keyring, with `original`'s group and permissions and the deadline
    /// (recorded; nil: none). Place it with ``place(in:)``. An empty value is held as
    /// ``ItemValue`` says: one NUL byte, marked empty.
    static func prepare(_ bytes: UnsafeRawBufferPointer, named name: KeyName, like original: KeyDescription,
                        until deadline: Deadline?, table: KeySerial? = nil) throws(KeyctlError) -> KeySerial {
        let thread = SpecialKeyring.thread.serial
        let fresh = try ItemValue.withPayload(of: bytes) { (payload) throws(KeyctlError) in
            try KeySerial.add(type: "user", description: name, payload: payload, into: thread)
        }
        do {
            if original.gid != getegid() { try fresh.setGroup(original.gid) }
            // A key with a deadline is never writable by members (see ``Sharing``).
            let permissions = deadline == nil ? original.permissions : original.permissions.withoutWriteForOthers
            try fresh.setPermissions(ItemValue.permissions(permissions, holding: bytes))
            if let deadline {
                let seconds = UInt32(clamping: max(deadline.secondsLeft, 1))
                try DeadlineRecords.setTimeout(seconds, of: fresh, deadline: deadline, table: table)
            }
        } catch {
            try? fresh.unlink(from: thread)
            throw error
        }
        return fresh
    }

    /// Moves a key made by ``prepare(_:named:like:until:)`` into `ring`, displacing the
    /// key of the same name there in one step. False (and the key dropped) if the ring
    /// is gone.
    func place(in ring: KeySerial) throws(KeyctlError) -> Bool {
        let thread = SpecialKeyring.thread.serial
        do {
            try move(from: thread, to: ring, exclusive: false)
            return true
        } catch {
            try? unlink(from: thread)
            // Its deadline record, if it has one, names a key that is gone now.
            DeadlineRecords.forget([self])
            if error.meansKeyIsGone { return false }
            throw error
        }
    }
}
