import Age
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What an unlock did, item by item where something went wrong.
public struct VaultUnlockReport: Sendable {
    /// Items put into the kernel, by level.
    public var loaded: [Accessibility.Level: Int] = [:]
    /// Items the kernel already held with the vault's value (an unlock twice).
    public var alreadyLoaded = 0
    /// Items whose file was rewritten from the kernel, which held a newer value (a
    /// write that was interrupted after its kernel change).
    public var updatedFromKernel = 0
    /// `when-unlocked` items whose kernel copy in this login session was older than
    /// their file (another login of the user wrote it since this one loaded): the
    /// kernel's copy took the file's value.
    public var updatedFromVault = 0
    /// Items past their deadline: not loaded, and their files removed.
    public var expiredRemoved = 0
    /// Items at levels this unlock does not load (the PAM steps load some levels each).
    public var waiting = 0
    /// Files that could not be read or opened, by path, with the reason; the rest loaded.
    public var unreadable: [Problem] = []
    /// Folders of the vault kc did not look in (another uid's, open to others, not a
    /// folder), by path, with what is wrong and the fix: their items were not loaded.
    public var skippedFolders: [Problem] = []
    /// Items the kernel refused to take because the key quota is full.
    public var notLoadedForQuota: [String] = []
    /// Items that failed to load for another reason.
    public var failed: [Problem] = []
    /// Items the kernel holds with a newer value than their file (a write interrupted
    /// after its kernel change) whose file could not be written again from it (a full
    /// disk): they are loaded, the kernel's value stays, but the vault still holds the old.
    public var notSavedAgain: [Problem] = []
    /// Items of a group-writable share whose kernel value is not their file's: a member
    /// may have written it, and a vault keeps only what its owner wrote. The kernel's
    /// value stays until the owner stores one; the file keeps the owner's.
    public var notSavedFromMembers: [String] = []
    /// At boot: files the host key cannot open wait for the user's unlock.
    internal var waitingForUnlock = false
    /// The uid's key quota after the unlock, when something did not fit.
    public var quota: KeyQuota?

    public struct Problem: Sendable, Hashable {
        public var what: String
        public var reason: String
    }

    public var loadedCount: Int { loaded.values.reduce(0, +) }
    public var isClean: Bool { unreadable.isEmpty && skippedFolders.isEmpty && notLoadedForQuota.isEmpty && failed.isEmpty && notSavedAgain.isEmpty }
}

extension VaultUnlockReport.Problem {
    /// A file or folder kc did not use, with why and the fix (a refusal's own words).
    init(_ path: VaultPath, _ error: KeychainError) {
        what = path.description
        if case .vaultUnsafe(_, let problem, let fix) = error {
            reason = "\(problem); \(fix)"
        } else {
            reason = error.description
        }
    }
}

extension Vault {
    /// Every level: what `kc unlock` loads.
    public static let allLevels = Set(Accessibility.Level.allCases)

    /// Opens the identity with the passphrase, keeps it in the user keyring while the
    /// vault is unlocked, and loads every item at `levels` into the kernel: each into the
    /// keyring of its level, with its deadline. Items the kernel already holds are left
    /// as they are (the kernel's value is the newer; its file is rewritten if they
    /// differ); expired items are removed. Unreadable files are reported by name and
    /// the rest still load.
    ///
    /// - Throws: ``KeychainError/wrongPassphrase(path:)`` (nothing is loaded then) and the
    ///   vault's file errors.
    public func unlock(passphrase: [UInt8], levels: Set<Accessibility.Level> = Vault.allLevels) throws(KeychainError) -> VaultUnlockReport {
        try requireExisting()
        let identity: AgeX25519Identity
        do {
            identity = try self.identity(passphrase: passphrase)
        } catch {
            var problem = error.description
            if case .wrongPassphrase = error, (try? status())?.loginPasswordAhead != nil {
                problem += " (the login password was changed without the old one reaching the vault: unlock with the vault's old passphrase, then run 'kc vault passwd')"
            }
            recordStatus(unlocked: false, error: problem)
            throw error
        }
        return try load(with: Self.identities(for: identity), levels: levels, stash: identity)
    }

