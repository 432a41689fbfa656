import Keyrings

/// What the kernel knows of one item, without its value.
public struct KeychainItem: Sendable, Hashable {
    public var service: String
    public var name: String
    /// The item's level; nil for another user's item: the anchor keyring it hangs
    /// from is theirs and cannot be seen.
    public var accessibility: Accessibility?
    /// The `user` key's serial, for `keyctl`.
    public var serial: KeySerial
    /// The value's length in bytes.
    public var size: Int
    /// Seconds until the kernel expires the item, as /proc/keys gives it (a lower bound
    /// in the coarsest whole unit: 59m means 59–60 minutes); nil for no expiry.
    public var secondsLeft: UInt64?
    /// The uid that owns the key.
    public var owner: UInt32
    /// The group the item is shared with, if any (see ``Keychain/share(with:writable:)``).
    public var sharing: Sharing?

    /// The owner's user name, or the uid as text if it has none.
    public var ownerName: String { Accounts.name(ofUser: owner) ?? String(owner) }
}

/// Reads expiries from /proc/keys, which lists the keys the caller may view:
/// `serial flags usage expiry perm uid gid type description: summary`.
internal enum ProcKeys {
    static func expiries() -> [KeySerial: UInt64] {
        guard let text = readProcFile("/proc/keys") else { return [:] }
        return parse(text)
    }

    static func parse(_ text: String) -> [KeySerial: UInt64] {
        var result: [KeySerial: UInt64] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 4, omittingEmptySubsequences: true)
            guard fields.count >= 4, let serial = UInt32(fields[0], radix: 16),
                  let seconds = seconds(fromExpiry: fields[3])
            else { continue }
            result[KeySerial(rawValue: Int32(bitPattern: serial))] = seconds
        }
        return result
    }

    /// `perm` (none) and `expd` are not timeouts; `45s`, `12m`, `3h`, `2d`, `1w` are.
    static func seconds(fromExpiry field: some StringProtocol) -> UInt64? {
        guard let unit = field.last, let count = UInt64(field.dropLast()) else { return nil }
        switch unit {
        case "s": return count
        case "m": return count * 60
        case "h": return count * 3600
        case "d": return count * 86400
        case "w": return count * 604800
        default: return nil
        }
    }
}
