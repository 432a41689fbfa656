import Keyrings
import KeyringCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Portable items and device-only items of one service live in sibling keyrings, so
/// the marking is kept in the kernel and the value bytes stay exactly the user's.
internal enum ServiceMarker: CaseIterable, Sendable {
    case portable, deviceOnly

    static let portablePrefix = "kc:"
    static let deviceOnlyPrefix = "kc.local:"

    func keyringDescription(for service: KeyName) -> KeyName {
        switch self {
        case .portable: KeyName(Self.portablePrefix) + service
        case .deviceOnly: KeyName(Self.deviceOnlyPrefix) + service
        }
    }

    /// Splits a keyring description into marker and service name, if it is one of ours.
    static func probeOrder(startingWith first: ServiceMarker) -> [ServiceMarker] {
        first == .portable ? [.portable, .deviceOnly] : [.deviceOnly, .portable]
    }

    static func parse(keyringDescription description: KeyName) -> (ServiceMarker, KeyName)? {
        for marker in allCases {
            let prefix = KeyName(marker == .portable ? portablePrefix : deviceOnlyPrefix)
            if description.hasPrefix(prefix) { return (marker, description.dropFirst(prefix.bytes.count)) }
        }
        return nil
    }
}

/// One service keyring found in the kernel.
internal struct ServiceKeyring: Hashable, Sendable {
    var serial: KeySerial
    var anchor: Anchor
    var marker: ServiceMarker
    /// The keyring's description as the search that found it read it (its owner
    /// checked), if it did: a write plans its sharing with it rather than describing the
    /// keyring again (``OwnService/sharingForWrite(rings:)``). Not part of its identity.
    var info: KeyDescription? = nil

    var accessibility: Accessibility { Accessibility(anchor: anchor, marker: marker) }

    static func == (lhs: ServiceKeyring, rhs: ServiceKeyring) -> Bool {
        lhs.serial == rhs.serial && lhs.anchor == rhs.anchor && lhs.marker == rhs.marker
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(serial)
        hasher.combine(anchor)
        hasher.combine(marker)
    }

    /// Finds a service keyring from `anchor` (which also searches keyrings nested in it,
    /// such as the user keyring inside the session keyring). Nil if there is none.
    ///
    /// Only a keyring the caller owns is its service: one another uid put there (a
    /// keyring in a shared session, or planted before kc guarded the anchors) is not
    /// found, and neither is one the caller may not search. A keyring of the caller's
    /// that still has a mask from before kc guarded against other uids is made private
    /// (or shared as it was) again, with any key another uid linked into it removed
    /// (see ``secureIfNeeded(_:_:)``).
    ///
    /// With `trustingRecentCheck` (questions that change nothing), a keyring that passed
    /// the owner check within the last second is not described again (``RecentOwnerChecks``).
    static func find(service: KeyName, marker: ServiceMarker, under anchorSerial: KeySerial,
                     trustingRecentCheck: Bool = false) throws(KeychainError) -> KeySerial? {
        try findDescribed(marker.keyringDescription(for: service), under: anchorSerial,
                          trustingRecentCheck: trustingRecentCheck)?.serial
    }

    /// ``find(service:marker:under:)`` by the keyring's description (`kc:SERVICE` or
    /// `kc.local:SERVICE`), with the description of the keyring it read (nil when the
    /// ring was found in the link list instead).
    ///
    /// With `trustingRecentCheck` (reads only), a keyring that passed the owner check
    /// within the last second is not described again (see ``RecentOwnerChecks``); its
    /// description is then nil.
    static func findDescribed(_ description: KeyName, under anchorSerial: KeySerial,
                              trustingRecentCheck: Bool = false) throws(KeychainError) -> (serial: KeySerial, info: KeyDescription?)? {
        do throws(KeyctlError) {
            guard let found = try anchorSerial.search(type: "keyring", description: description) else { return nil }
            if trustingRecentCheck, RecentOwnerChecks.shared.passed(found) { return (found, nil) }
            guard let info = try unlessGone({ () throws(KeyctlError) in try found.describe() }),
                  info.uid == geteuid()
            else { return nil }
            try secureIfNeeded(found, info)
            if !needsSecuring(info) { RecentOwnerChecks.shared.record(found) }
            // A ring whose mask was just repaired is described again when needed.
            return (found, needsSecuring(info) ? nil : info)
        } catch where error.errno == .permissionDenied {
            // A keyring of that name the caller may not search (another uid's) came
            // first: the caller's own, if it has one, is linked directly in the anchor.
            guard let own = try? ownLinkedKey(type: "keyring", description: description, in: anchorSerial, unlinkingOthers: false)
            else { return nil }
            return (own, nil)
        } catch {
            throw KeychainError(error)
        }
    }


