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
    func restore(_ ring: ServiceKeyring, heldIn holder: KeySerial, under anchor: KeySerial) throws(KeychainError) {
        for _ in 0..<8 {
            do throws(KeyctlError) {
                try ring.serial.move(from: holder, to: anchor, exclusive: true)
                return
            } catch where error.errno == .fileExists {
                guard let newer = try ServiceKeyring.find(service: name, marker: ring.marker, under: anchor) else { continue }
                if newer == ring.serial { return }  // another holder put it back
                do throws(KeyctlError) {
                    for key in try ring.serial.linkedKeys() {
                        // A key another process moved or removed since the listing is
                        // theirs to place (ENOENT, or gone).
                        do { try key.move(from: ring.serial, to: newer, exclusive: true) } catch {
                            if error.errno != .fileExists && error.errno != .noSuchFileOrDirectory && !error.meansKeyIsGone { throw error }
                        }
                    }
                } catch {
                    throw KeychainError(error)
                }
                return
            } catch {
                throw KeychainError(error)
            }
        }
        throw KeychainError(KeyctlError(.fileExists, call: "keyctl_move"))
    }
}

