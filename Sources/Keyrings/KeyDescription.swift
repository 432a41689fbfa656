/// What `keyctl_describe` says of a key: `type;uid;gid;perm;description`.
public struct KeyDescription: Hashable, Sendable {
    public var type: String
    public var uid: UInt32
    public var gid: UInt32
    public var permissions: KeyPermissions
    /// The key's description, byte for byte; it may itself contain `;`.
    public var description: KeyName

    public init(type: String, uid: UInt32, gid: UInt32, permissions: KeyPermissions, description: KeyName) {
        self.type = type
        self.uid = uid
        self.gid = gid
        self.permissions = permissions
        self.description = description
    }

    /// Parses the kernel's describe string. The first four fields cannot contain `;`
    /// but the description can, so everything after the fourth `;` is the description.
    /// Returns nil for anything that is not in that form. The description is kept as
    /// bytes: it need not be UTF-8.
    public init?(parsing bytes: some Collection<UInt8>) {
        let fields = bytes.split(separator: UInt8(ascii: ";"), maxSplits: 4, omittingEmptySubsequences: false)
        guard fields.count == 5, !fields[0].isEmpty else { return nil }
        let text = fields[..<4].map { String(decoding: $0, as: UTF8.self) }
        guard let uid = Self.parseID(text[1]), let gid = Self.parseID(text[2]),
              let perm = UInt32(text[3], radix: 16)
        else { return nil }
        self.init(type: text[0], uid: uid, gid: gid,
                  permissions: KeyPermissions(rawValue: perm), description: KeyName(bytes: fields[4]))
    }

    /// ``init(parsing:)-(some Collection<UInt8>)`` of a describe string held as text.
    public init?(parsing text: String) {
        self.init(parsing: Array(text.utf8))
    }

    // The kernel prints ids with %d, so an unmapped id can appear as -1.
    private static func parseID(_ field: some StringProtocol) -> UInt32? {
        if let id = UInt32(field) { return id }
        return Int32(field).map { UInt32(bitPattern: $0) }
    }
}