    /// Whether the ring's mask is not one kc makes (see ``secureIfNeeded(_:_:)``): the
    /// core's rule, by which the front passes such a ring to the full kc.
    static func needsSecuring(_ info: KeyDescription) -> Bool {
        ServiceKeyringProbe.needsRepair(permissions: info.permissions.rawValue)
    }

    /// A service keyring whose mask grants possessors anything, or grants the group
    /// write (kc before 0.3 did both) or search (kc before round three's fix: members
    /// could invalidate keys), gets kc's masks back, on itself and its items;
    /// keys of other uids linked into it are unlinked. Costs nothing for a keyring
    /// already as kc makes them.
    static func secureIfNeeded(_ ring: KeySerial, _ info: KeyDescription) throws(KeyctlError) {
        guard needsSecuring(info) else { return }
        let sharing = Sharing(info)
        for item in try ring.linkedKeys() {
            // A key the owner may not even describe is another uid's (keyctl's default
            // mask gives its owner's possessors all and the owner's uid view only).
            guard let itemInfo = try? item.describe() else {
                try? item.unlink(from: ring)
                continue
            }
            if itemInfo.uid != geteuid() || itemInfo.type != "user" {
                try? item.unlink(from: ring)
            } else {
                try? Sharing.apply(sharing, to: item, as: .item)
            }
        }
        try Sharing.apply(sharing, to: ring, as: .keyring)
    }

    /// The one way kc finds a service's own keyrings: for each anchor (`first`'s
    /// anchor first) and marker, a search from the anchor; a hit counts for that anchor
    /// only if it is linked there directly (a search also descends into nested keyrings,
    /// such as the user keyring linked in the session keyring; that ring is found again
    /// under its own anchor). With `stopAtFirst`, the first hit of any kind ends the
    /// probe: enough to tell whether the service exists; and then `trustingRecentCheck`
    /// may spare the describe of a keyring checked within the last second.
    ///
    /// A ring the search found that no anchor links directly was displaced between the
    /// search and the listing (its service's whole set replaced in one step,
    /// ``OwnService/replaceContents(_:until:)``): the probe is made again, so that a
    /// service being replaced is never reported missing.
    ///
    /// `knownFirst`: the keyring a search from `first`'s anchor just found and checked
    /// (a locate's home hit), taken as that search's answer rather than searched for again,
    /// with its description if that search read it; `knownFirstAnchorLinks`: the keys
    /// linked in `first`'s anchor, if the locate just read them, taken rather than read again.
    static func rings(of service: KeyName, startingWith first: Accessibility = .whenUnlocked,
                      stopAtFirst: Bool = false, trustingRecentCheck: Bool = false,
                      knownFirst: (serial: KeySerial, info: KeyDescription?)? = nil,
                      knownFirstAnchorLinks: [KeySerial]? = nil) throws(KeychainError) -> [ServiceKeyring] {
        var rings: [ServiceKeyring] = []
        var known = knownFirst
        var knownLinks = knownFirstAnchorLinks
        for _ in 0..<8 {
            var unplaced: Swift.Set<KeySerial> = []
            rings = try probeRings(of: service, startingWith: first, stopAtFirst: stopAtFirst,
                                   trustingRecentCheck: trustingRecentCheck, knownFirst: known,
                                   knownFirstAnchorLinks: knownLinks, unplaced: &unplaced)
            known = nil
            knownLinks = nil
            unplaced.subtract(rings.map(\.serial))
            if unplaced.isEmpty { return rings }
        }
        return rings
    }

