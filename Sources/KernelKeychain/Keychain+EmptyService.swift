import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Keychain {
    /// Removes the service if none of its keyrings holds an item and it is not shared:
    /// what `kc rm` does after removing a service's last item, so that `kc ls` lists no
    /// service that was only left behind. Returns whether it removed one.
    ///
    /// An item another process stores meanwhile is never lost with the keyring (see
    /// ``OwnService/removeIfEmpty()``); a read of it in the microseconds the keyring is
    /// held aside may miss it. Only the caller's own service is removed; a service
    /// another user shares is theirs.
    ///
    /// The kernel calls are `keyctl_read` of each service keyring and `keyctl_unlink`.
    @discardableResult
    public func removeServiceIfEmpty() throws(KeychainError) -> Bool {
        guard case .own(let own) = try resolve(forWriting: true) else { return false }
        return try own.removeIfEmpty()
    }

    /// The names of the service's items in the kernel and, for the caller's own
    /// service, those the vault keeps that the kernel lacks (all of them while the
    /// vault is locked): what ``removeAll()`` removes. Sorted by their bytes.
    public func allKeyNamesIncludingVault() throws(KeychainError) -> [KeyName] {
        let kernel = try allKeyNames()
        guard let service = serviceName, case .own = try resolve(forWriting: false),
              let journal = try? Self.journal(), journal.persists
        else { return kernel }
        return Array(Set(kernel + journal.keptNames(in: service))).sorted()
    }
}

extension OwnService {
    /// Unlinks the service's keyrings if every one is empty.
    ///
    /// A writer that found a keyring just before may link its item after the check. So
    /// each keyring is held (moved into the thread keyring) and read again; if an item
    /// arrived, it goes back (``restore(_:heldIn:under:)``). A writer holds the keyring
    /// too while its item goes in, so a keyring read empty here but written after that
    /// read lives on in the writer's hold, and the writer puts it back (``settle(_:)``).
    func removeIfEmpty() throws(KeychainError) -> Bool {
        try ServiceRemovalTurn.taking(for: name) { () throws(KeychainError) -> Bool in try removeIfEmptyInTurn() }
    }

    private func removeIfEmptyInTurn() throws(KeychainError) -> Bool {
        let rings = try ServiceKeyring.rings(of: name, startingWith: home)
        guard !rings.isEmpty else { return false }
        for ring in rings where (try? ring.serial.linkedKeys())?.isEmpty != true { return false }
        // A shared service is kept: its sharing was made on purpose, and the next item
        // stored (a rotation: rm, then set) joins it.
        for ring in rings where (try? ring.serial.describe()).map({ Sharing($0) != nil }) != false { return false }
        var removed = false
        let holder = SpecialKeyring.thread.serial
        for ring in rings {
            let anchor = try ring.anchor.serial()
            // The kernel takes a link out of a keyring by the key's type and name, not
            // its serial: moving a ring another removal took out since the listing would
            // detach, unread, the newer ring of that name a writer made meanwhile. So
            // the ring must be in its anchor now, and no other removal of the service may
            // take it out before the move (``ServiceRemovalTurn``).
            guard (try? anchor.linkedKeys())?.contains(ring.serial) == true else { continue }
            do throws(KeyctlError) { try ring.serial.move(from: anchor, to: holder, exclusive: false) } catch { continue }
            defer { try? ring.serial.unlink(from: holder) }
            guard let arrived = try? ring.serial.linkedKeys(), !arrived.isEmpty else {
                removed = true
                continue
            }
            try restore(ring, heldIn: holder, under: anchor)
        }
        return removed
    }

    /// Puts back a service keyring, held in `holder`, that an item reached while it was
    /// being removed: into its anchor, unless a writer made a new keyring of the service
    /// there meanwhile (`keyctl_move` with KEYCTL_MOVE_EXCL never displaces one: a
    /// plain link would, and take that keyring's items with it); then its items move
    /// into that one (an item of the same name there is the later write, and stays).
    ///
    /// That newer keyring is held while the items go in, since a removal of the empty
    /// service may be detaching it too; if it was, it is put back in turn. It is held in
    /// a keyring of its own: linked into `holder` beside the ring, it would displace it
    /// (a keyring keeps one link per type and name).
    func restore(_ ring: ServiceKeyring, heldIn holder: KeySerial, under anchor: KeySerial) throws(KeychainError) {
        var current = ring, currentHolder = holder
        var extraHold: KeySerial? = nil
        defer { if let extraHold { try? extraHold.unlink(from: holder) } }
        for _ in 0..<8 {
            do throws(KeyctlError) {
                try current.serial.move(from: currentHolder, to: anchor, exclusive: true)
                return
            } catch where error.errno == .fileExists {
                guard let newer = try ServiceKeyring.find(service: name, marker: current.marker, under: anchor) else { continue }
                if newer == current.serial { return }  // another holder put it back
                do throws(KeyctlError) {
                    let hold = try KeySerial.add(type: "keyring", description: Self.holdDescription, payload: nil, into: holder)
                    extraHold = hold  // displaces the previous one, if any: it is done with
                    do { try newer.link(into: hold) } catch where error.meansKeyIsGone { continue }
                    for key in try current.serial.linkedKeys() {
                        // A key another process moved or removed since the listing is
                        // theirs to place (ENOENT, or gone).
                        do { try key.move(from: current.serial, to: newer, exclusive: true) } catch {
                            if error.errno != .fileExists && error.errno != .noSuchFileOrDirectory && !error.meansKeyIsGone { throw error }
                        }
                    }
                    current = ServiceKeyring(serial: newer, anchor: current.anchor, marker: current.marker)
                    currentHolder = hold
                } catch {
                    throw KeychainError(error)
                }
                // Next round: newer still in its anchor is EEXIST and found as itself
                // (done); detached meanwhile, it is moved back.
            } catch {
                throw KeychainError(error)
            }
        }
        throw KeychainError(KeyctlError(.fileExists, call: "keyctl_move"))
    }

    /// The keyring a restore holds a newer service keyring in, in the thread keyring: a
    /// name no service keyring has (theirs begin `kc:` or `kc.local:`).
    private static let holdDescription: KeyName = "kc.hold"
}

