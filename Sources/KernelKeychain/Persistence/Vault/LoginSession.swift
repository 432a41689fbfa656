import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether this process runs in a login session that unlocked the vault: PAM's session
/// step or a `kc unlock` in it left a mark in its session keyring. `when-unlocked` items
/// come from the vault only there; a cron job, a service or a shell started outside the
/// login (its own session keyring, or the user's default one) gets none of them, and
/// after logout the mark goes with the login's session keyring.
///
/// The mark is a `logon` key (the kernel never lets anyone read its payload) with a
/// description no item can take: items are `user` keys. It is a rule for the user's own
/// processes, not a wall between them: a process of the same uid can read the vault's
/// stashed key whatever it does (docs/SECURITY.md).
internal enum LoginSession {
    static let markType = "logon"
    static let markDescription: KeyName = "kc:login-session"

    /// Marks the session keyring (created if the process had none of its own: the
    /// user's default session keyring then).
    static func mark() throws(KeychainError) {
        let session = try Anchor.session.serialForWriting()
        let payload: [UInt8] = Array("unlocked".utf8)
        do throws(KeyctlError) {
            let key = try payload.withUnsafeBytes { bytes in
                Result { () throws(KeyctlError) in
                    try KeySerial.add(type: markType, description: markDescription, payload: bytes, into: session)
                }
            }.get()
            try key.setPermissions(.ownerOnly)
        } catch {
            throw KeychainError(error)
        }
    }

    /// Whether the session keyring holds the mark, made by this uid.
    static var isMarked: Bool {
        guard let found = try? SpecialKeyring.session.serial.search(type: markType, description: markDescription),
              let info = try? found.describe()
        else { return false }
        return info.uid == geteuid()
    }
}
