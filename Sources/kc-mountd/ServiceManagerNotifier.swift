import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

/// The service manager's notification socket (`sd_notify(3)`'s protocol, spoken
/// directly: one datagram of `VARIABLE=value` lines to the AF_UNIX address in
/// `$NOTIFY_SOCKET`, a path or an abstract name written `@name`). systemd sets it for a
/// `Type=notify` unit and starts the unit's dependents once `READY=1` arrives.
struct ServiceManagerNotifier {
    let address: String

    /// The notifier `$NOTIFY_SOCKET` names; nil when it is unset or empty. The caller
    /// unsets the variable so that no child takes the unit's notifications for its own.
    static func fromEnvironment() -> ServiceManagerNotifier? {
        guard let value = getenv("NOTIFY_SOCKET"), value.pointee != 0 else { return nil }
        return ServiceManagerNotifier(address: String(cString: value))
    }

    /// Sends `state` (such as `READY=1`); a manager that does not listen is no failure.
    func notify(_ state: String) {
        _ = sendDatagram(Array(state.utf8), to: address)
    }
}
