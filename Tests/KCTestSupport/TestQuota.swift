import Foundation
import KernelKeychain

/// The kernel's key quota for the uid running the tests. Root's is 25 MB; an ordinary
/// user's whole quota is 200 keys and 20,000 bytes, less than one 32767-byte value, so
/// a test of the largest value checks which of the two behaviours this uid gets.
public enum TestQuota {
    /// Whether one more key holding `size` bytes (with its name and a new service
    /// keyring) fits in this uid's quota now.
    public static func hasRoom(forValueOf size: Int) -> Bool {
        guard let quota = KeyQuota.current() else { return true }
        return quota.maxBytes - quota.bytes >= size + 1024 && quota.maxKeys - quota.keys >= 4
    }

    /// The kernel frees removed keys in its garbage collector, a moment later, and
    /// counts them against the quota until then: after a test that churned keys (a
    /// race, a full quota) an ordinary user's next test can meet a full quota that is
    /// only waiting to be collected. Waits (at most 5 s) until at least `keys` keys and
    /// `bytes` bytes are free.
    public static func waitForRoom(keys: Int = 60, bytes: Int = 4000) {
        for _ in 0..<100 {
            guard let quota = KeyQuota.current(), quota.freeKeys < keys || quota.freeBytes < bytes else { return }
            usleep(50_000)
        }
    }
}
