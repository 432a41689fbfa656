import KernelKeychain
import Keyrings
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The Secret Service's items over the keychain: values in kc items (the kernel, and the
/// vault as `kc set` saves them), everything else in the ``SecretIndex``.
///
/// Items kc-secretd did not make (`kc set`, the mount, the library) are items too: they
/// show with the attributes `service` and `username` (their service and name), in the
/// `login` collection whatever their level: it is the default, the one clients search
/// (python keyring searches no other).
final class SecretStore {
    static let login = "login"
    static let session = "session"

    /// Nil while the vault is locked (or the saved index cannot be read: then logged).
    private(set) var index: SecretIndex?
    /// Collections a client locked (`Lock`): their secrets are refused over D-Bus until
    /// `Unlock`, which needs no prompt while the vault is unlocked.
    private(set) var lockedByClient: Set<String> = []
    /// Whether the index lives only in this process: no vault, and no folder for the
    /// boot's file (``BootIndexFile``) that kc-secretd may use.
    private(set) var inMemoryOnly = false
    /// Where the index is kept without a vault (the boot's file); nil with one, or in memory.
    private(set) var bootIndexLocation: String?
    /// The saved index as last read or written (``IndexHome/stamp()``): another
    /// kc-secretd of the same user (on another session bus) may change it.
    private var stamp: [Int]?
    /// Why the index could not be read, for the calls refused meanwhile.
    private var loadFailure: BusError?
    /// The vault, resolved once it is found (its path is fixed for the process); while
    /// there is none, looked for again at most every two seconds, so `kc vault init`
    /// is seen without a check of the folders above it on every call.
    private var foundVault: Vault?
    private var vaultLookedFor: time_t = 0
    /// The boot's file, for a user without a vault (its folder is checked at each use).
    private lazy var bootFile: Result<BootIndexFile, BusError> = BootIndexFile.current()
    /// The homes whose leftovers (a staged copy of a killed save) this daemon removed.
    private var tidied: Set<String> = []
    /// The last reason the boot's file could not be used, logged once.
    private var reportedFolderProblem: String?

    private func vault() throws(KeychainError) -> Vault? {
        if let foundVault { return foundVault }
        let now = time(nil)
        guard now - vaultLookedFor >= 2 || vaultLookedFor == 0 else { return nil }
        vaultLookedFor = now
        foundVault = try Vault.current()
        return foundVault
    }

    init() {
        _ = loadIndex()
    }

    // MARK: The index

    /// Where the index is kept now: the vault's document if there is a vault, else the
    /// boot's file if its folder may be used; nil to keep it in memory (logged once).
    private func home() throws(BusError) -> IndexHome? {
        if let vault = try indexVault() { return VaultIndexHome(vault: vault) }
        switch bootFile {
        case .failure(let error):
            noteFolderProblem(error.message)
            return nil
        case .success(let file):
            do {
                close(try file.openFolder())
                return file
            } catch {
                noteFolderProblem(error.message)
                return nil
            }
        }
    }

    private func noteFolderProblem(_ problem: String) {
        guard problem != reportedFolderProblem else { return }
        reportedFolderProblem = problem
        Log.error("no vault, and the index cannot be kept in a file (\(problem)): attributes are kept only while this kc-secretd runs")
    }

    /// Reads the index if it is not loaded yet; false while the vault is locked (or the
    /// saved index cannot be read: then logged).
    @discardableResult
    func loadIndex() -> Bool {
        if index != nil { return true }
        do {
            guard let home = try home() else {
                inMemoryOnly = true
                bootIndexLocation = nil
                index = Self.withBuiltins(SecretIndex())
                return true
            }
            inMemoryOnly = false
            bootIndexLocation = home is BootIndexFile ? home.location : nil
            if !tidied.contains(home.location) {
                home.tidy()
                tidied.insert(home.location)
            }
            // The stamp before the read: a newer file that lands in between is read again
            // later, never taken for the one read here.
            let seen = home.stamp()
            index = Self.withBuiltins(try home.read() ?? SecretIndex())
            stamp = seen
            loadFailure = nil
            return true
        } catch {
            if error != Self.vaultLocked, error != loadFailure { Log.error(error.message) }
            loadFailure = error
            return false
        }
    }

