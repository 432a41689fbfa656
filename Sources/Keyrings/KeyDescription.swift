import KeyringCore

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
        var terminated = Array(bytes)
        guard !terminated.contains(0) else { return nil }
        terminated.append(0)
        guard let parsed = terminated.withUnsafeBytes({ Self(parsingCString: $0) }) else { return nil }
        self = parsed
    }

    /// The parser itself, over the NUL-terminated bytes `keyctl_describe` fills in: the
    /// core's ``DescribeFields``, which the front reads describes with too.
    internal init?(parsingCString buffer: UnsafeRawBufferPointer) {
        guard let fields = DescribeFields(buffer), let base = buffer.baseAddress else { return nil }
        let type = String(decoding: UnsafeRawBufferPointer(start: base, count: fields.typeLength), as: UTF8.self)
        let description = KeyName(cString: buffer.cString(at: fields.descriptionOffset))
        self.init(type: type, uid: fields.uid, gid: fields.gid, permissions: KeyPermissions(rawValue: fields.permissions),
                  description: description)
    }

    /// ``init(parsing:)-(some Collection<UInt8>)`` of a describe string held as text.
    public init?(parsing text: String) {
        self.init(parsing: Array(text.utf8))
    }
}
