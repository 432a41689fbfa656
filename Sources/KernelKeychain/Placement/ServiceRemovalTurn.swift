import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Removals of a service's keyrings from their anchors take turns, across processes.
///
/// The kernel takes a link out of a keyring by the key's type and name, not its serial:
/// a removal that acts on a keyring it listed earlier takes out whatever keyring of
/// that name is there now. If another removal took the listed one out meanwhile and a
/// writer made a new one and stored an item in it, that newer keyring goes unread, and
/// the item with it. A removal of the empty service (``OwnService/removeIfEmpty()``)
/// therefore checks that the ring is still in its anchor right before it moves it out,
/// and no other removal of the service may run between the two calls.
///
/// A turn is a `user` key named `kc.removing:SERVICE`, moved with KEYCTL_MOVE_EXCL into
/// the user keyring (every process of the uid shares it): the move that succeeds holds
/// the turn; the others wait. It expires after ten seconds, so a holder killed with
/// SIGKILL delays the service's removals, never stops them: a removal that waits a
/// second without its turn goes ahead as it did before turns.
internal enum ServiceRemovalTurn {
    /// Runs `body` in the service's turn (or after a second without it); `body` is told
    /// whether it holds the turn.
    static func taking<T>(for service: KeyName, _ body: (_ held: Bool) throws(KeychainError) -> T) throws(KeychainError) -> T {
        let turn = take(service)
        defer { if let turn { give(turn) } }
        return try body(turn != nil)
    }

    /// Whether some removal holds the service's turn now (its key is there, unexpired).
    /// A removal bars a service's keyrings only in its turn, so a bar with no turn held
    /// is a remover's that was killed (or stalled past its turn), which writers may lift.
    static func isHeld(for service: KeyName) -> Bool {
        (try? SpecialKeyring.user.serial.search(type: "user", description: KeyName(prefix) + service)) != nil
    }

    /// How long a turn may be used: well inside its ten seconds, so that no writer lifts
    /// a bar (once the turn has expired) while its remover can still act on it.
    static let usableSeconds: Int64 = 5

    private static func take(_ service: KeyName) -> KeySerial? {
        let thread = SpecialKeyring.thread.serial
        let mark: [UInt8] = [0x31]
        let made = mark.withUnsafeBytes { bytes in
            try? KeySerial.add(type: "user", description: KeyName(prefix) + service, payload: bytes, into: thread)
        }
        guard let turn = made else { return nil }
        defer { try? turn.unlink(from: thread) }  // no-op once moved
        guard (try? turn.setTimeout(seconds: 10)) != nil else { return nil }
        for _ in 0..<1000 {
            do {
                try turn.move(from: thread, to: SpecialKeyring.user.serial, exclusive: true)
                return turn
            } catch where error.errno == .fileExists {
                usleep(1000)
            } catch {
                return nil
            }
        }
        return nil
    }

    /// Unlinked, not invalidated: an unlink gives back the key and the link's quota at
    /// once (see ``OwnService/drop(_:)``).
    private static func give(_ turn: KeySerial) {
        try? turn.unlink(from: SpecialKeyring.user.serial)
    }

    private static let prefix = "kc.removing:"
}
