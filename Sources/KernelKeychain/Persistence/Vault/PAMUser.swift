import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `kc unlock --pam` does first: pam_exec runs it as the PAM application's uid
/// (root for login, sshd, gdm) and never switches to the user. Keys root adds are
/// root's, charged to root's quota, even in the user's keyring; so kc becomes the
/// user completely (groups, gid, uid, real and effective) before it touches a key or
/// a file, and points HOME at the user's home (PAM gives no HOME or PATH).
public enum PAMUser {
    /// Becomes `name`. With `newSession`, also joins a new anonymous session keyring:
    /// in PAM's auth step the login's session keyring does not exist yet, and the one
    /// the process has is root's.
    public static func become(_ name: String, newSession: Bool) throws(KeychainError) {
        guard let account = Accounts.account(named: name) else { throw .unknownUser(name) }
        if getuid() != account.uid || geteuid() != account.uid {
            guard geteuid() == 0 else {
                throw .cannotSwitchUser(user: name, reason: "kc runs as uid \(geteuid()), not root; PAM runs it as root for a login")
            }
            // Every group of the user, as login gives them: a shared service's items load
            // only for its group's members. As root, setgid and setuid set the real,
            // effective and saved ids alike.
            var groups = Accounts.groups(ofUser: name, primary: account.gid)
            guard setgroups(groups.count, &groups) == 0, setgid(account.gid) == 0, setuid(account.uid) == 0
            else {
                throw .cannotSwitchUser(user: name, reason: String(cString: strerror(errno)))
            }
            guard getuid() == account.uid, geteuid() == account.uid, getgid() == account.gid else {
                throw .cannotSwitchUser(user: name, reason: "the ids did not change")
            }
        }
        setenv("HOME", account.home, 1)
        unsetenv("XDG_DATA_HOME")
        if newSession {
            do { try KeySerial.joinSessionKeyring() } catch { throw KeychainError(error) }
        }
    }
}
