public import Keyrings

/// Why a keychain operation failed, and what to do about it. A missing item is not an
/// error: reads return nil.
///
/// Every case that comes from the kernel carries the ``KeyctlError`` underneath, which
/// names the failing libkeyutils call and its errno.
public enum KeychainError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The service or item name breaks the naming rules; nothing was sent to the kernel.
    case invalidName(kind: NameKind, problem: String)
    /// The kernel's `user` keys cannot hold an empty value.
    case emptyValue
    /// The value is larger than a `user` key can hold (32767 bytes).
    case valueTooLarge(size: Int)
    /// A timeout of zero, or longer than the kernel can express.
    case invalidTimeout(String)
    /// The kernel refused: the key belongs to another uid, lacks a permission, or the
    /// keyring is not possessed.
    case accessDenied(KeyctlError)
    /// The uid's key quota is full (`kernel.keys.maxkeys` / `maxbytes`).
    case quotaExceeded(KeyctlError, usage: KeyQuota?)
    /// Keyring system calls are not available: blocked by seccomp (most containers) or
    /// not built into the kernel, or the persistent keyring is not supported.
    case keyringsUnavailable(KeyctlError)
    /// The stored bytes are not what the caller asked to decode them as.
    case decodingFailed(item: String, reason: String)
    /// A write or removal through ``Keychain/anyService``, which names no service.
    case serviceRequired
    /// Any other kernel failure.
    case kernel(KeyctlError)

    /// The biggest value a `user` key accepts.
    public static let maximumValueSize = 32767

    /// The kernel call underneath, where there is one.
    public var underlying: KeyctlError? {
        switch self {
        case .accessDenied(let error), .quotaExceeded(let error, _), .keyringsUnavailable(let error), .kernel(let error):
            error
        default:
            nil
        }
    }

    /// One line: the cause, then what to do.
    public var description: String {
        switch self {
        case .invalidName(let kind, let problem):
            return "invalid \(kind.rawValue) name: it \(problem); use 1-255 bytes without '/' or NUL, not '.' or '..'"
        case .emptyValue:
            return "empty value: kernel keys cannot be empty; store at least one byte, or remove the item instead"
        case .valueTooLarge(let size):
            return "value too large: \(size) bytes, the kernel's limit for a key is \(Self.maximumValueSize) bytes; store a smaller value (or a path to a file)"
        case .invalidTimeout(let text):
            return "invalid timeout '\(text)': use a positive duration such as 90s, 15m, 2h, 7d or 1h30m (at most 136 years)"
        case .accessDenied(let error):
            return "permission denied (\(error)): the key belongs to another user or lacks a permission; check it with 'keyctl describe', or run as its owner"
        case .quotaExceeded(let error, let usage):
            var text = "key quota exceeded (\(error))"
            if let usage { text += ": uid \(usage.uid) uses \(usage.keys)/\(usage.maxKeys) keys and \(usage.bytes)/\(usage.maxBytes) bytes" }
            let prefix = usage?.uid == 0 ? "kernel.keys.root_" : "kernel.keys."
            let keys = max(2 * (usage?.maxKeys ?? 200), 2000), bytes = max(2 * (usage?.maxBytes ?? 20000), 200000)
            return text + "; remove unused items, or raise the limits: sudo sysctl -w \(prefix)maxkeys=\(keys) \(prefix)maxbytes=\(bytes)"
        case .keyringsUnavailable(let error):
            if error.call == "keyctl_get_persistent" {
                return "persistent keyrings unavailable (\(error)): the kernel lacks CONFIG_PERSISTENT_KEYRINGS; use --access after-first-unlock instead"
            }
            return "kernel keyrings unavailable (\(error)): keyring system calls are blocked (a container's seccomp profile) or not built in; run kc on the host and pass secrets in with 'kc exec' or a mount"
        case .decodingFailed(let item, let reason):
            return "cannot decode item '\(item)': \(reason)"
        case .serviceRequired:
            return "no service named: the any-service keychain only reads; name a service to write or remove"
        case .kernel(let error):
            return "kernel keyring call failed (\(error)); run 'kc doctor' to check the keyrings"
        }
    }

    /// Classifies a kernel failure.
    internal init(_ error: KeyctlError) {
        switch error.errno {
        case .permissionDenied:
            self = .accessDenied(error)
        case .notPermitted:
            // Docker's default seccomp profile answers EPERM for the key syscalls.
            self = KeyringProbe.syscallsWork() ? .accessDenied(error) : .keyringsUnavailable(error)
        case .diskQuotaExceeded:
            self = .quotaExceeded(error, usage: KeyQuota.current())
        case .noFunction, .notSupported:
            self = .keyringsUnavailable(error)
        default:
            self = .kernel(error)
        }
    }
}
