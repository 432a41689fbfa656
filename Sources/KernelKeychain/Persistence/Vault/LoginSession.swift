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
        try VaultKeys.addOwnerOnly(type: markType, description: markDescription, payload: Array("unlocked".utf8), into: session)
    }

    /// Whether the session keyring holds the mark, made by this uid.
    static var isMarked: Bool {
        guard let found = try? SpecialKeyring.session.serial.search(type: markType, description: markDescription),
              let info = try? found.describe()
        else { return false }
        return info.uid == geteuid()
    }

    // MARK: When this session last loaded the vault

    /// The time of this session's last whole load of its `when-unlocked` items (an
    /// unlock, the PAM session step): from then on its kernel copies were the vault's.
    /// A `user` key of the owner's alone in the session keyring, named after the vault's
    /// folder (a session can load two vaults: tests, `XDG_DATA_HOME`), holding
    /// nanoseconds since the epoch as decimal text; it goes with the session at logout.
    ///
    /// A `when-unlocked` item lives in each login session's own keyring, so two logins
    /// of one user hold two copies. A vault file changed after this session's load was
    /// written by another login (every write kc makes goes to the file first), and this
    /// session's copy of it is the older: lock and unlock never save it over the file.
    static func loadedDescription(of vault: VaultPath) -> KeyName {
        KeyName(bytes: Array("kc.loaded:".utf8) + vault.bytes)
    }

    /// Records `time` as this session's last load of the vault at `vault`.
    static func recordLoad(of vault: VaultPath, at time: Int64) {
        guard let session = try? Anchor.session.serialForWriting() else { return }
        // A key of that name another uid planted in a session it shares (after su or
        // runuser without a new session) would be updated in place, stay theirs, and so
        // switch the check off for this session: it goes first.
        if let found = try? session.search(type: "user", description: loadedDescription(of: vault)),
           let info = try? found.describe(), info.uid != geteuid() {
            try? found.unlink(from: session)
        }
        let payload = Array(String(time).utf8)
        let key = payload.withUnsafeBytes { bytes in
            try? KeySerial.add(type: "user", description: loadedDescription(of: vault), payload: bytes, into: session)
        }
        try? key?.setPermissions(.ownerOnly)
    }

    /// This session's last load, or nil if it has not loaded the vault (a shell outside
    /// a login, a service): then the kernel's copies are taken as the newer, as kc did
    /// before it kept the time.
    static func lastLoad(of vault: VaultPath) -> Int64? {
        guard let found = try? SpecialKeyring.session.serial.search(type: "user", description: loadedDescription(of: vault)),
              let info = try? found.describe(), info.uid == geteuid(),
              let bytes = try? found.read(sizeHint: 32)
        else { return nil }
        return Int64(String(decoding: bytes, as: UTF8.self))
    }
}

extension Vault {
    /// The uid whose session keyring this process has, when it is not the caller's:
    /// a session opened by `su USER` or `sudo -u USER` without pam_keyinit in its stack
    /// shares the caller's (root's) session keyring, where the user's `when-unlocked`
    /// items must not go (root could remove or replace them). Nil when the session
    /// keyring is the caller's, or there is none yet.
    public static var sessionKeyringOfAnotherUser: UInt32? {
        guard let session = try? SpecialKeyring.session.serial.resolved(create: false),
              let info = try? session.describe(), info.uid != geteuid()
        else { return nil }
        return info.uid
    }
}
