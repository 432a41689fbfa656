import Keyrings
import SystemPackage

/// The keyring an accessibility level lives under (DESIGN §2).
internal enum Anchor: CaseIterable, Sendable {
    case session, user, persistent

    /// A serial that names the anchor in keyctl calls. Session and user are special
    /// ids the kernel resolves itself (and treats as possessed); the persistent keyring
    /// is fetched and linked into the thread keyring, which makes it possessed too
    /// without showing up in the user's session keyring.
    func serial() throws(KeychainError) -> KeySerial {
        switch self {
        case .session: return SpecialKeyring.session.serial
        case .user: return SpecialKeyring.user.serial
        case .persistent:
            do {
                return try KeySerial.persistentKeyring(linkedInto: SpecialKeyring.thread.serial)
            } catch {
                if error.errno == .notSupported || error.errno == .noFunction { throw .keyringsUnavailable(error) }
                throw KeychainError(error)
            }
        }
    }
}

extension Anchor {
    /// As ``serial()``, for adding to the anchor. A process with no session keyring
    /// that *writes* to `@s` gets a new anonymous session keyring that dies with it,
    /// whereas a lookup installs the uid's default session keyring, which other
    /// processes share. So the session keyring is looked up first, never created.
    ///
    /// A new `user` key grants its uid only "view" until kc sets its permissions, and
    /// setting them needs possession: the key must be reachable from this thread's
    /// keyrings. The user keyring is usually linked in the session keyring but not
    /// always (a fresh `keyctl session`, a service), so it is linked into the thread
    /// keyring, as the persistent keyring already is.
    func serialForWriting() throws(KeychainError) -> KeySerial {
        if self == .persistent { return try serial() }
        do {
            if self == .session { return try SpecialKeyring.session.serial.resolved(create: false) }
            let user = SpecialKeyring.user.serial
            try user.link(into: SpecialKeyring.thread.serial)
            return user
        } catch {
            throw KeychainError(error)
        }
    }
}

extension Anchor {
    /// `first`, then the other anchors: the session anchor is searched last only when
    /// another level is the likely home.
    static func probeOrder(startingWith first: Anchor) -> [Anchor] {
        [first] + allCases.filter { $0 != first }
    }
}

/// Portable items and device-only items of one service live in sibling keyrings, so
/// the marking is kept in the kernel and the value bytes stay exactly the user's.
internal enum ServiceMarker: CaseIterable, Sendable {
    case portable, deviceOnly

    static let portablePrefix = "kc:"
    static let deviceOnlyPrefix = "kc.local:"

    func keyringDescription(for service: String) -> String {
        switch self {
        case .portable: Self.portablePrefix + service
        case .deviceOnly: Self.deviceOnlyPrefix + service
        }
    }

    /// Splits a keyring description into marker and service name, if it is one of ours.
    static func parse(keyringDescription description: String) -> (ServiceMarker, String)? {
        if description.hasPrefix(portablePrefix) {
            return (.portable, String(description.dropFirst(portablePrefix.count)))
        }
        if description.hasPrefix(deviceOnlyPrefix) {
            return (.deviceOnly, String(description.dropFirst(deviceOnlyPrefix.count)))
        }
        return nil
    }
}

/// One service keyring found in the kernel.
internal struct ServiceKeyring: Hashable, Sendable {
    var serial: KeySerial
    var anchor: Anchor
    var marker: ServiceMarker

    var accessibility: Accessibility { Accessibility(anchor: anchor, marker: marker) }

    /// Finds a service keyring from `anchor` (which also searches keyrings nested in it,
    /// such as the user keyring inside the session keyring). Nil if there is none.
    static func find(service: String, marker: ServiceMarker, under anchorSerial: KeySerial) throws(KeychainError) -> KeySerial? {
        do {
            return try anchorSerial.search(type: "keyring", description: marker.keyringDescription(for: service))
        } catch {
            throw KeychainError(error)
        }
    }

    /// The service keyring linked directly in the anchor, created if there is none.
    ///
    /// Race-free: `add_key` of a keyring whose description is already linked in the
    /// parent would displace the old one and lose its items. So a new keyring is made
    /// in this thread's private keyring and moved into the anchor with KEYCTL_MOVE_EXCL;
    /// if another process got there first the move fails with EEXIST and the winner is used.
    static func findOrCreate(service: String, marker: ServiceMarker, anchor: Anchor) throws(KeychainError) -> KeySerial {
        let anchorSerial = try anchor.serialForWriting()
        let description = marker.keyringDescription(for: service)
        do throws(KeyctlError) {
            if let existing = try directChild(description: description, of: anchorSerial) {
                return existing
            }
            let thread = SpecialKeyring.thread.serial
            let fresh = try KeySerial.add(type: "keyring", description: description, payload: nil, into: thread)
            defer { try? fresh.unlink(from: thread) }  // no-op once moved
            try fresh.setPermissions(.ownerOnly)
            do {
                try fresh.move(from: thread, to: anchorSerial, exclusive: true)
                return fresh
            } catch where error.errno == .fileExists {
                if let winner = try directChild(description: description, of: anchorSerial) {
                    return winner
                }
                throw error
            }
        } catch {
            throw KeychainError(error)
        }
    }

    /// A search finds a keyring linked directly in the anchor before any nested one,
    /// so the first hit is the anchor's own child if it has one; the anchor's link list
    /// tells whether it is.
    private static func directChild(description: String, of anchor: KeySerial) throws(KeyctlError) -> KeySerial? {
        guard let found = try anchor.search(type: "keyring", description: description) else { return nil }
        return try anchor.linkedKeys().contains(found) ? found : nil
    }

    /// Every service keyring of every anchor, with its service name.
    static func everywhere() throws(KeychainError) -> [(name: String, ring: ServiceKeyring)] {
        var rings: [(name: String, ring: ServiceKeyring)] = []
        for anchor in Anchor.allCases { rings += try all(in: anchor) }
        return rings
    }

    /// Every service keyring linked directly in the anchor, with its service name.
    static func all(in anchor: Anchor) throws(KeychainError) -> [(name: String, ring: ServiceKeyring)] {
        let anchorSerial = try anchor.serial()
        let linked: [KeySerial]
        do {
            linked = try anchorSerial.linkedKeys()
        } catch {
            throw KeychainError(error)
        }
        var found: [(name: String, ring: ServiceKeyring)] = []
        for serial in linked {
            // Keys can vanish or expire between the listing and the describe.
            guard let info = try? serial.describe(), info.type == "keyring",
                  let (marker, name) = ServiceMarker.parse(keyringDescription: info.description)
            else { continue }
            found.append((name, ServiceKeyring(serial: serial, anchor: anchor, marker: marker)))
        }
        return found
    }
}