    /// Loads the items at `levels` with the identity an earlier unlock left in the user
    /// keyring (the PAM session step, which has no password). Nil if the vault is locked.
    public func unlockWithStashedIdentity(levels: Set<Accessibility.Level>) throws(KeychainError) -> VaultUnlockReport? {
        try requireExisting()
        guard let identity = VaultKeys.stashed(for: directory) else { return nil }
        return try load(with: Self.identities(for: identity), levels: levels, stash: nil)
    }

    /// Locks the vault: drops the items at `levels` that the vault holds from the kernel
    /// (as a screen lock would; items stored with `--ephemeral` stay) and forgets the
    /// identity. Returns how many items were dropped, whether it was unlocked, and the
    /// folders kc will not use (open to others, another user's), whose items it could not
    /// drop: each with what is wrong and the fix, as `kc unlock` names them.
    ///
    /// Nothing the kernel holds is lost: an item whose file does not hold the kernel's
    /// value and level (a write killed between its kernel change and its commit) is
    /// saved from the kernel first. A dropped key is invalidated, so its serial reads
    /// nothing afterwards.
    ///
    /// A vault unlocked for a folder that is gone (writes refuse then: see
    /// ``KeychainError/vaultMissing(path:problem:)``) is only forgotten: nothing is
    /// dropped, and writes from then on are kept in the kernel only, as without a vault.
    @discardableResult
    public func lock(levels: Set<Accessibility.Level> = [.whenUnlocked]) throws(KeychainError)
        -> (dropped: Int, wasUnlocked: Bool, skipped: [VaultUnlockReport.Problem]) {
        if !exists, VaultKeys.removeStash(for: directory) { return (0, true, []) }
        try requireExisting()
        return try directory.withLock { _ throws(KeychainError) in
            let identities = VaultKeys.stashed(for: directory).map(Self.identities(for:))
            if let identities { settleStaged(with: identities, keepingUnopened: true) }
            var dropped = 0
            var shown: [KeySerial: ProcKeysEntry.Expiry]? = nil
            var skipped: [VaultUnlockReport.Problem] = []
            let lastLoad = LoginSession.lastLoad(of: directory.root)
            for accessibility in Accessibility.allCases where levels.contains(accessibility.level) {
                for (service, name) in files(at: accessibility, skipped: &skipped) {
                    if try drop(name, in: service, levels: levels, identities: identities, lastLoad: lastLoad, shown: &shown) { dropped += 1 }
                }
            }
            let wasUnlocked = VaultKeys.removeStash(for: directory)
            return (dropped, wasUnlocked, skipped)
        }
    }

    /// Drops one item from the kernel if it is at one of `levels`, after making its file
    /// hold what the kernel holds. With no identity to open the file (the vault was
    /// already locked), the file is written again from the kernel. `shown`: the
    /// deadlines /proc/keys shows, read once for the whole lock. A file another login
    /// changed since this session loaded (``LoginSession/lastLoad(of:)``) is newer than this
    /// session's copy, and is left as it is.
    private func drop(_ name: KeyName, in service: KeyName, levels: Set<Accessibility.Level>,
                      identities: [AgeX25519Identity]?, lastLoad: Int64?, shown: inout [KeySerial: ProcKeysEntry.Expiry]?) throws(KeychainError) -> Bool {
        let own = OwnService(name: service, home: .whenUnlocked)
        guard let located = try own.locate(name, exactLevel: true), let level = located.accessibility,
              var value = try Placement.value(of: located.item)
        else { return false }
        defer { value.overwriteWithZeros() }
        let deadline = located.shownDeadline(using: &shown)
        if !Placement.othersMayWrite(located.item),
           !fileIsNewer(at: level, of: name, in: service, thanLoad: lastLoad),
           !fileHolds(value, at: level, until: deadline, of: name, in: service, identities: identities) {
            try write(VaultRecord(service: service, name: name, accessibility: level, deadline: deadline, value: value))
        }
        guard levels.contains(level.level) else { return false }
        return try own.drop(located)
    }

