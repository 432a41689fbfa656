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
/// kc's PAM module, pam_kc.so, looks the user up in the system's name service (LDAP,
/// SSSD and extrausers users too, which the static kc cannot reach: it reads /etc/passwd
/// only) and gives the ids, groups and home in the environment (`KC_PAM_UID`,
/// `KC_PAM_GID`, `KC_PAM_GROUPS`, `HOME`). It starts kc as root, not as the user: kc
/// reads the password first and switches after, and a process that changed its uid from
/// root cannot be traced by the user's other processes, while one started as the user
/// could be, password and all. pam_exec gives none of these: kc then looks the user up
/// in /etc/passwd.
public enum PAMUser {
    /// Becomes `name`. With `newSession`, also joins a new anonymous session keyring:
    /// in PAM's auth step the login's session keyring does not exist yet, and the one
    /// the process has is root's.
    public static func become(_ name: String, newSession: Bool) throws(KeychainError) {
        if let given = try givenAccount(name) {
            try become(given.account, named: name, groups: given.groups)
            setenv("HOME", given.account.home, 1)
        } else {
            guard let account = Accounts.account(named: name) else {
                if geteuid() == 0 {
                    throw .cannotSwitchUser(user: name, reason: "no user by that name in /etc/passwd, the only user database kc itself reads; kc's PAM module (pam_kc.so) looks users up in every name service (LDAP, SSSD), so use it rather than pam_exec")
                }
                throw .unknownUser(name)
            }
            try become(account, named: name, groups: nil)
            setenv("HOME", account.home, 1)
        }
        unsetenv("XDG_DATA_HOME")
        if newSession {
            do { try KeySerial.joinSessionKeyring() } catch { throw KeychainError(error) }
        }
    }

    /// The account pam_kc gave, if it gave one: ids, groups and an absolute home.
    private static func givenAccount(_ name: String) throws(KeychainError) -> (account: UserAccount, groups: [gid_t])? {
        guard let uidText = getenv("KC_PAM_UID").map({ String(cString: $0) }) else { return nil }
        guard let uid = UInt32(uidText), let gid = getenv("KC_PAM_GID").map({ String(cString: $0) }).flatMap(UInt32.init),
              let home = getenv("HOME").map({ String(cString: $0) }), home.hasPrefix("/")
        else { throw .cannotSwitchUser(user: name, reason: "KC_PAM_UID, KC_PAM_GID and HOME must be numbers and an absolute path") }
        var groups: [gid_t] = []
        for text in (getenv("KC_PAM_GROUPS").map { String(cString: $0) } ?? "").split(separator: ",") {
            guard let group = gid_t(text) else { throw .cannotSwitchUser(user: name, reason: "KC_PAM_GROUPS must be group ids separated by commas") }
            groups.append(group)
        }
        return (UserAccount(name: name, uid: uid, gid: gid, home: home), groups.isEmpty ? [gid] : groups)
    }

    private static func become(_ account: UserAccount, named name: String, groups given: [gid_t]?) throws(KeychainError) {
        guard getuid() != account.uid || geteuid() != account.uid else { return }
        guard geteuid() == 0 else {
            throw .cannotSwitchUser(user: name, reason: "kc runs as uid \(geteuid()), not root; PAM runs it as root for a login")
        }
        // Every group of the user, as login gives them: a shared service's items load
        // only for its group's members. As root, setgid and setuid set the real,
        // effective and saved ids alike.
        var groups = given ?? Accounts.groups(ofUser: name, primary: account.gid)
        guard setgroups(groups.count, &groups) == 0, setgid(account.gid) == 0, setuid(account.uid) == 0 else {
            throw .cannotSwitchUser(user: name, reason: String(cString: strerror(errno)))
        }
        guard getuid() == account.uid, geteuid() == account.uid, getgid() == account.gid else {
            throw .cannotSwitchUser(user: name, reason: "the ids did not change")
        }
    }
}
