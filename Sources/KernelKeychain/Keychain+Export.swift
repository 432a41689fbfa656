import Keyrings

/// What an import does with one item.
public struct ImportStep: Sendable, Hashable {
    public enum Action: String, Sendable {
        /// A new item.
        case add
        /// An existing item replaced (only with `overwrite`).
        case replace
        /// An existing item left alone (no `overwrite`).
        case keep
    }

    public var item: ExportedItem
    public var action: Action
}

extension Keychain {
    /// Every exportable item of `services` (all services when empty), sorted by service
    /// and name, with level and time left. Device-only items are never exported (that
    /// is their meaning here); their number is returned so a caller can say so.
    public static func export(services: [KeyName] = []) throws(KeychainError) -> (items: [ExportedItem], deviceOnlySkipped: Int) {
        let names = services.isEmpty ? try Keychain.services() : services
        var exported: [ExportedItem] = []
        var skipped = 0
        // A service named twice is exported once: an archive naming an item twice is
        // one no import takes.
        var seen: Set<KeyName> = []
        for service in names where seen.insert(service).inserted {
            let keychain = try Keychain(service: service)
            for item in try keychain.items() {
                // A private keychain lists only the caller's own items, whose level is known.
                guard let accessibility = item.accessibility else { continue }
                if accessibility.isThisDeviceOnly { skipped += 1; continue }
                // An item can expire between the listing and the read: leave it out.
                guard let value = try keychain.data(forKey: item.name) else { continue }
                exported.append(ExportedItem(service: service, name: item.name, level: accessibility.level,
                                             deadline: item.deadline, value: value))
            }
        }
        return (exported, skipped)
    }

    /// ``export(services:)-([KeyName])`` of services named by `String`s (their UTF-8
    /// bytes), as code written when names were text calls it: `export(services: [service])`.
    /// Generic so that an empty list (`[]`) still means the ``KeyName`` method's "all".
    public static func export(services: [some KeyNameConvertible]) throws(KeychainError) -> (items: [ExportedItem], deviceOnlySkipped: Int) {
        try export(services: services.map(\.keyName))
    }

    /// What importing `items` would do, without changing anything.
    public static func planImport(_ items: [ExportedItem], overwrite: Bool) throws(KeychainError) -> [ImportStep] {
        var steps: [ImportStep] = []
        for item in items {
            let exists = try Keychain(service: item.service).contains(item.name)
            steps.append(ImportStep(item: item, action: !exists ? .add : overwrite ? .replace : .keep))
        }
        return steps
    }

    /// Imports `items` (already checked whole: see ``KeychainArchive/decodeJSON(_:)`` and
    /// ``DotEnv/parse(_:)``), restoring level and deadline. An existing item is
    /// replaced only with `overwrite`. An item whose deadline has passed is not
    /// imported (it would already have expired). Returns what was done.
    ///
    /// The key quota is checked first (see ``quotaNeeded(for:)``): an import that would
    /// not fit stores nothing and throws ``KeychainError/notEnoughQuota(what:keys:bytes:usage:)``,
    /// which says how much it needs and how to raise the limits, rather than stopping
    /// half-way at the kernel's refusal.
    @discardableResult
    public static func importItems(_ items: [ExportedItem], overwrite: Bool) throws(KeychainError) -> [ImportStep] {
        let steps = try planImport(items, overwrite: overwrite)
        let needed = try quotaNeeded(for: steps)
        if let usage = KeyQuota.current(), needed.keys > usage.freeKeys || needed.bytes > usage.freeBytes {
            throw .notEnoughQuota(what: "this import (\(needed.items) items; nothing was imported)",
                                  keys: needed.keys, bytes: needed.bytes, usage: usage)
        }
        for step in steps where step.action != .keep {
            if let deadline = step.item.deadline, deadline.secondsLeft == 0 { continue }
            try Keychain(service: step.item.service, accessibility: Accessibility(level: step.item.level, thisDeviceOnly: false))
                .set(step.item.value, forKey: step.item.name, until: step.item.deadline)
        }
        return steps
    }
}

extension Keychain {
    /// The keys and bytes of key quota that carrying out `steps` adds: a key per new
    /// item, and a keyring per service and level that has none yet, each costed as the
    /// kernel counts it (``KeyQuota/cost(descriptionLength:payloadLength:)``). A
    /// replaced item counts its whole new value, as the kernel reserves it before it
    /// frees the old one.
    public static func quotaNeeded(for steps: [ImportStep]) throws(KeychainError) -> (items: Int, keys: Int, bytes: Int) {
        var items = 0, keys = 0, bytes = 0
        var newRings: Set<KeyName> = []
        var existingRings: [KeyName: [ServiceKeyring]] = [:]
        for step in steps where step.action != .keep {
            if let deadline = step.item.deadline, deadline.secondsLeft == 0 { continue }
            items += 1
            bytes += KeyQuota.cost(descriptionLength: step.item.name.bytes.count, payloadLength: step.item.value.count)
            guard step.action == .add else { continue }
            keys += 1
            let accessibility = Accessibility(level: step.item.level, thisDeviceOnly: false)
            let rings: [ServiceKeyring]
            if let known = existingRings[step.item.service] {
                rings = known
            } else {
                rings = try OwnService(name: step.item.service, home: accessibility).rings()
                existingRings[step.item.service] = rings
            }
            let ringName = accessibility.marker.keyringDescription(for: step.item.service)
            let ringKey = ringName + KeyName("#\(step.item.level.rawValue)")
            if !rings.contains(where: { $0.accessibility == accessibility }), newRings.insert(ringKey).inserted {
                keys += 1
                bytes += KeyQuota.cost(descriptionLength: ringName.bytes.count, payloadLength: 0)
            }
        }
        return (items, keys, bytes)
    }
}