    /// Whether the item's file at `level` was written after this login session's last
    /// load of the vault (another login's write, since every write of kc's goes to the
    /// file first): then this session's `when-unlocked` copy is the older one. Only
    /// `when-unlocked` copies can be behind: the other levels' keyrings are the user's
    /// and the host's, one copy for every session. The file's change time is the
    /// filesystem's coarse clock, which can run a few milliseconds behind the one the
    /// load was timed with: a change that close to the load counts as after it.
    internal func fileIsNewer(at level: Accessibility, of name: KeyName, in service: KeyName, thanLoad lastLoad: Int64?) -> Bool {
        guard level.level == .whenUnlocked, let lastLoad,
              let info = try? directory.status(of: directory.itemFile(level, service, name))
        else { return false }
        let changed = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
        return changed >= lastLoad - 50_000_000
    }

    /// Whether the item's file at `level` opens to exactly `value` and `deadline`.
    private func fileHolds(_ value: [UInt8], at level: Accessibility, until deadline: Deadline?, of name: KeyName, in service: KeyName,
                           identities: [AgeX25519Identity]?) -> Bool {
        guard let identities else { return false }
        var report = VaultUnlockReport()
        guard var record = open(directory.itemFile(level, service, name), identities: identities, report: &report) else { return false }
        defer { record.value.overwriteWithZeros() }
        return record.service == service && record.name == name && record.accessibility == level
            && record.deadline?.secondsSinceEpoch == deadline?.secondsSinceEpoch
            && value.withUnsafeBytes { constantTimeEquals($0, record.value) }
    }

    /// Files a writer staged in `tmp/` but never committed: it was killed (or its commit
    /// failed) after staging, before or after its kernel change. Under the lock no write
    /// is in progress. A file whose item the kernel holds with its value and level is
    /// the kernel's state: it is committed, so nothing the kernel holds is missing from
    /// the vault. Any other is removed; with `keepingUnopened`, one these identities
    /// cannot open waits for an unlock that can.
    private func settleStaged(with identities: [AgeX25519Identity], keepingUnopened: Bool) {
        for name in directory.entries(of: directory.temporaryFolder) {
            let path = directory.temporaryFolder.appending(bytes: name)
            var report = VaultUnlockReport()
            report.waitingForUnlock = keepingUnopened
            guard var record = open(path, identities: identities, report: &report) else {
                if report.waiting == 0 || !keepingUnopened { directory.remove(path) }
                continue
            }
            defer { record.value.overwriteWithZeros() }
            if kernelHolds(record) {
                try? commit(VaultDirectory.StagedFile(path: path), for: record)
            } else {
                directory.remove(path)
            }
        }
    }

    /// Whether the kernel holds the record's item with its value at its level.
    private func kernelHolds(_ record: VaultRecord) -> Bool {
        let own = OwnService(name: record.service, home: record.accessibility)
        guard let located = try? own.locate(record.name, exactLevel: true), located.accessibility == record.accessibility,
              var value = try? Placement.value(of: located.item)
        else { return false }
        defer { value.overwriteWithZeros() }
        return value.withUnsafeBytes { constantTimeEquals($0, record.value) }
    }

    /// The services and names of the files at one level. A folder kc will not use (see
    /// ``VaultDirectory/unusableFolder(_:)``) is named in `skipped`.
    internal func files(at accessibility: Accessibility, skipped: inout [VaultUnlockReport.Problem]) -> [(service: KeyName, name: KeyName)] {
        let level = directory.levelFolder(accessibility)
        var found: [(service: KeyName, name: KeyName)] = []
        for service in directory.entries(of: level, skipped: &skipped) {
            for name in directory.entries(of: level.appending(bytes: service), skipped: &skipped) {
                found.append((KeyName(bytes: service), KeyName(bytes: name)))
            }
        }
        return found
    }

    /// The vault's identity and, on a machine with an id, its device-only identity.
    static func identities(for identity: AgeX25519Identity) -> [AgeX25519Identity] {
        guard let machine = VaultKeys.machineID(), let device = try? VaultKeys.deviceIdentity(from: identity, machineID: machine) else {
            return [identity]
        }
        return [identity, device]
    }

