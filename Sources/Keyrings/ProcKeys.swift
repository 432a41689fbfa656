/// One line of /proc/keys, which lists the keys the caller may view:
/// `serial flags usage expiry perm uid gid type description: summary`.
///
/// The kernel pads the type column and rounds the expiry down to a whole unit, so
/// `keyctl_describe` is the authority for a key's description and this line for
/// what only it shows: the time left.
public struct ProcKeysEntry: Hashable, Sendable {
    public var serial: KeySerial
    public var expiry: Expiry
    public var permissions: KeyPermissions
    public var uid: UInt32
    public var gid: UInt32
    public var type: String
    /// The description up to the first `: ` (the kernel appends a summary after it,
    /// and truncates long descriptions); use `keyctl_describe` for the exact text.
    public var descriptionPrefix: Substring

    /// When the key expires, as far as the line tells.
    public enum Expiry: Hashable, Sendable {
        /// `perm`: no expiry.
        case never
        /// `expd`: expired, awaiting collection.
        case expired
        /// At least `seconds` and less than `seconds + unit` seconds from now: the
        /// kernel prints whole seconds, minutes, hours, days or weeks, rounded down.
        case within(seconds: UInt64, unit: UInt64)

        init?(_ field: some StringProtocol) {
            if field == "perm" { self = .never; return }
            if field == "expd" { self = .expired; return }
            guard let last = field.last, let count = UInt64(field.dropLast()) else { return nil }
            let unit: UInt64
            switch last {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            case "d": unit = 86400
            case "w": unit = 604800
            default: return nil
            }
            self = .within(seconds: count * unit, unit: unit)
        }
    }

    /// Parses one line; nil for anything not in the kernel's form (a description
    /// holding a newline splits a line in two).
    public init?(parsing line: Substring) {
        let fields = line.split(separator: " ", maxSplits: 8, omittingEmptySubsequences: true)
        guard fields.count == 9,
              let serial = UInt32(fields[0], radix: 16),
              let expiry = Expiry(fields[3]),
              let permissions = UInt32(fields[4], radix: 16),
              let uid = UInt32(fields[5]) ?? Int32(fields[5]).map({ UInt32(bitPattern: $0) }),
              let gid = UInt32(fields[6]) ?? Int32(fields[6]).map({ UInt32(bitPattern: $0) })
        else { return nil }
        self.serial = KeySerial(rawValue: Int32(bitPattern: serial))
        self.expiry = expiry
        self.permissions = KeyPermissions(rawValue: permissions)
        self.uid = uid
        self.gid = gid
        self.type = String(fields[7])
        // The type column is padded; the padding stays in front of the description.
        let rest = fields[8].drop { $0 == " " }
        if let colon = rest.firstRange(of: ": ") { descriptionPrefix = rest[..<colon.lowerBound] } else { descriptionPrefix = rest }
    }

    /// Every well-formed line of a /proc/keys text.
    public static func parse(_ text: String) -> [ProcKeysEntry] {
        text.split(separator: "\n").compactMap { ProcKeysEntry(parsing: $0) }
    }
}
