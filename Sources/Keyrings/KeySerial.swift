/// The kernel's handle for a key or keyring (`key_serial_t`).
///
/// Serials are positive for real keys; the negative values are the special keyrings
/// (see ``SpecialKeyring``), which the kernel resolves relative to the calling thread.
public struct KeySerial: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public var description: String { String(rawValue) }
}

/// The keyrings every thread can name without knowing a serial.
public enum SpecialKeyring: Int32, Sendable, CaseIterable {
    /// `@t`: private to the calling thread; created on first use.
    case thread = -1
    /// `@p`: shared by the process; created on first use.
    case process = -2
    /// `@s`: the login session's keyring, inherited over fork.
    case session = -3
    /// `@u`: the uid's keyring, shared by every session of the uid.
    case user = -4
    /// `@us`: the uid's default session keyring.
    case userSession = -5
    /// `@g`: reserved by the kernel; not implemented.
    case group = -6

    /// The special serial that names this keyring in any call.
    public var serial: KeySerial { KeySerial(rawValue: rawValue) }
}
