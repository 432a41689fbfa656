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
/// Only calls that change nothing use it (a read, an item's size, whether a service
/// exists: the mount asks the last two at every lookup and stat). The check exists
/// against a keyring another uid put where the caller searches (a session shared after
/// `su`); such a keyring has a serial of its own, which is not here. To pass for one that is, it would need the very serial of
/// the caller's checked keyring after that one died, and the kernel draws serials at
/// random from 2^31: not within a second. Failed calls drop the keyring. A process
/// that changes its uid within the second is not served its old uid's keyring either:
/// only a mask that gives possessors nothing and the group no search is recorded, kc
/// gives other uids nothing, so the kernel refuses the next search in it.
final class RecentOwnerChecks: Sendable {
    static let shared = RecentOwnerChecks()

    /// How long a check stands, in nanoseconds.
    private static let lifetime: UInt64 = 1_000_000_000
    /// At most this many keyrings are remembered; a new one takes the oldest one's place.
    private static let capacity = 16

    /// One keyring's last check: a few of these, scanned in order, cost less per read
    /// than hashing into a dictionary.
    private struct Check {
        var ring: Int32
        var when: UInt64
    }

    private let checked = Mutex<[Check]>([])

    /// Whether `ring` passed the check within ``lifetime``.
    func passed(_ ring: KeySerial) -> Bool {
        let now = Self.now
        return checked.withLock { checks in
            for check in checks where check.ring == ring.rawValue { return now &- check.when < Self.lifetime }
            return false
        }
    }

    /// Records that `ring` passed the check now.
    func record(_ ring: KeySerial) {
        let now = Self.now
        checked.withLock { checks in
            let check = Check(ring: ring.rawValue, when: now)
            if let index = checks.firstIndex(where: { $0.ring == ring.rawValue }) {
                checks[index] = check
            } else if checks.count < Self.capacity {
                checks.append(check)
            } else if let oldest = checks.indices.min(by: { checks[$0].when < checks[$1].when }) {
                checks[oldest] = check
            }
        }
    }

    /// Forgets `ring` (a call on it failed: it may be gone, its serial free again).
    func forget(_ ring: KeySerial) {
        checked.withLock { checks in checks.removeAll { $0.ring == ring.rawValue } }
    }

    /// The coarse clock (the last tick's time, read without the time source): a
    /// second's lifetime needs no better, and it costs a read per call.
    private static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
