import Keyrings

/// A service's whole set of items replaced at once: what a mirror of another store (a
/// KV secret's version, a certificate and its key) needs, so that no reader sees half of
/// one set and half of the next.
extension OwnService {
    /// Replaces the service's items with exactly `items` (names unique), at the home
    /// level, in one step.
    ///
    /// A new service keyring is made whole in the thread keyring, every item in it, and
    /// moved over the old one at the home level: `keyctl_move` without KEYCTL_MOVE_EXCL
    /// displaces the keyring of the same description in one edit of the anchor, so a
    /// search finds the old keyring or the new one, never a mix; a reader that holds the
    /// old keyring keeps reading the old set whole. Copies at other levels are removed
    /// after, and the old items' deadline records dropped.
    ///
    /// A writer that put an item into the old keyring while it was being displaced puts
    /// it into the new one when it finds its keyring detached (``restore(_:heldIn:under:)``
    /// keeps a same-named item already there): nothing written meanwhile is lost. An
    /// empty set removes the service.
    func replaceContents(_ items: [(name: KeyName, value: [UInt8])], until deadline: Deadline?) throws(KeychainError) {
        guard accessGroup == nil else { throw .sharedServiceCannotBeReplaced(service: name.description) }
        if items.isEmpty { return try removeAll() }
        try ServiceRemovalTurn.taking(for: name) { (held) throws(KeychainError) in
            if held { liftBarsInTurn() }
            try waitingOutBars { () throws(KeychainError) in try replaceContentsInTurn(items, until: deadline) }
        }
    }

    private func replaceContentsInTurn(_ items: [(name: KeyName, value: [UInt8])], until deadline: Deadline?) throws(KeychainError) {
        let anchor = try home.anchor.serialForWriting()
        let rings = try ServiceKeyring.rings(of: name, startingWith: home)
        let old = rings.first { $0.anchor == home.anchor && $0.marker == home.marker }
        if let old {
            let info: KeyDescription
            do { info = try old.serial.describe() } catch { throw KeychainError(error) }
            if Sharing(info) != nil { throw .sharedServiceCannotBeReplaced(service: name.description) }
        }
        let thread = SpecialKeyring.thread.serial
        do throws(KeyctlError) {
            let ring = try KeySerial.add(type: "keyring", description: ringDescription(home.marker), payload: nil, into: thread)
            defer { try? ring.unlink(from: thread) }  // no-op once moved
            try ring.setPermissions(.ownerOnly)
            for (key, value) in items {
                let fresh = try value.withUnsafeBytes { bytes in
                    Result { () throws(KeyctlError) in
                        try KeySerial.prepare(bytes, named: key, like: .ownItem(named: key, sharedAs: nil), until: deadline)
                    }
                }.get()
                guard try fresh.place(in: ring) else { throw KeyctlError(.noKey, call: "keyctl_move") }
            }
            let displaced = (try? old?.serial.linkedKeys()) ?? []
            try ring.move(from: thread, to: anchor, exclusive: false)
            DeadlineRecords.forget(displaced)
        } catch {
            throw KeychainError(error)
        }
        for other in rings where !(other.anchor == home.anchor && other.marker == home.marker) {
            try clearAndDetach(other)
        }
    }
}