    /// Loads the items at `levels` that `identities` open. With `stash` (an unlock with
    /// the passphrase), the identity is kept in the user keyring first, and `always`
    /// files are encrypted again to a host key made since they were written. `boot`:
    /// the host key's load at boot, where files it cannot open just wait.
    internal func load(with identities: [AgeX25519Identity], levels: Set<Accessibility.Level>, stash: AgeX25519Identity?,
                       boot: Bool = false) throws(KeychainError) -> VaultUnlockReport {
        try directory.withLock { _ throws(KeychainError) in
            var hostToAdd: AgeX25519Recipient? = nil
            if let identity = stash {
                try VaultKeys.stash(identity, for: directory)
                try? recordDeviceRecipient(for: identity)
                try restoreRecipient(of: identity)
                hostToAdd = hostRecipientNotYetUsed()
            }
            // A load of when-unlocked items opens this login session to them: reads that
            // miss here may load them from the vault later (``LoginSession``).
            if levels.contains(.whenUnlocked), !boot { try? LoginSession.mark() }
            settleStaged(with: identities, keepingUnopened: boot)
            // This session's copies were the vault's as of its last load; from the start
            // of this one they are again (a file changed after it is caught next time).
            let loadsSession = levels.contains(.whenUnlocked) && !boot
            let lastLoad = loadsSession ? LoginSession.lastLoad(of: directory.root) : nil
            let started = VaultRecord.nowNanoseconds

            var report = VaultUnlockReport()
            report.waitingForUnlock = boot
            var byItem: [ItemKey: [(Accessibility, VaultPath)]] = [:]
            var order: [ItemKey] = []
            _ = directory.entries(of: directory.itemsFolder, skipped: &report.skippedFolders)
            for accessibility in Accessibility.allCases {
                for (service, name) in files(at: accessibility, skipped: &report.skippedFolders) {
                    let key = ItemKey(service: service, name: name)
                    if byItem[key] == nil { order.append(key) }
                    byItem[key, default: []].append((accessibility, directory.itemFile(accessibility, service, name)))
                }
            }
            // The records of the timed items the last session held, gone with it.
            DeadlineRecords.unlinkRecordsOfGoneItemsAtLoad()
            var shown: [KeySerial: ProcKeysEntry.Expiry]? = nil
            for key in order {
                settle(key, files: byItem[key] ?? [], identities: identities, levels: levels,
                       addingHostKey: hostToAdd != nil, lastLoad: lastLoad, report: &report, shown: &shown)
            }
            if loadsSession { LoginSession.recordLoad(of: directory.root, at: started) }
            if let host = hostToAdd { try? directory.commit(directory.stage(Array((host.encoded + "\n").utf8)), to: directory.hostRecipientFile) }
            if !report.notLoadedForQuota.isEmpty { report.quota = KeyQuota.current() }
            let problems = (report.skippedFolders + report.unreadable + report.failed).map { "\($0.what): \($0.reason)" }
                + report.notSavedAgain.map { "\($0.what) (loaded; its newer value not saved): \($0.reason)" }
                + (report.notLoadedForQuota.isEmpty ? [] : ["\(report.notLoadedForQuota.count) items did not fit in the key quota"])
            // The boot load does not unlock the vault; it reports only what went wrong.
            if !boot || !problems.isEmpty {
                recordStatus(unlocked: !boot, error: problems.isEmpty ? nil : problems.joined(separator: "; "), clearsError: stash != nil)
            }
            return report
        }
    }

