import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// When an item expires: wall-clock seconds since the epoch, the clock the kernel
/// keeps key expiry in.
public struct Deadline: Hashable, Sendable, Comparable {
    public var secondsSinceEpoch: Int64
    /// True when kc recorded the deadline when the timeout was set, so it is known to
    /// the second. False when only /proc/keys tells it, which rounds the time left down
    /// to a whole second, minute, hour, day or week: then this is the earliest moment
    /// the key can expire, so a copy made with it never outlives the original.
    public var isExact: Bool

    public init(secondsSinceEpoch: Int64, isExact: Bool = true) {
        self.secondsSinceEpoch = secondsSinceEpoch
        self.isExact = isExact
    }

    /// The deadline `seconds` from now.
    public static func fromNow(seconds: UInt64) -> Deadline {
        Deadline(secondsSinceEpoch: Deadline.now + Int64(clamping: seconds))
    }

    /// Whole seconds left, 0 once passed.
    public var secondsLeft: UInt64 { UInt64(max(secondsSinceEpoch - Deadline.now, 0)) }

    public static func < (lhs: Deadline, rhs: Deadline) -> Bool { lhs.secondsSinceEpoch < rhs.secondsSinceEpoch }

    /// The kernel's clock for key expiry, in seconds since the epoch.
    public static var now: Int64 { Int64(time(nil)) }
}
