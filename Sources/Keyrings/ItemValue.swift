/// How an item's value is held in its `user` key.
///
/// A value of one byte or more is the key's payload, byte for byte, nothing added, so
/// `keyctl print` and `keyctl pipe` show it as it is. The kernel refuses an empty
/// payload, so an empty value is held as the payload of one NUL byte in a key marked
/// empty: its possessor rights are view alone (``emptyMark``). kc's items otherwise
/// give possessors nothing, and a key `keyctl add` makes gives them everything. The mark
/// grants no one anything: items are possessed only by their owner's processes (no other
/// uid can search a service keyring), and the owner can already view them through the
/// owner's rights.
///
/// A key is marked only when it is made whole before it is placed (``needsFreshKey(_:)``),
/// so a reader never sees a marked key between two calls of one write. A mark left on a
/// key that an update in place gave other bytes means nothing: only the one NUL byte
/// with the mark reads as empty, and a value of one NUL byte is always written as a new
/// key without the mark.
public enum ItemValue {
    /// The possessor rights that mark a key whose one NUL byte stands for an empty value.
    public static let emptyMark: KeyPermissions = .possessor(.view)

    /// Whether `permissions` carry the mark: possessors may view, and nothing else.
    public static func isMarkedEmpty(_ permissions: KeyPermissions) -> Bool {
        permissions.possessorRights == [.view]
    }

    /// Whether writing `bytes` must make a new key, marked or not, and move it over the
    /// old one rather than update the old one in place: an empty value, or a value of
    /// one NUL byte (which an update in place would leave marked, so empty).
    public static func needsFreshKey(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count == 0 || (bytes.count == 1 && bytes[0] == 0)
    }

    /// What a key made for `bytes` holds: the bytes, or for an empty value the one NUL byte.
    public static func withPayload<R, E: Error>(of bytes: UnsafeRawBufferPointer,
                                                _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        guard bytes.isEmpty else { return try body(bytes) }
        var nul: UInt8 = 0
        return try withUnsafeBytes(of: &nul) { (payload) throws(E) -> R in try body(payload) }
    }

    /// `permissions` for a new key that holds `bytes`: marked empty exactly when they are.
    public static func permissions(_ permissions: KeyPermissions, holding bytes: UnsafeRawBufferPointer) -> KeyPermissions {
        let possessors = KeyPermissions.possessor(.all)
        if bytes.isEmpty { return permissions.subtracting(possessors).union(emptyMark) }
        return isMarkedEmpty(permissions) ? permissions.subtracting(possessors) : permissions
    }

    /// Whether a key whose payload is `payload` and whose mask is `permissions` holds the
    /// empty value.
    public static func isEmpty(payload: some Collection<UInt8>, permissions: KeyPermissions) -> Bool {
        payload.count == 1 && payload.first == 0 && isMarkedEmpty(permissions)
    }
}

extension KeySerial {
    /// Calls `body` with the item's value (``withPayload(sizeHint:_:)``, nothing for a key
    /// marked empty), once. A payload of one NUL byte costs a `keyctl_describe` more.
    public func withValue<R>(sizeHint: Int = 4096, _ body: (UnsafeRawBufferPointer) -> R) throws(KeyctlError) -> R {
        var loneNul = false
        let answer: R? = try withPayload(sizeHint: sizeHint) { payload in
            if payload.count == 1 && payload[0] == 0 {
                loneNul = true
                return nil
            }
            return body(payload)
        }
        if let answer, !loneNul { return answer }
        let empty = ItemValue.isMarkedEmpty(try describe().permissions)
        var nul: UInt8 = 0
        return withUnsafeBytes(of: &nul) { body(empty ? UnsafeRawBufferPointer(rebasing: $0[..<0]) : $0) }
    }

    /// The item's value: the payload, or nothing for a key marked empty (``ItemValue``).
    /// One `keyctl_read`; a payload of one NUL byte costs a `keyctl_describe` more.
    public func readValue(sizeHint: Int = 4096) throws(KeyctlError) -> [UInt8] {
        let payload = try read(sizeHint: sizeHint)
        guard payload.count == 1, payload[0] == 0 else { return payload }
        return ItemValue.isEmpty(payload: payload, permissions: try describe().permissions) ? [] : payload
    }

    /// The item value's length: the payload's, or 0 for a key marked empty. One
    /// `keyctl_read` without a buffer; a payload of one byte costs a read and maybe a
    /// describe more.
    public func valueSize() throws(KeyctlError) -> Int {
        let size = try payloadSize()
        guard size == 1 else { return size }
        return try readValue(sizeHint: 1).count
    }
}