    private static func withBuiltins(_ index: SecretIndex) -> SecretIndex {
        var index = index
        let now = Self.now
        for (name, label) in [(login, "Login"), (session, "Session")] where index.collections[name] == nil {
            index.collections[name] = CollectionRecord(name: name, label: label, created: now, modified: now, isCustom: false)
        }
        if index.aliases["default"] == nil { index.aliases["default"] = login }
        // libsecret's SECRET_COLLECTION_SESSION is the alias `session`.
        if index.aliases["session"] == nil { index.aliases["session"] = session }
        return index
    }

    static var now: UInt64 { UInt64(max(0, time(nil))) }

    /// When the saved index was last looked at (CLOCK_MONOTONIC, in milliseconds).
    private var stampCheckedAt: Int64 = 0

    private static var monotonicMilliseconds: Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// The index, read again if the saved one changed since this process last saw it:
    /// looked at no more than every half second (another kc-secretd's new items show
    /// within that; every change is made to the index as it is saved, so none is lost),
    /// or now with `checkingNow` (a choice the saved index must not contradict, as a new
    /// item's name).
    private func loadedIndex(checkingNow: Bool = false) throws(BusError) -> SecretIndex {
        guard loadIndex(), var current = index else { throw loadFailure ?? Self.vaultLocked }
        let now = Self.monotonicMilliseconds
        guard checkingNow || now - stampCheckedAt >= 500 else { return current }
        stampCheckedAt = now
        if let home = try? home(), let seen = home.stamp(), seen != stamp, let fresh = try? home.read() {
            current = Self.withBuiltins(fresh)
            index = current
            stamp = seen
        }
        return current
    }

    /// The vault the index is kept in; nil without one.
    private func indexVault() throws(BusError) -> Vault? {
        do { return try vault() } catch { throw .failed("the vault cannot be used: \(error)") }
    }

    /// Refuses, before anything else, a change whose index could not be saved: while the
    /// vault is locked this process cannot read the index, and does not write over it
    /// (``change(alongside:for:_:)`` decides under the vault's lock; this answers at
    /// once, also for an item whose change needs no record).
    private func requireSavableIndex() throws(BusError) {
        _ = try loadedIndex()
        guard let vault = try indexVault(), !vault.isUnlocked, vault.documentStamp(VaultIndexHome.documentName) != nil else { return }
        throw Self.vaultLocked
    }

    /// Changes the index and saves it, with `alongside`, the change to the kernel that
    /// the new index describes (a value stored or removed): both happen or neither. In
    /// the vault or the boot's file, under its lock, the change is applied to the index
    /// as it is saved then (another kc-secretd's changes are kept); it is staged first,
    /// so a full disk refuses it before `alongside` runs, and committed only if
    /// `alongside` succeeded. A saved index that cannot be read (the vault locked, a
    /// format this process does not know) is not written over: the change is refused,
    /// IsLocked while the vault is locked. Nothing changes if `body` throws, `alongside`
    /// fails (its error is reported for the item `id`), or the save fails.
    @discardableResult
    private func change<R>(alongside: ((_ held: Vault?) throws(KeychainError) -> Void)? = nil, for id: ItemID? = nil,
                           _ body: (inout SecretIndex) throws(BusError) -> R) throws(BusError) -> R {
        var current = try loadedIndex()
        func failed(_ error: KeychainError) -> BusError {
            id.map { Self.busError(error, for: $0) } ?? .failed("\(error)")
        }
        guard let home = try home() else {
            inMemoryOnly = true
            let result = try body(&current)
            if let alongside {
                do { try alongside(nil) } catch { throw failed(error) }
            }
            index = current
            return result
        }
        inMemoryOnly = false
        bootIndexLocation = home is BootIndexFile ? home.location : nil
        var outcome: R? = nil
        do {
            stamp = try home.update(alongside: alongside ?? { _ in }) { (saved: SecretIndex?) throws(BusError) -> SecretIndex? in
                // Nothing saved yet: this process's copy is the first.
                var changed = saved.map(Self.withBuiltins) ?? current
                outcome = try body(&changed)
                current = changed
                return changed
            }
        } catch {
            switch error {
            case .refused(let refusal): throw refusal
            case .alongside(let failure): throw failed(failure)
            }
        }
        index = current
        guard let outcome else { throw .failed("the index was not changed") }
        return outcome
    }

