public import SystemPackage
import KeyringCore

/// A keyring call the kernel refused: which call, and the errno it returned.
public struct KeyctlError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The errno the kernel returned.
    public var errno: Errno
    /// The libkeyutils function that failed, for example `keyctl_search`.
    public var call: String

    public init(_ errno: Errno, call: String) {
        self.errno = errno
        self.call = call
    }

    public var description: String { "\(call): \(errno)" }

    /// The key is absent, expired or revoked: the caller should treat it as missing.
    public var meansKeyIsGone: Bool {
        KernelSearch.meansKeyIsGone(errno.rawValue)
    }
}

extension Errno {
    /// Required key not available: no such key, or it cannot be found from here.
    ///
    /// The corresponding C error is `ENOKEY`.
    public static var noKey: Errno { Errno(rawValue: 126) }

    /// Key has expired: its timeout passed; the kernel will collect it.
    ///
    /// The corresponding C error is `EKEYEXPIRED`.
    public static var keyExpired: Errno { Errno(rawValue: 127) }

    /// Key has been revoked.
    ///
    /// The corresponding C error is `EKEYREVOKED`.
    public static var keyRevoked: Errno { Errno(rawValue: 128) }

    /// Key was rejected by service: a negative key instantiated by `request_key`.
    ///
    /// The corresponding C error is `EKEYREJECTED`.
    public static var keyRejected: Errno { Errno(rawValue: 129) }
}

/// Runs `body` and returns its result, or nil if the key it used vanished meanwhile
/// (removed, expired or revoked). Keys can go between any two calls, so "gone" is an
/// answer, not an error; every other failure is thrown.
@inline(__always)
public func unlessGone<R>(_ body: () throws(KeyctlError) -> R) throws(KeyctlError) -> R? {
    do {
        return try body()
    } catch {
        if error.meansKeyIsGone { return nil }
        throw error
    }
}
