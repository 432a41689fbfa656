import Keyrings

/// Cheap checks of what this process can do with keyrings; used to tell "blocked" from
/// "denied" and by `kc doctor`.
public enum KeyringProbe {
    /// Whether the keyring system calls work at all here: resolving the session keyring
    /// is refused only by seccomp or a kernel without keys.
    public static func syscallsWork() -> Bool {
        (try? SpecialKeyring.session.serial.resolved(create: false)) != nil
    }
}
