#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A uid's use of the kernel's key quota, from `/proc/key-users`.
public struct KeyQuota: Sendable, Hashable {
    public var uid: UInt32
    /// Keys counted against the quota, and the limit (`kernel.keys.maxkeys`, or
    /// `root_maxkeys` for root).
    public var keys: Int
    public var maxKeys: Int
    /// Bytes of descriptions and payloads counted, and the limit (`maxbytes`).
    public var bytes: Int
    public var maxBytes: Int

    public init(uid: UInt32, keys: Int, maxKeys: Int, bytes: Int, maxBytes: Int) {
        self.uid = uid
        self.keys = keys
        self.maxKeys = maxKeys
        self.bytes = bytes
        self.maxBytes = maxBytes
    }

    /// The calling uid's usage; nil if /proc/key-users cannot be read.
    public static func current() -> KeyQuota? {
        of(uid: getuid())
    }

    /// Another uid's usage (the owner of a shared item a member writes: the owner's
    /// quota pays for it); nil if /proc/key-users cannot be read.
    public static func of(uid: UInt32) -> KeyQuota? {
        readProcFile("/proc/key-users").flatMap { parse(keyUsers: $0, uid: uid) }
    }

    /// Parses one line of `/proc/key-users`:
    /// `  uid: usage nkeys/nikeys qnkeys/maxkeys qnbytes/maxbytes`.
    /// A uid with no keys has no line; its usage is zero against the sysctl limits.
    public static func parse(keyUsers text: String, uid: UInt32) -> KeyQuota? {
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == ":" || $0 == "/" })
            guard fields.count == 8, UInt32(fields[0]) == uid,
                  let keys = Int(fields[4]), let maxKeys = Int(fields[5]),
                  let bytes = Int(fields[6]), let maxBytes = Int(fields[7])
            else { continue }
            return KeyQuota(uid: uid, keys: keys, maxKeys: maxKeys, bytes: bytes, maxBytes: maxBytes)
        }
        let prefix = uid == 0 ? "kernel/keys/root_" : "kernel/keys/"
        guard let maxKeys = readSysctl(prefix + "maxkeys"), let maxBytes = readSysctl(prefix + "maxbytes") else {
            return nil
        }
        return KeyQuota(uid: uid, keys: 0, maxKeys: maxKeys, bytes: 0, maxBytes: maxBytes)
    }
}

extension KeyQuota {
    /// The bytes the kernel counts against the quota for one key: its description, its
    /// NUL, four bytes of its own, and the payload (measured on Linux 6.x: a `user` key
    /// named `abcde` holding 10 bytes costs 20; a keyring named `ringx` costs 10).
    public static func cost(descriptionLength: Int, payloadLength: Int) -> Int {
        descriptionLength + 5 + payloadLength
    }

    public var freeKeys: Int { Swift.max(0, maxKeys - keys) }
    public var freeBytes: Int { Swift.max(0, maxBytes - bytes) }

    /// The largest value a new item named with `nameLength` bytes can hold now: the
    /// kernel's 32767-byte limit for a `user` key, or less where the quota has less room.
    public func largestNewValue(nameLength: Int) -> Int {
        guard freeKeys > 0 else { return 0 }
        return Swift.min(KeychainError.maximumValueSize, Swift.max(0, freeBytes - Self.cost(descriptionLength: nameLength, payloadLength: 0)))
    }

    /// `sudo sysctl -w …maxkeys=K …maxbytes=B` with room for `keys` and `bytes` more than
    /// are used now (at least doubling the limits, and at least 2000 keys and 200,000 bytes).
    public func raiseCommand(forMoreKeys keys: Int = 0, bytes: Int = 0) -> String {
        let prefix = uid == 0 ? "kernel.keys.root_" : "kernel.keys."
        let newKeys = Swift.max(2 * maxKeys, 2000, self.keys + keys + 100)
        let newBytes = Swift.max(2 * maxBytes, 200_000, self.bytes + bytes + 10_000)
        return "sudo sysctl -w \(prefix)maxkeys=\(newKeys) \(prefix)maxbytes=\(newBytes)"
    }
}
