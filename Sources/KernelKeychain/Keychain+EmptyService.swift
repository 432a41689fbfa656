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
    ///
    /// Bars are set only in the service's turn (``ServiceRemovalTurn``): without it the
    /// removal does nothing (false). A removal still in its turn after a few seconds (a
    /// stalled process) lifts its bars and gives up, before writers take a bar with no
    /// turn held for a dead remover's and lift it themselves.
    func removeIfEmpty() throws(KeychainError) -> Bool {
        let started = Self.monotonicSeconds()
        return try ServiceRemovalTurn.taking(for: name) { (held) throws(KeychainError) -> Bool in
            guard held else { return false }
            return try removeIfEmptyInTurn(startedAt: started)
        }
    }

    private static func monotonicSeconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec)
    }

    private func removeIfEmptyInTurn(startedAt started: Int64) throws(KeychainError) -> Bool {
        let rings = try ServiceKeyring.rings(of: name, startingWith: home)
        guard !rings.isEmpty else { return false }
        for ring in rings where (try? ring.serial.linkedKeys())?.isEmpty != true { return false }
        var barred: [(ring: ServiceKeyring, permissions: KeyPermissions)] = []
        func lift() { for (ring, permissions) in barred { try? ring.serial.setPermissions(permissions) } }
        do throws(KeyctlError) {
            for ring in rings {
                var permissions = try ring.serial.describe().permissions
                // A bar already there is a killed remover's (this one holds the turn): the
                // keyring's own mask is that without the bar.
                if permissions.isRemovalBarrier { permissions = permissions.liftingRemovalBarrier }
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
        // Stalled past the part of its turn it may use: writers will lift the bars soon.
        guard Self.monotonicSeconds() - started < ServiceRemovalTurn.usableSeconds else {
            lift()
            return false
        }
        var removed = false
        let holder = SpecialKeyring.thread.serial
        for ring in rings {
            // The kernel takes a link out of a keyring by the key's type and name, not
            // its serial: moving a ring another removal took out since the listing would
            // take out the newer ring of that name a writer made meanwhile. So the ring
            // must be in its anchor now (and removals take turns: ``ServiceRemovalTurn``).
            guard let anchor = try? ring.anchor.serial(), (try? anchor.linkedKeys())?.contains(ring.serial) == true else { continue }
            // Moved aside, then read once more: a removal stalled past its turn (stopped,
            // starved) may find that a writer took its bar for a dead remover's, lifted it
            // and stored. Such a keyring goes back, with its bar lifted.
            do throws(KeyctlError) { try ring.serial.move(from: anchor, to: holder, exclusive: false) } catch { continue }
            defer { try? ring.serial.unlink(from: holder) }
            guard let arrived = try? ring.serial.linkedKeys(), !arrived.isEmpty else {
                removed = true
                continue
            }
            if let lifted = Self.liftedMask(ofBarred: ring.serial) { try? ring.serial.setPermissions(lifted) }
            try restore(ring, heldIn: holder, under: anchor)
        }
        return removed
    }

    /// A write or removal met a keyring of the service without its write right: a
    /// removal of the empty service barred it (``removeIfEmpty()``), and unlinks it or
    /// lifts the bar within microseconds, in its turn. A bar while no removal holds the
    /// turn is a remover's that was killed: it is lifted. True if the refusal was such a
    /// bar (waited for, or lifted): the call is to be made again. False for any other
    /// refusal, which is the caller's to report.
    func waitOutRemoval(attempt: Int) -> Bool {
        guard let rings = try? ServiceKeyring.rings(of: name, startingWith: home) else { return false }
        let barred = rings.compactMap { ring in Self.liftedMask(ofBarred: ring.serial).map { (ring: ring.serial, lifted: $0) } }
        guard !barred.isEmpty else { return false }
        if attempt >= Self.barrierPatience || !ServiceRemovalTurn.isHeld(for: name) {
            for (ring, lifted) in barred { try? ring.setPermissions(lifted) }
        } else {
            usleep(10_000)
        }
        return true
    }

    /// Lifts every bar on the service's keyrings: for a removal that holds the turn, for
    /// which any bar there is a killed remover's.
    func liftBarsInTurn() {
        for ring in (try? ServiceKeyring.rings(of: name, startingWith: home)) ?? [] {
            if let lifted = Self.liftedMask(ofBarred: ring.serial) { try? ring.serial.setPermissions(lifted) }
        }
    }

    /// The mask `ring` gets back when its bar is lifted, if it is the caller's own and
    /// carries a removal's bar; nil otherwise (one `keyctl_describe`).
    private static func liftedMask(ofBarred ring: KeySerial) -> KeyPermissions? {
        guard let info = try? ring.describe(), info.uid == geteuid(), info.permissions.isRemovalBarrier else { return nil }
        return info.permissions.liftingRemovalBarrier
    }

    /// How many 10 ms waits a writer gives a bar whose removal holds the turn (a turn
    /// lasts ten seconds at most) before it lifts it.
    static let barrierPatience = 1100

    /// Runs `body` again while a removal's bar refuses it (EACCES), waiting the bar out
    /// (``waitOutRemoval(attempt:)``): every write and removal of an item goes through
    /// here, so a remover killed with its bar on blocks nobody.
    func waitingOutBars<T>(_ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        var attempt = 0, unbarredRefusals = 0
        while true {
            do throws(KeychainError) {
                return try body()
            } catch where error.underlying?.errno == .permissionDenied && attempt <= Self.barrierPatience {
                // No bar left to see: the removal lifted it or took the keyring out after
                // this call was refused (a removal running in a loop can do that each
                // time). A refusal that keeps coming without a bar in sight is real.
                if !waitOutRemoval(attempt: attempt) {
                    unbarredRefusals += 1
                    if unbarredRefusals > 25 { throw error }
                    usleep(1_000)
                }
                attempt += 1
            }
        }
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