    static let vaultLocked = BusError.isLocked("the vault is locked: run 'kc unlock' (kc-secretd never prompts)")

    // MARK: Collections

    var collectionNames: [String] {
        guard let index else { return [Self.login, Self.session] }
        return index.collections.keys.sorted()
    }

    func collection(_ name: String) -> CollectionRecord? {
        index?.collections[name] ?? ([Self.login, Self.session].contains(name) ? CollectionRecord(name: name, label: name, created: 0, modified: 0, isCustom: false) : nil)
    }

    func alias(_ name: String) -> String? {
        guard let index else { return name == "default" ? Self.login : name == "session" ? Self.session : nil }
        return index.aliases[name]
    }

    func setAlias(_ name: String, to collection: String?) throws(BusError) {
        try SecretLimits.checkAlias(name)
        try change { (index: inout SecretIndex) throws(BusError) in
            if let collection {
                guard index.collections[collection] != nil else { throw .noSuchObject(collection) }
                index.aliases[name] = collection
            } else {
                index.aliases[name] = nil
            }
        }
    }

    func isLocked(collection name: String) -> Bool {
        index == nil || lockedByClient.contains(name)
    }

    /// The level new items of a collection take: `session` is `when-unlocked`, every
    /// other collection `after-first-unlock` (saved in the vault, back after a reboot).
    func accessibility(ofCollection name: String) -> Accessibility {
        name == Self.session ? .whenUnlocked : .afterFirstUnlock
    }

    func createCollection(label: String) throws(BusError) -> String {
        try SecretLimits.checkLabel(label)
        return try change { (index: inout SecretIndex) throws(BusError) in Self.addCollection(label: label, to: &index) }
    }

