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

extension TestQuota {
    /// The bytes charged to this uid once the kernel's collector has freed what it will
    /// (two readings 100 ms apart agree), less what the uid's thread and process keyrings
    /// (`_tid`, `_pid`) cost: a thread's keyring lives as long as its thread, and a test
    /// runner's idle worker thread that ends takes its keyring's 5 bytes (and 4 for each
    /// link in it) with it, which is not anything kc keeps or loses.
    public static func settledBytesOutsideScratchKeyrings() -> Int? {
        settledChargeOutsideScratchKeyrings()?.bytes
    }

    /// Keys and bytes charged to this uid, settled, less the uid's thread and process
    /// keyrings (see ``settledBytesOutsideScratchKeyrings()``).
    public static func settledChargeOutsideScratchKeyrings() -> Charge? {
        func reading() -> Charge? {
            guard let quota = KeyQuota.current() else { return nil }
            let scratch = scratchKeyrings()
            return Charge(keys: quota.keys - scratch.keys, bytes: quota.bytes - scratch.bytes)
        }
        var last = reading()
        for _ in 0..<50 {
            usleep(100_000)
            let now = reading()
            if now == last { return now }
            last = now
        }
        return last
    }

    public struct Charge: Equatable, CustomStringConvertible {
        public var keys: Int
        public var bytes: Int
        public var description: String { "\(keys) keys, \(bytes) bytes" }
    }

    public static func scratchKeyringBytes() -> Int { scratchKeyrings().bytes }

    /// What this uid's `_tid` and `_pid` keyrings are charged, from /proc/keys (which
    /// shows them to their uid: their perm grants the owner view): the description and
    /// its NUL, and four bytes for each link they hold.
    public static func scratchKeyrings() -> Charge {
        guard let text = try? String(contentsOfFile: "/proc/keys", encoding: .utf8) else { return Charge(keys: 0, bytes: 0) }
        let uid = String(getuid())
        var total = Charge(keys: 0, bytes: 0)
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 10, fields[5] == Substring(uid), fields[7] == "keyring",
                  fields[8] == "_tid:" || fields[8] == "_pid:"
            else { continue }
            total.keys += 1
            total.bytes += 5 + (Int(fields[9]) ?? 0) * 4
        }
        return total
    }
}
