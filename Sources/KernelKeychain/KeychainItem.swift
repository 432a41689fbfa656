import Keyrings

/// What the kernel knows of one item, without its value.
public struct KeychainItem: Sendable, Hashable {
    /// The service's name and the item's, byte for byte (``KeyName/description`` shows
    /// them to people).
    public var service: KeyName
    public var name: KeyName
    /// The item's level; nil for another user's item: the anchor keyring it hangs
    /// from is theirs and cannot be seen.
    public var accessibility: Accessibility?
    /// The `user` key's serial, for `keyctl`.
    public var serial: KeySerial
    /// The value's length in bytes.
    public var size: Int
    /// When the kernel expires the item; nil for no expiry. Exact when kc set the
    /// timeout, else the earliest moment /proc/keys allows (see ``Deadline``).
    public var deadline: Deadline?
    /// Seconds until the kernel expires the item; nil for no expiry.
    public var secondsLeft: UInt64? { deadline?.secondsLeft }
    /// The uid that owns the key.
    public var owner: UInt32
    /// The group the item is shared with, if any (see ``Keychain/share(with:writable:)``).
    public var sharing: Sharing?

    /// The owner's user name, or the uid as text if it has none.
    public var ownerName: String { Accounts.name(ofUser: owner) ?? String(owner) }
}

