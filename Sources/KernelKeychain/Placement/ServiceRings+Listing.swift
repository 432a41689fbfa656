import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Listing: the keyrings a keychain lists and the items in them, with what the kernel
// knows of each.

extension ServiceRings {
    /// The names of the items, sorted by their bytes. With `checkingSize`, only items
    /// whose value can still be read (a describe and a read per item).
    func itemNames(checkingSize: Bool) throws(KeychainError) -> [KeyName] {
        var names: [KeyName] = []
        for ring in try listedRings() {
            for (serial, info) in try ServiceRings.userKeys(in: ring) where !checkingSize || ServiceRings.size(of: serial) != nil {
                names.append(info.description)
            }
        }
        return names.sorted()
    }

    /// The items with what the kernel knows of them, sorted by name. Expired items are
    /// skipped (and unlinked, so the kernel frees them sooner). Reads /proc/keys once
    /// for the deadlines.
    func items() throws(KeychainError) -> [KeychainItem] {
        var found: [KeychainItem] = []
        var expiries: [KeySerial: ProcKeysEntry.Expiry]? = nil
        for ring in try listedRings() {
            for (serial, info) in try ServiceRings.userKeys(in: ring) {
                guard let size = ServiceRings.size(of: serial) else { continue }
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

    /// What the kernel knows of one item, or nil.
    func item(_ key: KeyName, withDeadline: Bool = true) throws(KeychainError) -> KeychainItem? {
        for ring in try listedRings() {
            guard let serial = try Placement.search(ring: ring.serial, for: key) else { continue }
            do throws(KeyctlError) {
                guard let size = try unlessGone({ () throws(KeyctlError) in try serial.valueSize() })
                else { continue }
                let owner = (try? serial.describe().uid) ?? ring.owner
                return KeychainItem(service: ring.service, name: key, accessibility: ring.accessibility,
                                    serial: serial, size: size, deadline: withDeadline ? DeadlineRecords.deadline(of: serial) : nil,
                                    owner: owner, sharing: ring.sharing)
            } catch {
                throw KeychainError(error)
            }
        }
        return nil
    }

    /// The keyrings whose items are listed: the service's (the caller's own, or the one
    /// shared with it), or with ``anyService`` every service's.
    func listedRings() throws(KeychainError) -> [ListedRing] {
        switch self {
        case .anyService:
            return try ServiceKeyring.everywhere().map { ListedRing(service: $0.name, ring: $0.ring) }
        case .shared(let shared):
            return shared.rings.map {
                ListedRing(service: shared.service, serial: $0.serial, accessibility: nil, owner: shared.owner, sharing: shared.sharing)
            }
        case .own(let own):
            return try ServiceKeyring.rings(of: own.name, startingWith: own.home).map { ListedRing(service: own.name, ring: $0) }
        }
    }

    /// The size of a listed item; nil if it vanished. Like ``Placement/search(ring:for:)``,
    /// a key readable only by a possessor makes the user keyring possessed and is read again.
    private static func size(of item: KeySerial) -> Int? {
        if let size = try? item.valueSize() { return size }
        guard (try? Anchor.user.serialForWriting()) != nil else { return nil }
        return try? item.valueSize()
    }

    /// The `user` keys linked in a ring, described. A key that expired is unlinked. Only
    /// the ring owner's keys are the service's items: a key another uid linked there is
    /// skipped (and unlinked from the caller's own ring; a view of any key the caller
    /// cannot describe is skipped as well).
    private static func userKeys(in ring: ListedRing) throws(KeychainError) -> [(KeySerial, KeyDescription)] {
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
}

/// A keyring whose items ``Keychain/items()`` lists, with what is known of it.
internal struct ListedRing {
    var service: KeyName
    var serial: KeySerial
    var accessibility: Accessibility?
    var owner: UInt32
    var sharing: Sharing?

    init(service: KeyName, serial: KeySerial, accessibility: Accessibility?, owner: UInt32, sharing: Sharing?) {
        self.service = service
        self.serial = serial
        self.accessibility = accessibility
        self.owner = owner
        self.sharing = sharing
    }

    /// One of the caller's own rings; its sharing is read from the kernel.
    init(service: KeyName, ring: ServiceKeyring) {
        self.init(service: service, serial: ring.serial, accessibility: ring.accessibility, owner: geteuid(),
                  sharing: (try? ring.serial.describe()).flatMap(Sharing.init))
    }
}

extension ServiceRings {
    /// Every item with its value, read from the keyrings found once, sorted by name; nil
    /// when one of the caller's own keyrings was replaced during the read (a whole set
    /// replaced by ``Keychain/replaceAllItems(with:until:)``): the caller reads again, so
    /// what it gets is one set, never some of the old and some of the new.
    func values() throws(KeychainError) -> [(key: KeyName, value: [UInt8])]? {
        let rings: [(listed: ListedRing, own: ServiceKeyring?)]
        if case .own(let own) = self {
            rings = try ServiceKeyring.rings(of: own.name, startingWith: own.home).map { (ListedRing(service: own.name, ring: $0), $0) }
        } else {
            rings = try listedRings().map { ($0, nil) }
        }
        func replaced() throws(KeychainError) -> Bool {
            for case (_, let own?) in rings {
                let anchor: KeySerial
                do { anchor = try own.anchor.serial() } catch { return true }
                if try !Placement.isLinked(own.serial, in: anchor) { return true }
            }
            return false
        }
        var found: [(key: KeyName, value: [UInt8])] = []
        for (ring, _) in rings {
            for (serial, info) in try ServiceRings.userKeys(in: ring) {
                guard let value = try Placement.value(of: serial) else {
                    if try replaced() { return nil }
                    continue  // expired or removed since the listing
                }
                found.append((info.description, value))
            }
        }
        if try replaced() { return nil }
        return found.sorted { $0.key < $1.key }
    }
}
