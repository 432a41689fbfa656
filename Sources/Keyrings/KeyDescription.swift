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

    /// The parser itself, over the NUL-terminated bytes `keyctl_describe` fills in.
    ///
    /// On `kc get`'s path (one describe of the service keyring), so it scans by hand:
    /// splitting into an array of slices made the Swift runtime build that array's
    /// type by name and scan the conformance tables at first use, which cost more than
    /// twice the rest of a `kc get` (callgrind: 104,000 -> 352,000 instructions).
    internal init?(parsingCString buffer: UnsafeRawBufferPointer) {
        guard let end = buffer.firstIndex(of: 0) else { return nil }
        var separators = (0, 0, 0, 0)
        var found = 0
        var index = 0
        while index < end && found < 4 {
            if buffer[index] == UInt8(ascii: ";") {
                switch found {
                case 0: separators.0 = index
                case 1: separators.1 = index
                case 2: separators.2 = index
                default: separators.3 = index
                }
                found += 1
            }
            index += 1
        }
        guard found == 4, separators.0 > 0,
              let uid = Self.parseID(buffer, from: separators.0 + 1, to: separators.1),
              let gid = Self.parseID(buffer, from: separators.1 + 1, to: separators.2),
              let perm = Self.parseHex(buffer, from: separators.2 + 1, to: separators.3),
              let base = buffer.baseAddress
        else { return nil }
        let type = String(decoding: UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: separators.0),
                          as: UTF8.self)
        let description = KeyName(cString: (base + separators.3 + 1).assumingMemoryBound(to: CChar.self))
        self.init(type: type, uid: uid, gid: gid, permissions: KeyPermissions(rawValue: perm), description: description)
    }

    // The kernel prints ids with %d, so an unmapped id can appear as -1.
    private static func parseID(_ buffer: UnsafeRawBufferPointer, from start: Int, to end: Int) -> UInt32? {
        guard start < end else { return nil }
        let negative = buffer[start] == UInt8(ascii: "-")
        var value: Int64 = 0
        for index in (negative ? start + 1 : start)..<end {
            let digit = buffer[index] &- UInt8(ascii: "0")
            guard digit < 10, value <= Int64(UInt32.max) else { return nil }
            value = value * 10 + Int64(digit)
        }
        if negative { return value <= Int64(Int32.max) + 1 && end > start + 1 ? UInt32(bitPattern: Int32(truncatingIfNeeded: -value)) : nil }
        return value <= Int64(UInt32.max) ? UInt32(value) : nil
    }

    private static func parseHex(_ buffer: UnsafeRawBufferPointer, from start: Int, to end: Int) -> UInt32? {
        guard start < end, end - start <= 8 else { return nil }
        var value: UInt32 = 0
        for index in start..<end {
            let byte = buffer[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// ``init(parsing:)-(some Collection<UInt8>)`` of a describe string held as text.
    public init?(parsing text: String) {
        self.init(parsing: Array(text.utf8))
    }
}