    /// One probe of ``rings(of:startingWith:stopAtFirst:trustingRecentCheck:)``; rings
    /// found but not linked directly in the anchor searched go into `unplaced` (nested
    /// in it, to be found under their own anchor, or displaced).
    private static func probeRings(of service: KeyName, startingWith first: Accessibility, stopAtFirst: Bool,
                                   trustingRecentCheck: Bool, knownFirst: (serial: KeySerial, info: KeyDescription?)?,
                                   knownFirstAnchorLinks: [KeySerial]?,
                                   unplaced: inout Swift.Set<KeySerial>) throws(KeychainError) -> [ServiceKeyring] {
        var rings: [ServiceKeyring] = []
        for anchor in Anchor.probeOrder(startingWith: first.anchor) {
            guard let anchorSerial = try anchor.serialForReading() else { continue }
            var linked: [KeySerial]? = anchor == first.anchor ? knownFirstAnchorLinks : nil
            for marker in ServiceMarker.probeOrder(startingWith: first.marker) {
                let ring: KeySerial
                var info: KeyDescription? = nil
                if let knownFirst, anchor == first.anchor, marker == first.marker {
                    ring = knownFirst.serial
                    info = knownFirst.info
                } else {
                    guard let found = try findDescribed(marker.keyringDescription(for: service), under: anchorSerial,
                                                        trustingRecentCheck: stopAtFirst && trustingRecentCheck) else { continue }
                    ring = found.serial
                    info = found.info
                }
                if stopAtFirst { return [ServiceKeyring(serial: ring, anchor: anchor, marker: marker, info: info)] }
                if linked == nil {
                    linked = try Placement.linkedKeys(of: anchorSerial)
                }
                if linked?.contains(ring) == true {
                    rings.append(ServiceKeyring(serial: ring, anchor: anchor, marker: marker, info: info))
                } else {
                    unplaced.insert(ring)
                }
            }
        }
        return rings
    }

    /// The service keyring linked directly in the anchor, created if there is none.
    ///
    /// Race-free: `add_key` of a keyring whose description is already linked in the
    /// parent would displace the old one and lose its items. So a new keyring is made
    /// in this thread's private keyring and moved into the anchor with KEYCTL_MOVE_EXCL;
    /// if another process got there first the move fails with EEXIST and the winner is
    /// used (and if the winner is removed before it can be used, the dance starts over).
    ///
    /// A keyring of that name the caller may not look at (another uid's, linked into a
    /// session keyring they share) makes every such move fail: that is
    /// ``KeychainError/serviceKeyringNameTaken(service:level:)``, not a bare EEXIST.
    static func findOrCreate(service: KeyName, marker: ServiceMarker, anchor: Anchor) throws(KeychainError) -> ServiceKeyring {
        let parent = try anchor.serialForWriting()
        do {
            let serial = try findOrCreateKeyring(described: marker.keyringDescription(for: service), in: parent)
            return ServiceKeyring(serial: serial, anchor: anchor, marker: marker)
        } catch where error.underlying?.errno == .fileExists {
            throw .serviceKeyringNameTaken(service: service.description, level: Accessibility(anchor: anchor, marker: marker).level)
        }
    }

    /// The service's keyrings and, among them, its keyring at `accessibility`, created
    /// (race-free) if the service has none there: what a write needs.
    ///
    /// The list is always taken once the home keyring exists. Writers racing at two
    /// levels each settle the item's copies over the rings they listed, and this order
    /// makes the later of two listings see both writers' rings. (Listing first and
    /// creating after lost that: the race tests found two items left.) When the home
    /// keyring already exists one probe serves both.
    ///
    /// Either way the home anchor is made ready for writing first (see
    /// ``Anchor/serialForWriting()``): a new key grants its owner only "view" until kc
    /// sets its mask, and setting it needs the possession that gives.
    static func rings(of service: KeyName, home accessibility: Accessibility, probed known: [ServiceKeyring]? = nil) throws(KeychainError)
        -> (home: ServiceKeyring, all: [ServiceKeyring]) {
        _ = try accessibility.anchor.serialForWriting()
        let probed: [ServiceKeyring]
        if let known { probed = known } else { probed = try rings(of: service, startingWith: accessibility) }
        if let home = probed.first(where: { $0.accessibility == accessibility }) { return (home, probed) }
        let home = try findOrCreate(service: service, marker: accessibility.marker, anchor: accessibility.anchor)
        var all = try rings(of: service, startingWith: accessibility)
        if !all.contains(home) { all.insert(home, at: 0) }
        return (home, all)
    }

