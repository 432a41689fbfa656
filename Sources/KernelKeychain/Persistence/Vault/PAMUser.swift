import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `kc unlock --pam` does first: it must run as the user completely (groups, gid,
/// uid, real and effective) before it touches a key or a file, with HOME at the user's
/// home. Keys root adds are root's, charged to root's quota, even in the user's keyring.
///
/// kc's PAM module, pam_kc.so, does that before kc starts: it looks the user up in the
/// system's name service (LDAP, SSSD and extrausers users too, which the static kc
/// cannot reach: it reads /etc/passwd only) and gives HOME. pam_exec runs kc as the PAM
/// application's uid (root for login, sshd, gdm) without HOME: kc then looks the user up
/// and switches itself.
public enum PAMUser {
    /// Becomes `name`. With `newSession`, also joins a new anonymous session keyring:
    /// in PAM's auth step the login's session keyring does not exist yet, and the one
    /// the process has is root's.
    public static func become(_ name: String, newSession: Bool) throws(KeychainError) {
        if let home = homeGivenToTheUser(name) {
            setenv("HOME", home, 1)
        } else {
            guard let account = Accounts.account(named: name) else {
                if geteuid() == 0 {
                    throw .cannotSwitchUser(user: name, reason: "no user by that name in /etc/passwd, the only user database kc itself reads; kc's PAM module (pam_kc.so) looks users up in every name service (LDAP, SSSD), so use it rather than pam_exec")
                }
                throw .unknownUser(name)
            }
            try become(account, named: name)
            setenv("HOME", account.home, 1)
        }
        unsetenv("XDG_DATA_HOME")
        if newSession {
            do { try KeySerial.joinSessionKeyring() } catch { throw KeychainError(error) }
        }
    }

    /// The home pam_kc gave: kc is the user already (not root, or the root user itself),
    /// and HOME is an absolute path. A user who runs `kc unlock --pam` by hand with a
    /// HOME of their choosing reaches nothing they could not reach anyway. When the
    /// user database kc can read names the user, it must be this uid.
    private static func homeGivenToTheUser(_ name: String) -> String? {
        guard getuid() == geteuid(), getgid() == getegid(), let home = getenv("HOME").map({ String(cString: $0) }),
              home.hasPrefix("/") else { return nil }
        if let uid = Accounts.uid(ofUser: name) { return uid == getuid() ? home : nil }
        return getuid() == 0 ? nil : home
    }

    private static func become(_ account: UserAccount, named name: String) throws(KeychainError) {
        guard getuid() != account.uid || geteuid() != account.uid else { return }
        guard geteuid() == 0 else {
            throw .cannotSwitchUser(user: name, reason: "kc runs as uid \(geteuid()), not root; PAM runs it as root for a login")
        }
        // Every group of the user, as login gives them: a shared service's items load
        // only for its group's members. As root, setgid and setuid set the real,
        // effective and saved ids alike.
        var groups = Accounts.groups(ofUser: name, primary: account.gid)
        guard setgroups(groups.count, &groups) == 0, setgid(account.gid) == 0, setuid(account.uid) == 0 else {
            throw .cannotSwitchUser(user: name, reason: String(cString: strerror(errno)))
        }
        guard getuid() == account.uid, geteuid() == account.uid, getgid() == account.gid else {
            throw .cannotSwitchUser(user: name, reason: "the ids did not change")
        }
    }
}
