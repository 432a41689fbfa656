/// What `keyctl_describe` says of a key: `type;uid;gid;perm;description`.
public struct KeyDescription: Hashable, Sendable {
    public var type: String
    public var uid: UInt32
    public var gid: UInt32
    public var permissions: KeyPermissions
    /// The key's description, which may itself contain `;`.
    public var description: String

    public init(type: String, uid: UInt32, gid: UInt32, permissions: KeyPermissions, description: String) {
        self.type = type
        self.uid = uid
        self.gid = gid
        self.permissions = permissions
        self.description = description
    }

    /// Parses the kernel's describe string. The first four fields cannot contain `;`
    /// but the description can, so everything after the fourth `;` is the description.
    /// Returns nil for anything that is not in that form.
    public init?(parsing text: some StringProtocol) {
        let fields = text.split(separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
        guard fields.count == 5, !fields[0].isEmpty,
              let uid = Self.parseID(fields[1]), let gid = Self.parseID(fields[2]),
              let perm = UInt32(fields[3], radix: 16)
        else { return nil }
        self.init(type: String(fields[0]), uid: uid, gid: gid,
                  permissions: KeyPermissions(rawValue: perm), description: String(fields[4]))
    }

    // The kernel prints ids with %d, so an unmapped id can appear as -1.
    private static func parseID(_ field: some StringProtocol) -> UInt32? {
        if let id = UInt32(field) { return id }
        return Int32(field).map { UInt32(bitPattern: $0) }
    }
}
