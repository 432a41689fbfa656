import Keyrings
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The keyring an accessibility level lives under (DESIGN §2).
internal enum Anchor: CaseIterable, Sendable {
    case session, user, persistent

    /// A serial that names the anchor in keyctl calls. Session and user are special
    /// ids the kernel resolves itself (and treats as possessed); the persistent keyring
    /// is fetched and linked into the thread keyring, which makes it possessed too
    /// without showing up in the user's session keyring.
    ///
    /// Inside a user namespace (rootless podman) the user anchor is the user keyring
    /// outside it, and the persistent anchor cannot be reached (see ``UserNamespace``).
    func serial() throws(KeychainError) -> KeySerial {
        if UserNamespace.isUnmapped { throw .unmappedUserNamespace }
        switch self {
        case .session: return SpecialKeyring.session.serial
        case .user: return try UserNamespace.outsideUserKeyring() ?? SpecialKeyring.user.serial
        case .persistent:
            if let uid = UserNamespace.outsideUID { throw .unreachableFromUserNamespace(level: .always, outsideUID: uid) }
            do {
                return try KeySerial.persistentKeyring(linkedInto: SpecialKeyring.thread.serial)
            } catch {
                if error.errno == .notSupported || error.errno == .noFunction { throw .keyringsUnavailable(error) }
                throw KeychainError(error)
            }
        }
    }
}

extension Anchor {
    /// As ``serial()``, for finding: nil for an anchor that cannot be reached from
    /// inside a user namespace, where nothing of the caller's can be found.
    func serialForReading() throws(KeychainError) -> KeySerial? {
        do {
            return try serial()
        } catch {
            if case .unreachableFromUserNamespace = error { return nil }
            throw error
        }
    }

    /// As ``serial()``, for adding to the anchor. A process with no session keyring
    /// that *writes* to `@s` gets a new anonymous session keyring that dies with it,
    /// whereas a lookup installs the uid's default session keyring, which other
    /// processes share. So the session keyring is looked up first, never created.
    ///
    /// A new `user` key grants its uid only "view" until kc sets its permissions, and
    /// setting them needs possession: the key must be reachable from this thread's
    /// keyrings. The user keyring is usually linked in the session keyring but not
    /// always (a fresh `keyctl session`, a service), so it is linked into the thread
    /// keyring, as the persistent keyring already is.
    ///
    /// The anchor must be the caller's own, and no other uid may change its links:
    /// another uid that shares the session (after `su`, `sudo` or `runuser`) possesses
    /// the session keyring, and through it the user keyring when that is linked there,
    /// and the anchors' default masks give possessors write, which is enough to unlink a
    /// service keyring or displace it with one of its own. So kc moves the possessor
    /// rights of the session and user keyrings to the owning uid (nothing changes for
    /// the owner's own processes, which hold both) before it stores into them. The
    /// persistent keyring's mask cannot be changed (the kernel gives no one setattr on
    /// it); SECURITY.md says what that leaves.
    ///
    /// Possessors keep "search" and "link" on the user keyring, and only those:
    /// pam_keyinit links it into each new login's session keyring (`keyctl link @u
    /// @s`) with the real uid the user's and the effective uid 0, which holds it as a
    /// possessor only, and the kernel finds the user keyring for it by a search
    /// (measured: without "search" the link fails with ENOKEY, without "link" with
    /// EACCES). Without both, every later login's session would lose the user keyring
    /// until reboot, and with it what `request_key` and `keyctl search @s` find there.
    /// Neither lets another uid look inside: a search descends only into keys that
    /// grant the searcher "search" too, and kc's own keys grant possessors nothing.
    func serialForWriting() throws(KeychainError) -> KeySerial {
        if self == .persistent { return try serial() }
        let anchor = self == .session ? SpecialKeyring.session.serial : try Anchor.user.serial()
        let info: KeyDescription
        do throws(KeyctlError) {
            // For the session keyring the describe is the lookup: like
            // `keyctl_get_keyring_ID` without create, a lookup of `@s` by a process that
            // has none installs the uid's default session keyring, which later calls then
            // name; only a call that adds or moves into `@s` would make a new one.
            if self != .session { try anchor.link(into: SpecialKeyring.thread.serial) }
            info = try anchor.describe()
            // Only the caller's own anchor is repaired (another uid's is refused below).
            // (A user keyring an older kc left without "link" gets it back.)
            let possessor = info.permissions.possessorRights
            let kept: KeyPermissions.Rights = self == .user ? [.search, .link] : []
            if info.uid == geteuid(), possessor != kept {
                let rights = info.permissions.userRights.union(possessor)
                let others = KeyPermissions(rawValue: info.permissions.rawValue & 0x0000_ffff)
                try anchor.setPermissions(KeyPermissions.possessor(kept).union(.user(rights)).union(others))
            }
        } catch {
            throw KeychainError(error)
        }
        guard info.uid == geteuid() else { throw .sessionOfAnotherUser(uid: info.uid) }
        return anchor
    }
}

extension Anchor {
    /// `first`, then the other anchors: the session anchor is searched last only when
    /// another level is the likely home.
    static func probeOrder(startingWith first: Anchor) -> [Anchor] {
        [first] + allCases.filter { $0 != first }
    }
}

extension Vault {
    /// Gives the user keyring back the possessor rights pam_keyinit needs ("search" and
    /// "link", see ``Anchor/serialForWriting()``) where a kc before issue 36 took them all:
    /// every login's session lost the user keyring until reboot, and a vault already
    /// unlocked never writes to the user keyring again to fix it. Only a user keyring
    /// of the caller's whose possessors have nothing left is changed; PAM's steps call it
    /// before anything else.
    public static func keepUserKeyringLinkable() {
        guard let anchor = try? Anchor.user.serial(), let info = try? anchor.describe(),
              info.uid == geteuid(), info.permissions.possessorRights.isEmpty
        else { return }
        let mask = KeyPermissions.possessor([.search, .link]).union(KeyPermissions(rawValue: info.permissions.rawValue & 0x00ff_ffff))
        _ = try? anchor.setPermissions(mask)
    }
}

extension Vault {
    /// Moves the login session keyring's possessor rights to its owner, as every store
    /// into it does (``Anchor/serialForWriting()``), even when the session gets no item:
    /// another uid that shares the session (`su` without pam_keyinit) then cannot list
    /// it, nor find through it the user keyring pam_keyinit linked there. The PAM
    /// session step calls it. Nothing happens for a session keyring of another uid's.
    public static func keepSessionKeyringTheUsers() {
        _ = try? Anchor.session.serialForWriting()
    }
}