    /// Loads one item with the stashed identity (a read missed it in the kernel), through
    /// ``loadOnDemand(_:)``. False if the vault is locked.
    ///
    /// - Throws: ``KeychainError/vaultKeepsForLoginSessions(service:item:)`` for a
    ///   `when-unlocked` item outside a login session that unlocked.
    internal func reload(_ name: KeyName, in service: KeyName) throws(KeychainError) -> Bool {
        guard let report = try loadOnDemand([(service, name)]) else { return false }
        if let problem = report.unreadable.first ?? report.failed.first {
            throw .vaultCrypto(path: problem.what, problem.reason)
        }
        if !report.notLoadedForQuota.isEmpty {
            throw .notEnoughQuota(what: "\(service)/\(name) from the vault", keys: 1, bytes: 0, usage: KeyQuota.current() ?? KeyQuota(uid: getuid(), keys: 0, maxKeys: 0, bytes: 0, maxBytes: 0))
        }
        if report.loadedCount == 0, report.alreadyLoaded == 0, report.updatedFromKernel == 0,
           levels(ofItem: name, in: service).contains(where: { $0.level == .whenUnlocked }),
           !Self.levelsLoadedOnDemand().contains(.whenUnlocked) {
            throw .vaultKeepsForLoginSessions(service: service.description, item: name.description)
        }
        return true
    }

    /// One item at unlock or reload: its newest file is opened; expired, it is removed;
    /// at a level this load covers, it goes into the kernel (``load(_:report:shown:)``).
    /// `addingHostKey`: an `always` file is written again so the host key can open it.
    /// `shown`: the deadlines /proc/keys shows, read once for the whole load.
    internal func settle(_ key: ItemKey, files: [(Accessibility, VaultPath)], identities: [AgeX25519Identity],
                        levels: Set<Accessibility.Level>, addingHostKey: Bool, lastLoad: Int64? = nil, report: inout VaultUnlockReport,
                        shown: inout [KeySerial: ProcKeysEntry.Expiry]?) {
        guard var record = newestRecord(of: key, in: files, identities: identities, report: &report) else { return }
        defer { record.value.overwriteWithZeros() }
        if record.isExpired {
            removeItem(record.name, in: record.service)
            report.expiredRemoved += 1
            return
        }
        if addingHostKey, record.accessibility.level == .always { try? write(record) }
        if levels.contains(record.accessibility.level) {
            load(record, lastLoad: lastLoad, report: &report, shown: &shown)
        } else {
            report.waiting += 1
        }
    }

    internal struct ItemKey: Hashable {
        var service: KeyName
        var name: KeyName
    }

    /// Opens the item's files; if a crash left it at two levels, the newer write wins
    /// and the other file goes.
    private func newestRecord(of key: ItemKey, in files: [(Accessibility, VaultPath)], identities: [AgeX25519Identity],
                              report: inout VaultUnlockReport) -> VaultRecord? {
        var newest: (record: VaultRecord, file: VaultPath)? = nil
        var older: [VaultPath] = []
        for (accessibility, file) in files {
            guard let record = open(file, identities: identities, report: &report) else { continue }
            if report.waitingForUnlock && record.owner != geteuid() {
                report.unreadable.append(.init(what: file.description, reason: "was written by \(record.owner.map { "uid \($0)'s" } ?? "another user's") vault, not this user's: a copy of another user's item; not loaded"))
                continue
            }
            guard record.service == key.service, record.name == key.name, record.accessibility == accessibility else {
                report.unreadable.append(.init(what: file.description, reason: "holds another item (\(record.service)/\(record.name), \(record.accessibility.name)): it was renamed or moved on disk; not loaded"))
                continue
            }
            if let current = newest {
                if record.written > current.record.written {
                    older.append(current.file)
                    newest = (record, file)
                } else {
                    older.append(file)
                }
            } else {
                newest = (record, file)
            }
        }
        for file in older { directory.remove(file) }
        return newest?.record
    }

    /// The value the vault holds for an item, opened with the stashed identity; nil if
    /// it holds no file of it. Throws ``KeychainError/vaultLockedForMembersItem(service:item:)``
    /// if the vault is locked, and the file's problem if it cannot be opened.
    internal func savedValue(of name: KeyName, in service: KeyName) throws(KeychainError) -> [UInt8]? {
        let levels = levels(ofItem: name, in: service)
        guard !levels.isEmpty else { return nil }
        guard let identity = VaultKeys.stashed(for: directory) else {
            throw .vaultLockedForMembersItem(service: service.description, item: name.description)
        }
        var report = VaultUnlockReport()
        let files = levels.map { ($0, directory.itemFile($0, service, name)) }
        guard let record = newestRecord(of: ItemKey(service: service, name: name), in: files,
                                        identities: Self.identities(for: identity), report: &report) else {
            let problem = report.unreadable.first
            throw .vaultCrypto(path: problem?.what ?? directory.itemFile(levels[0], service, name).description,
                               problem?.reason ?? "cannot be opened")
        }
        return record.value
    }