    /// Every service keyring of every anchor, with its service name: what `kc ls` and
    /// the mount's root list. (One service's rings are found with ``rings(of:startingWith:stopAtFirst:)``.)
    static func everywhere() throws(KeychainError) -> [(name: KeyName, ring: ServiceKeyring)] {
        var found: [(name: KeyName, ring: ServiceKeyring)] = []
        for anchor in Anchor.allCases {
            guard let anchorSerial = try anchor.serialForReading() else { continue }
            let linked: [KeySerial]
            linked = try Placement.linkedKeys(of: anchorSerial)
            for serial in linked {
                // Keys can vanish or expire between the listing and the describe. Only
                // the caller's own keyrings are its services: a member may link the
                // owner's writable share into its own keyrings (the group's link right).
                guard let info = try? serial.describe(), info.type == "keyring", info.uid == geteuid(),
                      let (marker, name) = ServiceMarker.parse(keyringDescription: info.description)
                else { continue }
                found.append((name, ServiceKeyring(serial: serial, anchor: anchor, marker: marker)))
            }
        }
        return found
    }
}

/// The keyring described `description` linked directly in `parent`, created race-free
/// if there is none (see ``ServiceKeyring/findOrCreate(service:marker:anchor:)``).
internal func findOrCreateKeyring(described description: KeyName, in parent: KeySerial,
                                  permissions: KeyPermissions = .ownerOnly) throws(KeychainError) -> KeySerial {
    do throws(KeyctlError) {
        for _ in 0..<8 {
            if let existing = try directChild(description: description, of: parent) { return existing }
            let thread = SpecialKeyring.thread.serial
            let fresh = try KeySerial.add(type: "keyring", description: description, payload: nil, into: thread)
            defer { try? fresh.unlink(from: thread) }  // no-op once moved
            try fresh.setPermissions(permissions)
            do {
                try fresh.move(from: thread, to: parent, exclusive: true)
                return fresh
            } catch where error.errno == .fileExists {
                continue  // another process won; use its keyring (or race again if it is gone)
            }
        }
        throw KeyctlError(.fileExists, call: "keyctl_move")
    } catch {
        throw KeychainError(error)
    }
}

/// A search finds a keyring linked directly in the parent before any nested one, so
/// the first hit is the parent's own child if it has one; the link list tells whether it
/// is. A keyring of another uid's in the caller's place is unlinked: the caller's
/// anchor is the caller's (see ``Anchor/serialForWriting()``).
private func directChild(description: KeyName, of parent: KeySerial) throws(KeyctlError) -> KeySerial? {
    do {
        // Nil: no keyring of that name at all, searchable or not.
        guard let found = try parent.search(type: "keyring", description: description) else { return nil }
        if try parent.linkedKeys().contains(found), let info = try? found.describe(), info.uid == geteuid() {
            try ServiceKeyring.secureIfNeeded(found, info)
            return found
        }
    } catch where error.errno == .permissionDenied {
        // One of that name the caller may not search: another uid's.
    }
    // Another uid's keyring of that name, directly in the caller's anchor: remove it.
    return try ownLinkedKey(type: "keyring", description: description, in: parent, unlinkingOthers: true)
}

/// The caller's own key of `type` and `description` linked directly in `parent`, read
/// from the link list (for when a search cannot answer: a key of that name the caller
/// may not search is in the way). With `unlinkingOthers`, keys of that type and name
/// that other uids own are unlinked from `parent`, which must be the caller's.
internal func ownLinkedKey(type: String, description: KeyName, in parent: KeySerial,
                           unlinkingOthers: Bool) throws(KeyctlError) -> KeySerial? {
    var own: KeySerial? = nil
    for key in try unlessGone({ () throws(KeyctlError) in try parent.linkedKeys() }) ?? [] {
        guard let info = try? key.describe(), info.type == type, info.description == description else { continue }
        if info.uid == geteuid() {
            own = own ?? key
        } else if unlinkingOthers {
            try? key.unlink(from: parent)
        }
    }
    return own
}
