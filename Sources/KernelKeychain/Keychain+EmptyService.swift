import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Keychain {
    /// Removes the service if it holds nothing: no item in any of its keyrings, and none
    /// that the vault keeps for it (locked or not: a locked vault's items are the
    /// service's too, though the kernel holds none of them). What `rmdir` of a service
    /// in the mount asks. Returns whether it removed one; false when it holds something
    /// (or an item arrived while it was being removed), or has no keyring.
    ///
    /// An item another process stores meanwhile is never lost with the keyring (see
    /// ``OwnService/removeIfEmpty()``). Only the caller's own service is removed.
    ///
    /// Removing an item never removes its service, at any door: an emptied service stays
    /// until it is removed on purpose (`kc rm SERVICE`, `rmdir`), as an emptied folder
    /// and an emptied `keyctl` keyring do (README, design notes).
    ///
    /// The kernel calls are `keyctl_describe`, `keyctl_setperm` and `keyctl_read` of each
    /// service keyring, and `keyctl_unlink`.
    @discardableResult
    public func removeServiceIfEmpty() throws(KeychainError) -> Bool {
        guard case .own(let own) = try resolve(forWriting: true) else { return false }
        guard try Self.vaultKeepsNothing(of: own.name) else { return false }
        return try own.removeIfEmpty()
    }

    /// The names of the service's items in the kernel and, for the caller's own
    /// service, those the vault keeps that the kernel lacks (all of them while the
    /// vault is locked): what the service holds, the one answer every door that removes
    /// a whole service asks (``removeAll()`` removes them; ``removeServiceIfEmpty()``
    /// removes nothing while there is one). Sorted by their bytes.
    public func allKeyNamesIncludingVault() throws(KeychainError) -> [KeyName] {
        let kernel = try allKeyNames()
        guard let service = serviceName, case .own = try resolve(forWriting: false),
              let journal = try? Self.journal(), journal.persists
        else { return kernel }
        return Array(Set(kernel + journal.keptNames(in: service))).sorted()
    }

    /// Whether the vault (if there is one) keeps no item of the service. A vault that
    /// cannot be looked at keeps what it may keep: the answer is no.
    private static func vaultKeepsNothing(of service: KeyName) throws(KeychainError) -> Bool {
        let journal = try journal()
        return !journal.persists || journal.keptNames(in: service).isEmpty
    }
}

extension OwnService {
    /// Unlinks the service's keyrings if every one is empty.
    ///
    /// A writer that found a keyring just before may link its item after a look. So
    /// first each keyring is barred: its write right is taken away (``removalBarrier``),
    /// after which no key can go into it, possessed or not. Then it is read: an item that
    /// came before the bar is seen, and the keyrings get their write right back and stay.
    /// Only a keyring read empty under the bar is unlinked. No keyring ever leaves its
    /// anchor with an item in it, so a remover killed at any step loses nothing: at
    /// worst a keyring stays barred, and a writer that meets the bar waits a moment for
    /// the removal and then lifts it (``waitOutRemoval(attempt:)``).
    func removeIfEmpty() throws(KeychainError) -> Bool {
        try ServiceRemovalTurn.taking(for: name) { () throws(KeychainError) -> Bool in try removeIfEmptyInTurn() }
    }

    private func removeIfEmptyInTurn() throws(KeychainError) -> Bool {
        let rings = try ServiceKeyring.rings(of: name, startingWith: home)
        guard !rings.isEmpty else { return false }
        for ring in rings where (try? ring.serial.linkedKeys())?.isEmpty != true { return false }
        var barred: [(ring: ServiceKeyring, permissions: KeyPermissions)] = []
        func lift() { for (ring, permissions) in barred { try? ring.serial.setPermissions(permissions) } }
        do throws(KeyctlError) {
            for ring in rings {
                let permissions = try ring.serial.describe().permissions
                try ring.serial.setPermissions(permissions.removalBarrier)
                barred.append((ring, permissions))
                guard try ring.serial.linkedKeys().isEmpty else {
                    lift()
                    return false
                }
            }
        } catch {
            lift()
            if error.meansKeyIsGone { return false }
            throw KeychainError(error)
        }
        var removed = false
        for ring in rings {
            // The kernel takes a link out of a keyring by the key's type and name, not
            // its serial: unlinking a ring another removal took out since the listing
            // would take out the newer ring of that name a writer made meanwhile. So the
            // ring must be in its anchor now (and removals take turns: ``ServiceRemovalTurn``).
            guard let anchor = try? ring.anchor.serial(), (try? anchor.linkedKeys())?.contains(ring.serial) == true else { continue }
            if (try? ring.serial.unlink(from: anchor)) != nil { removed = true }
        }
        return removed
    }

    /// A writer met a keyring of the service without its write right: a removal of the
    /// empty service barred it (``removeIfEmpty()``). The removal reads the keyring and
    /// unlinks it or lifts the bar within microseconds; a bar that stays a second is a
    /// remover's that was killed, and the writer lifts it. True if the refusal was such
    /// a bar (waited for, or lifted): the write is to be made again. False for any other
    /// refusal, which is the writer's to report.
    func waitOutRemoval(attempt: Int) -> Bool {
        guard let rings = try? ServiceKeyring.rings(of: name, startingWith: home) else { return false }
        var found = false
        for ring in rings {
            guard let info = try? ring.serial.describe(), info.uid == geteuid(), info.permissions.isRemovalBarrier else { continue }
            found = true
            if attempt >= Self.barrierPatience { try? ring.serial.setPermissions(info.permissions.liftingRemovalBarrier) }
        }
        if found, attempt < Self.barrierPatience { usleep(10_000) }
        return found
    }

    /// How many 10 ms waits a writer gives a removal's bar before lifting it.
    static let barrierPatience = 100

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