    private static func addCollection(label: String, to index: inout SecretIndex) -> String {
        var base = String(label.unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }.map(Character.init)).lowercased()
        // The name is an object path element: a long label gives a name of its start.
        base = String(base.prefix(SecretLimits.collectionNameBytes))
        if base.isEmpty { base = "collection" }
        var name = base
        var n = 2
        while index.collections[name] != nil { name = base + String(n); n += 1 }
        let now = Self.now
        index.collections[name] = CollectionRecord(name: name, label: label, created: now, modified: now, isCustom: true)
        return name
    }

    func setCollectionLabel(_ name: String, _ label: String) throws(BusError) {
        try SecretLimits.checkLabel(label)
        try change { (index: inout SecretIndex) throws(BusError) in
            guard index.collections[name] != nil else { throw .noSuchObject(name) }
            index.collections[name]?.label = label
            index.collections[name]?.modified = Self.now
        }
    }

    /// Deletes a collection and its items. `login` and `session` are kc's levels, not
    /// collections to delete: refused.
    func deleteCollection(_ name: String) throws(BusError) -> [Found] {
        let index = try loadedIndex()
        guard let record = index.collections[name] else { throw .noSuchObject(name) }
        guard record.isCustom else { throw .notSupported("the \(name) collection is one of kc's levels; delete its items instead") }
        let doomed = try items(in: name, matching: [:])
        for item in doomed { try delete(item) }
        try change { (index: inout SecretIndex) throws(BusError) in
            index.collections[name] = nil
            index.aliases = index.aliases.filter { $0.value != name }
        }
        return doomed
    }

    func lock(collection name: String) { lockedByClient.insert(name) }

    /// Unlocks a collection a client locked; false if the vault itself is locked.
    func unlock(collection name: String) -> Bool {
        guard loadIndex() else { return false }
        lockedByClient.remove(name)
        return true
    }

    // MARK: Items

    /// An item as found: its kc item, its collection, its record (nil for an item kc-secretd
    /// did not make), and whether its value cannot be read now.
    struct Found: Equatable {
        var id: ItemID
        var collection: String
        var record: ItemRecord?
        var locked: Bool

        var attributes: [String: String] {
            record?.attributes ?? SecretStore.attributes(of: id)
        }
    }

    /// When this daemon first saw each item it did not make: the kernel keeps no
    /// creation time, and a client that sorts or shows items by date should not see 1970.
    private var firstSeen: [ItemID: UInt64] = [:]

    /// An item's Created and Modified times: its record's, or when it was first seen.
    func times(of item: Found) -> (created: UInt64, modified: UInt64) {
        if let record = item.record { return (record.created, record.modified) }
        if let seen = firstSeen[item.id] { return (seen, seen) }
        let now = Self.now
        firstSeen[item.id] = now
        return (now, now)
    }

    static func attributes(of id: ItemID) -> [String: String] {
        guard let service = id.service.text, let name = id.name.text else { return [:] }
        return ["service": service, "username": name]
    }

    /// The items of `collection` (nil: all) whose attributes include every pair of
    /// `attributes`.
    func items(in collection: String?, matching attributes: [String: String]) throws(BusError) -> [Found] {
        try SecretLimits.checkAttributes(attributes, per: "search")
        let index = try loadedIndex()
        var found: [Found] = []
        var stale: [ItemRecord] = []
        for record in index.items.values.sorted(by: { $0.id < $1.id }) {
            let home = index.collections[record.collection] == nil ? Self.login : record.collection
            guard collection == nil || collection == home, Self.matches(record.attributes, attributes) else { continue }
            switch presence(of: record.id, emptyValue: record.isEmptyValue, in: home) {
            case .gone:
                stale.append(record)
            case .present(let locked):
                found.append(Found(id: record.id, collection: home, record: record, locked: locked || lockedByClient.contains(home)))
            case .unknown:
                // Not readable now (a full key quota, say): there, as far as anyone knows.
                // Its GetSecret says why; its record stays for when it can be read.
                found.append(Found(id: record.id, collection: home, record: record, locked: lockedByClient.contains(home)))
            }
        }
        if !stale.isEmpty {
            // Removed by another door (`kc rm`, the mount): its record goes too, unless
            // another daemon stored the item again meanwhile (a record of its own).
            try? change { (index: inout SecretIndex) throws(BusError) in
                for record in stale where index.items[record.id] == record { index.items[record.id] = nil }
            }
        }
        // Items kc-secretd did not make carry only `service` and `username`.
        guard Set(attributes.keys).isSubset(of: ["service", "username"]), collection.map({ !(index.collections[$0]?.isCustom ?? true) }) ?? true else {
            return found
        }
        for (id, inKernel) in unindexedItems(service: attributes["service"], name: attributes["username"], indexed: index) {
            let home = Self.login
            guard collection == nil || collection == home, Self.matches(Self.attributes(of: id), attributes) else { continue }
            found.append(Found(id: id, collection: home, record: nil, locked: !inKernel || lockedByClient.contains(home)))
        }
        return found
    }

    private static func matches(_ attributes: [String: String], _ wanted: [String: String]) -> Bool {
        wanted.allSatisfy { attributes[$0.key] == $0.value }
    }

    /// kc items with UTF-8 names that the index has no record of, and whether the
    /// kernel holds each: of one service, or one item (a lookup by both names costs one
    /// search, not a listing). An item a locked vault keeps is one too, not in the
    /// kernel (so locked, as `kc unlock` would open it), as every door counts what a
    /// service holds. (Of a service the kernel holds no keyring of, the vault's items
    /// are not listed: services are listed from the kernel.)
    private func unindexedItems(service: String?, name: String?, indexed index: SecretIndex) -> [(ItemID, inKernel: Bool)] {
        if let service, let name {
            let id = ItemID(service: KeyName(service), name: KeyName(name))
            guard index.items[id] == nil, let keychain = try? Keychain(service: id.service) else { return [] }
            if (try? keychain.size(ofItem: id.name)) != nil { return [(id, true)] }
            guard (try? keychain.allKeyNamesIncludingVault())?.contains(id.name) == true else { return [] }
            return [(id, false)]
        }
        let services: [KeyName]
        if let service {
            services = [KeyName(service)]
        } else {
            services = (try? Keychain.services()) ?? []
        }
        var result: [(ItemID, inKernel: Bool)] = []
        for listed in services where listed.text != nil {
            // Names only: no level is needed (every such item is in `login`), and a full
            // listing would read /proc/keys for deadlines once per service.
            guard let keychain = try? Keychain(service: listed), let names = try? keychain.itemNames() else { continue }
            let inKernel = Set(names)
            let kept = (try? keychain.allKeyNamesIncludingVault()) ?? names
            for name in kept where name.text != nil {
                let id = ItemID(service: listed, name: name)
                if index.items[id] == nil { result.append((id, inKernel.contains(name))) }
            }
        }
        return result
    }

    /// Whether an item's value is there: `gone` only when the kernel and the vault
    /// answered that it is not (then its record may go); `unknown` when a look failed,
    /// which never counts as gone.
    enum Presence { case gone, present(locked: Bool), unknown }

    /// Whether the item's value is there: in the kernel, or in the vault while it is
    /// locked (then locked), or empty (the index holds it).
    private func presence(of id: ItemID, emptyValue: Bool, in collection: String) -> Presence {
        let keychain: Keychain
        do { keychain = try recordedItemsKeychain(id, in: collection) } catch { return .unknown }
        do {
            if try keychain.size(ofItem: id.name) != nil { return .present(locked: false) }
        } catch {
            return Self.presence(after: error)
        }
        if emptyValue { return .present(locked: false) }
        do {
            let there = try keychain.withBytes(forKey: id.name) { _ in true }
            return there == nil ? .gone : .present(locked: false)
        } catch {
            return Self.presence(after: error)
        }
    }

    /// The keychain that reads an item kc-secretd made: it looks first at the level the
    /// item was stored at, its collection's, so that a read finds it with one search of
    /// the service's keyring instead of a probe of every level. Only where to look first:
    /// an item another door moved to another level is found by the search of the other
    /// levels that follows a miss, and every read still asks the kernel.
    private func recordedItemsKeychain(_ id: ItemID, in collection: String) throws(KeychainError) -> Keychain {
        try Keychain(service: id.service).accessibility(accessibility(ofCollection: collection))
    }

    /// A look at an item that failed: the vault holds it locked, or the failure is one
    /// of the moment (a full quota that stops the vault loading it, the disk, the
    /// kernel): the item is not known to be gone.
    private static func presence(after error: KeychainError) -> Presence {
        switch error {
        case .vaultLocked, .vaultKeepsForLoginSessions: return .present(locked: true)
        default: return .unknown
        }
    }

    /// One item by its kc item, in `collection`.
    func item(_ id: ItemID, in collection: String) throws(BusError) -> Found? {
        let index = try loadedIndex()
        if let record = index.items[id] {
            // No kernel call here: the method that follows finds out (a GetSecret of an
            // item removed by `kc rm` answers NoSuchObject, of one the locked vault
            // holds IsLocked), and a lookup pays for one probe, not two.
            let home = index.collections[record.collection] == nil ? Self.login : record.collection
            guard home == collection else { return nil }
            return Found(id: id, collection: home, record: record, locked: lockedByClient.contains(home))
        }
        guard id.service.text != nil, id.name.text != nil, let keychain = try? Keychain(service: id.service) else { return nil }
        let home = Self.login
        guard home == collection else { return nil }
        if (try? keychain.size(ofItem: id.name)) != nil {
            return Found(id: id, collection: home, record: nil, locked: lockedByClient.contains(home))
        }
        // Kept by a locked vault: there, and locked until `kc unlock`.
        guard (try? keychain.allKeyNamesIncludingVault())?.contains(id.name) == true else { return nil }
        return Found(id: id, collection: home, record: nil, locked: true)
    }

    /// The item's value and content type.
    func secret(of item: Found) throws(BusError) -> (value: [UInt8], contentType: String) {
        guard !item.locked else { throw .isLocked("\(Self.describe(item.id)) is locked: Unlock it first (or 'kc unlock' when the vault is locked)") }
        let contentType = item.record?.contentType ?? "text/plain"
        do {
            // An item kc-secretd did not make is looked for first where `kc set` puts one.
            let keychain = try item.record == nil ? Keychain(service: item.id.service) : recordedItemsKeychain(item.id, in: item.collection)
            if let value = try keychain.data(forKey: item.id.name) { return (value, contentType) }
        } catch {
            throw Self.busError(error, for: item.id)
        }
        if item.record?.isEmptyValue == true { return ([], contentType) }
        throw .noSuchObject(Self.describe(item.id))
    }

    /// Stores a new item in `collection`, or with `replace` gives a new value to the item
    /// with exactly these attributes there. Returns the item and whether it is new.
    ///
    /// A new item goes into the kc service its attributes name (``ItemNaming``), unless
    /// the user shares that service with a group: a member would read the client's
    /// secret there, so it goes into a service of its own (``ItemNaming/unshared(_:_:)``).
    /// (A replacing store of an item the user put in a shared service, found by exactly
    /// its `service` and `username`, gives that item its new value where it is: the user
    /// shared that item on purpose, and `kc set` would do the same.)
    /// A service that did not exist is made for it and is kc-secretd's
    /// (``SecretIndex/ownedServices``): its last item's Delete removes it.
    func create(in collection: String, attributes: [String: String], label: String, value: [UInt8], contentType: String,
                replace: Bool) throws(BusError) -> (Found, isNew: Bool) {
        try Self.checkSizes(attributes: attributes, label: label, contentType: contentType)
        try requireSavableIndex()
        guard !isLocked(collection: collection) else { throw .isLocked("the \(collection) collection is locked: Unlock it first") }
        if replace, let existing = try items(in: collection, matching: attributes).first(where: { $0.attributes == attributes }) {
            let updated = try setSecret(of: existing, value: value, contentType: contentType, label: label)
            return (updated, false)
        }
        let base = try Self.unsharedPlace(for: ItemNaming.proposed(attributes: attributes, label: label))
        let accessibility = accessibility(ofCollection: collection)
        // Another kc-secretd may take the name between the choice and the save, which
        // is under the lock: then the choice is made again.
        for attempt in 0..<3 {
            // Names another kc-secretd took since this one last looked are taken: the
            // saved index is looked at now, not within the half second reads allow.
            let index = try loadedIndex(checkingNow: true)
            let (id, replacesUnindexed) = try Self.freeName(from: base, in: index, replace: replace)
            let serviceIsNew = (try? Keychain(service: id.service).serviceExists()) == false
            let now = Self.now
            let record = ItemRecord(id: id, collection: collection, attributes: attributes, label: label, contentType: contentType,
                                    created: now, modified: now, isEmptyValue: false)
            do {
                // Without its record the item would be found by other attributes than the
                // client gave: the value is stored only with the record (an item that was
                // there before, `kc set`'s, keeps its old value if the save fails).
                try change(alongside: { held throws(KeychainError) in try Self.store(value, for: id, accessibility: accessibility, holding: held) },
                           for: id) { (index: inout SecretIndex) throws(BusError) in
                    guard index.items[id] == nil else { throw Self.nameTaken }
                    index.items[id] = record
                    if serviceIsNew && !replacesUnindexed { index.ownedServices.insert(id.service) }
                }
                return (Found(id: id, collection: collection, record: record, locked: false), true)
            } catch where error == Self.nameTaken && attempt < 2 {
                continue
            }
        }
        throw Self.nameTaken
    }

    private static let nameTaken = BusError.failed("another kc-secretd took the item's name at the same moment; try again")

    /// The kc item a new item of `base`'s names takes: `base`, or ` (2)`, ` (3)`, … if
    /// taken. With `replace`, an item kc-secretd did not make under that name is taken
    /// over (python keyring's `set` after `kc set` of the same service and user), which
    /// `replacesUnindexed` says.
    private static func freeName(from base: ItemID, in index: SecretIndex, replace: Bool) throws(BusError) -> (ItemID, replacesUnindexed: Bool) {
        var id = base
        var n = 2
        while true {
            if index.items[id] == nil {
                let inKernel = (try? Keychain(service: id.service).contains(id.name)) ?? false
                if !inKernel { return (id, false) }
                if replace { return (id, true) }
            }
            id = ItemID(service: base.service, name: ItemNaming.numbered(base.name, n))
            n += 1
            guard n < 1000 else { throw .failed("no free item name for \(describe(base))") }
        }
    }

    /// `proposed`, in a service the user does not share: the first of its service and
    /// ``ItemNaming/unshared(_:_:)``'s names that is not shared with a group.
    private static func unsharedPlace(for proposed: ItemID) throws(BusError) -> ItemID {
        var place = proposed
        for n in 1..<100 {
            guard isShared(place.service) else { return place }
            place.service = ItemNaming.unshared(proposed.service, n)
        }
        throw .failed("every service kc-secretd could use for \(describe(proposed)) is shared with a group")
    }

    /// Whether the user's service of this name is shared with a group. A service whose
    /// sharing cannot be told (a failure of the moment) counts as shared: a client's
    /// secret goes elsewhere rather than where a group might read it.
    static func isShared(_ service: KeyName) -> Bool {
        do {
            return try Keychain(service: service).sharing() != nil
        } catch {
            if case .noSuchService = error { return false }
            return true
        }
    }

    /// A new value (and content type, and label if given) for an item. The value and the
    /// record change together or not at all.
    @discardableResult
    func setSecret(of item: Found, value: [UInt8], contentType: String, label: String? = nil) throws(BusError) -> Found {
        guard !item.locked else { throw .isLocked("\(Self.describe(item.id)) is locked: Unlock it first") }
        try Self.checkSizes(attributes: [:], label: label ?? "", contentType: contentType)
        try requireSavableIndex()
        let fallback = item.record ?? ItemRecord(id: item.id, collection: item.collection, attributes: item.attributes,
                                                 label: Self.defaultLabel(item.id), contentType: contentType,
                                                 created: Self.now, modified: Self.now, isEmptyValue: false)
        let now = Self.now
        let record = try change(alongside: { held throws(KeychainError) in try Self.store(value, for: item.id, accessibility: nil, holding: held) },
                                for: item.id) { (index: inout SecretIndex) throws(BusError) -> ItemRecord in
            // The record as saved now: another daemon may have changed its label.
            var record = index.items[item.id] ?? fallback
            record.contentType = contentType
            record.isEmptyValue = false  // the kernel holds it, empty or not
            record.modified = now
            if let label { record.label = label }
            index.items[item.id] = record
            return record
        }
        var updated = item
        updated.record = record
        return updated
    }

    /// Changes an item's label or attributes (its kc name stays).
    func update(_ item: Found, label: String? = nil, attributes: [String: String]? = nil) throws(BusError) -> Found {
        guard !item.locked else { throw .isLocked("\(Self.describe(item.id)) is locked: Unlock it first") }
        try Self.checkSizes(attributes: attributes ?? [:], label: label ?? "", contentType: "")
        let fallback = item.record ?? ItemRecord(id: item.id, collection: item.collection, attributes: item.attributes,
                                                 label: Self.defaultLabel(item.id), contentType: "text/plain",
                                                 created: Self.now, modified: Self.now, isEmptyValue: false)
        let now = Self.now
        let record = try change { (index: inout SecretIndex) throws(BusError) -> ItemRecord in
            var record = index.items[item.id] ?? fallback
            if let label { record.label = label }
            if let attributes { record.attributes = attributes }
            record.modified = now
            index.items[item.id] = record
            return record
        }
        var updated = item
        updated.record = record
        return updated
    }

    /// Removes the item: its value and its record together, or neither. The last item
    /// of a service kc-secretd made takes the service with it, as `kc rm SERVICE` would,
    /// unless another door stored an item there meanwhile
    /// (``KernelKeychain/Keychain/removeServiceIfEmpty()`` never loses one).
    func delete(_ item: Found) throws(BusError) {
        guard !lockedByClient.contains(item.collection) else { throw .isLocked("the \(item.collection) collection is locked: Unlock it first") }
        try requireSavableIndex()
        let removeValue = { (held: Vault?) throws(KeychainError) in _ = try Keychain(service: item.id.service).remove(item.id.name, holding: held) }
        guard item.record != nil || index?.items[item.id] != nil else {
            // An item kc-secretd did not make: no record to change.
            do { try removeValue(nil) } catch { throw Self.busError(error, for: item.id) }
            return
        }
        let service = item.id.service
        let lastOfOwnService = try change(alongside: removeValue, for: item.id) { (index: inout SecretIndex) throws(BusError) -> Bool in
            index.items[item.id] = nil
            guard index.ownedServices.contains(service), !index.items.keys.contains(where: { $0.service == service }) else { return false }
            index.ownedServices.remove(service)
            return true
        }
        if lastOfOwnService { _ = try? Keychain(service: service).removeServiceIfEmpty() }
    }

    /// Writes the value to the kc item: a new item at the collection's level, an existing
    /// one at its own. An empty value is an item too (``Keyrings/ItemValue``), so `kc get`
    /// and the mount read it as clients do.
    /// `held`: the vault whose lock the index's save holds meanwhile, if it is in one.
    private static func store(_ value: [UInt8], for id: ItemID, accessibility: Accessibility?, holding held: Vault?) throws(KeychainError) {
        var keychain = try Keychain(service: id.service)
        if let accessibility { keychain = keychain.accessibility(accessibility) }
        try keychain.set(value, forKey: id.name, holding: held)
    }

    static func defaultLabel(_ id: ItemID) -> String {
        "\(id.service.description): \(id.name.description)"
    }

    static func describe(_ id: ItemID) -> String {
        "kc item '\(id.service.description)' '\(id.name.description)'"
    }

    /// An item's label, content type and attributes are within ``SecretLimits``.
    static func checkSizes(attributes: [String: String], label: String, contentType: String) throws(BusError) {
        try SecretLimits.checkItem(attributes: attributes, label: label, contentType: contentType)
    }

    static func busError(_ error: KeychainError, for id: ItemID) -> BusError {
        switch error {
        case .valueTooLarge, .quotaExceeded, .notEnoughQuota, .vaultFull:
            return .limitsExceeded("\(describe(id)): \(error)")
        case .vaultLocked, .vaultKeepsForLoginSessions:
            return .isLocked("\(describe(id)): \(error)")
        case .accessDenied:
            return .accessDenied("\(describe(id)): \(error)")
        default:
            return .failed("\(describe(id)): \(error)")
        }
    }
}