    /// Decrypts and parses one file; nil (and a report line) if it cannot be.
    private func open(_ file: VaultPath, identities: [AgeX25519Identity], report: inout VaultUnlockReport) -> VaultRecord? {
        let sealed: [UInt8]
        do {
            guard let bytes = try directory.read(file, limit: 256 << 10) else { return nil }  // removed meanwhile
            sealed = bytes
        } catch {
            report.unreadable.append(.init(file, error))
            return nil
        }
        var plain: [UInt8]
        do {
            plain = try Age.decrypt(sealed, identities: identities)
        } catch .noMatchingIdentity {
            if report.waitingForUnlock {
                report.waiting += 1
                return nil
            }
            let deviceOnly = file.description.contains("+this-device-only/")
            report.unreadable.append(.init(what: file.description, reason: deviceOnly
                ? "is encrypted to another machine's device key (device-only items do not move with the vault); unlock on that machine, or move it out of the vault folder if it is not wanted here"
                : "is encrypted to another key, not this vault's; restore it from the vault it came from, or move it out of the vault folder"))
            return nil
        } catch {
            report.unreadable.append(.init(what: file.description, reason: "is damaged (\(error)); restore it from a backup of the vault folder"))
            return nil
        }
        defer { plain.overwriteWithZeros() }
        guard let record = VaultRecord(decoding: plain) else {
            report.unreadable.append(.init(what: file.description, reason: "opens but is not a kc vault item; move it out of the vault folder"))
            return nil
        }
        return record
    }

    /// Puts one item into the kernel through ``Placement``, unless the kernel has it
    /// already: with another value or level, the kernel's is the newer (a write made
    /// around the vault) and the file is written again from it, unless the file changed
    /// since this session's last load (another login wrote it): then the file's is the
    /// newer, and this session's copy takes it.
    private func load(_ record: VaultRecord, lastLoad: Int64?, report: inout VaultUnlockReport, shown: inout [KeySerial: ProcKeysEntry.Expiry]?) {
        let what = "\(record.service)/\(record.name)"
        do {
            let own = OwnService(name: record.service, home: record.accessibility)
            if let present = try own.locate(record.name, exactLevel: true) {
                var value = try Placement.value(of: present.item) ?? []
                defer { value.overwriteWithZeros() }
                let same = value.withUnsafeBytes { constantTimeEquals($0, record.value) }
                let deadline = present.shownDeadline(using: &shown)
                if same, present.accessibility == record.accessibility,
                   deadline?.secondsSinceEpoch == record.deadline?.secondsSinceEpoch {
                    report.alreadyLoaded += 1
                } else if Placement.othersMayWrite(present.item) {
                    // An interrupted write of the owner's was settled from tmp/ already.
                    report.notSavedFromMembers.append(what)
                } else if fileIsNewer(at: record.accessibility, of: record.name, in: record.service, thanLoad: lastLoad) {
                    try own.storeCopy(record.value, forKey: record.name, until: record.deadline)
                    report.updatedFromVault += 1
                } else {
                    do {
                        try saveFromKernel(record.name, in: record.service)
                        report.updatedFromKernel += 1
                    } catch {
                        // It is loaded: the kernel holds it, only its file is behind.
                        report.notSavedAgain.append(.init(what: what, reason: error.description))
                    }
                }
                return
            }
            try own.storeCopy(record.value, forKey: record.name, until: record.deadline)
            report.loaded[record.accessibility.level, default: 0] += 1
        } catch .quotaExceeded {
            report.notLoadedForQuota.append(what)
        } catch {
            report.failed.append(.init(what: what, reason: error.description))
        }
    }
}
