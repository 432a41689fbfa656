import Keyrings
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Service keyrings that passed the owner check (described: the caller's own uid, a
/// mask as kc makes it) within the last second, so that a program reading the same
/// service in a loop pays one `keyctl_describe` a second instead of one a read.
///
/// Only reads use it. The check exists against a keyring another uid put where the
/// caller searches (a session shared after `su`); such a keyring has a serial of its
/// own, which is not here. To pass for one that is, it would need the very serial of
/// the caller's checked keyring after that one died, and the kernel draws serials at
/// random from 2^31: not within a second. Failed calls drop the keyring.
final class RecentOwnerChecks: Sendable {
    static let shared = RecentOwnerChecks()

    /// How long a check stands, in nanoseconds.
    private static let lifetime: UInt64 = 1_000_000_000
    /// At most this many keyrings are remembered; more empties the table.
    private static let capacity = 64

    private let checked = Mutex<[Int32: UInt64]>([:])

    /// Whether `ring` passed the check within ``lifetime``.
    func passed(_ ring: KeySerial) -> Bool {
        let now = Self.now
        return checked.withLock { table in
            guard let when = table[ring.rawValue] else { return false }
            return now &- when < Self.lifetime
        }
    }

    /// Records that `ring` passed the check now.
    func record(_ ring: KeySerial) {
        let now = Self.now
        checked.withLock { table in
            if table.count >= Self.capacity { table.removeAll(keepingCapacity: true) }
            table[ring.rawValue] = now
        }
    }

    /// Forgets `ring` (a call on it failed: it may be gone, its serial free again).
    func forget(_ ring: KeySerial) {
        _ = checked.withLock { table in table.removeValue(forKey: ring.rawValue) }
    }

    private static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
