import KeyringCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A Unix group that a service is shared with: its members may read the service's
/// items (and, if the owner allows it, change them) even though they sit under the
/// owner's keyrings. The kernel checks a key's group permission against the caller's
/// effective and supplementary gids.
public struct AccessGroup: Hashable, Sendable, CustomStringConvertible {
    public let name: String
    public let gid: UInt32

    /// The group called `name`, or numbered `name` (from the system's group database:
    /// /etc/group, or LDAP and the like through NSS in dynamically linked programs).
    ///
    /// - Throws: ``KeychainError/unknownGroup(_:)`` if there is none.
    public init(named name: String) throws(KeychainError) {
        guard let gid = Accounts.gid(ofGroup: name) else { throw .unknownGroup(name) }
        self.name = name
        self.gid = gid
    }

    /// The group with this gid; its name is the number if the database has none.
    public init(gid: UInt32) {
        self.gid = gid
        self.name = Accounts.name(ofGroup: gid) ?? String(gid)
    }

    public var description: String { name }

    /// Whether this process carries the group (as its effective gid or a supplementary
    /// one), which is what the kernel checks.
    public var includesCaller: Bool {
        CallerGroups.include(gid)
    }

    /// Throws unless this process carries the group.
    ///
    /// - Throws: ``KeychainError/notInGroup(_:addedSinceLogin:)``, noting when the group
    ///   database lists the user but this login began before they were added.
    public func requireCaller() throws(KeychainError) {
        guard !includesCaller else { return }
        let listed = Accounts.name(ofUser: geteuid()).map { Accounts.members(ofGroup: name).contains($0) } ?? false
        throw .notInGroup(self, addedSinceLogin: listed)
    }
}

/// Lookups in the user and group databases. A dynamically linked program asks the C
/// library (NSS: files, LDAP, sssd, systemd...). The static `kc` cannot: static glibc
/// loads NSS modules built for the shared C library, and `libnss_systemd` crashes it
/// (measured: a lookup of a missing group segfaulted). It reads /etc/passwd and
/// /etc/group instead, and takes numeric ids for accounts that live elsewhere.
internal enum Accounts {
    /// Whether the process has a dynamic loader: the kernel passes its base address in
    /// the auxiliary vector (AT_BASE, 7), zero for a static executable.
    private static let canUseNSS: Bool = {
        guard let auxv = readProcBytes("/proc/self/auxv") else { return false }
        let words = stride(from: 0, to: auxv.count - 7, by: 8).map { offset in
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(auxv[offset + $1]) << (8 * UInt64($1)) }  // little-endian
        }
        for index in stride(from: 0, to: words.count - 1, by: 2) where words[index] == 7 {
            return words[index + 1] != 0
        }
        return false
    }()

    static func gid(ofGroup name: String) -> UInt32? {
        if !canUseNSS { return LocalDatabase.groups().first { $0.name == name }?.gid ?? UInt32(name) }
        return withGroup { entry, buffer, size, result in getgrnam_r(name, entry, buffer, size, result) }.map { $0.gid } ?? UInt32(name)
    }

    static func name(ofGroup gid: UInt32) -> String? {
        if !canUseNSS { return LocalDatabase.groups().first { $0.gid == gid }?.name }
        return withGroup { entry, buffer, size, result in getgrgid_r(gid, entry, buffer, size, result) }.map { $0.name }
    }

    static func members(ofGroup name: String) -> [String] {
        if !canUseNSS { return LocalDatabase.groups().first { $0.name == name }?.members ?? [] }
        return withGroup { entry, buffer, size, result in getgrnam_r(name, entry, buffer, size, result) }?.members ?? []
    }

    static func uid(ofUser name: String) -> UInt32? {
        if !canUseNSS { return LocalDatabase.users().first { $0.name == name }?.uid }
        return withUser { entry, buffer, size, result in getpwnam_r(name, entry, buffer, size, result) }?.uid
    }

    static func name(ofUser uid: UInt32) -> String? {
        if !canUseNSS { return LocalDatabase.users().first { $0.uid == uid }?.name }
        return withUser { entry, buffer, size, result in getpwuid_r(uid, entry, buffer, size, result) }?.name
    }

    /// A user's account: its ids and home folder (for the vault, which PAM runs without
    /// HOME, and for dropping from root to the user).
    static func account(ofUser uid: UInt32) -> UserAccount? {
        if !canUseNSS { return LocalDatabase.users().first { $0.uid == uid } }
        return withUser { entry, buffer, size, result in getpwuid_r(uid, entry, buffer, size, result) }
    }

    static func account(named name: String) -> UserAccount? {
        if !canUseNSS { return LocalDatabase.users().first { $0.name == name } }
        return withUser { entry, buffer, size, result in getpwnam_r(name, entry, buffer, size, result) }
    }

    static func home(ofUser uid: UInt32) -> String? { account(ofUser: uid)?.home }

    /// A user named by name or, failing that, by number.
    static func uid(ofUserNameOrNumber text: String) -> UInt32? {
        uid(ofUser: text) ?? UInt32(text)
    }

    /// Every group `name` is in: its primary group `gid` and each group that lists it,
    /// as login gives them (`getgrouplist`, which a static kc must not call: NSS would
    /// load its modules into a program with no loader).
    static func groups(ofUser name: String, primary gid: UInt32) -> [gid_t] {
        if !canUseNSS {
            return [gid] + LocalDatabase.groups().filter { $0.gid != gid && $0.members.contains(name) }.map(\.gid)
        }
        var count: Int32 = 64
        while true {
            var groups = [gid_t](repeating: 0, count: Int(count))
            var found = count
            if getgrouplist(name, gid, &groups, &found) >= 0 { return Array(groups.prefix(Int(found))) }
            guard found > count else { return [gid] }
            count = found
        }
    }

    static func supplementaryGroups() -> [UInt32] { CallerGroups.supplementary() }

    private typealias GroupCall = (
        UnsafeMutablePointer<group>, UnsafeMutablePointer<CChar>, Int, UnsafeMutablePointer<UnsafeMutablePointer<group>?>
    ) -> Int32

    private typealias UserCall = (
        UnsafeMutablePointer<passwd>, UnsafeMutablePointer<CChar>, Int, UnsafeMutablePointer<UnsafeMutablePointer<passwd>?>
    ) -> Int32

    /// Runs a `getgr*_r` call, growing the buffer on ERANGE.
    private static func withGroup(_ call: GroupCall) -> (gid: UInt32, name: String, members: [String])? {
        var size = 1024
        while size <= 1 << 20 {
            var entry = group()
            var result: UnsafeMutablePointer<group>? = nil
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let status = call(&entry, buffer, size, &result)
            if status == ERANGE { size *= 4; continue }
            guard status == 0, let found = result?.pointee else { return nil }
            var members: [String] = []
            if var cursor = found.gr_mem {
                while let member = cursor.pointee {
                    members.append(String(cString: member))
                    cursor += 1
                }
            }
            return (found.gr_gid, String(cString: found.gr_name), members)
        }
        return nil
    }

    /// Runs a `getpw*_r` call, growing the buffer on ERANGE.
    private static func withUser(_ call: UserCall) -> UserAccount? {
        var size = 1024
        while size <= 1 << 20 {
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>? = nil
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let status = call(&entry, buffer, size, &result)
            if status == ERANGE { size *= 4; continue }
            guard status == 0, let found = result?.pointee else { return nil }
            return UserAccount(name: String(cString: found.pw_name), uid: found.pw_uid, gid: found.pw_gid,
                               home: String(cString: found.pw_dir))
        }
        return nil
    }
}

/// One entry of the user database.
internal struct UserAccount: Sendable, Hashable {
    var name: String
    var uid: UInt32
    var gid: UInt32
    var home: String
}

/// /etc/passwd and /etc/group, read directly (for the static `kc`), record by record as
/// the core's ``AccountFiles`` reads them (the front resolves names with it too).
internal enum LocalDatabase {
    static func users() -> [UserAccount] {
        records("/etc/passwd") { text, fields in
            guard fields.count >= 6, let uid = AccountFiles.id(text[fields[2]]), let gid = AccountFiles.id(text[fields[3]])
            else { return nil }
            return UserAccount(name: string(text, fields[0]), uid: uid, gid: gid, home: string(text, fields[5]))
        }
    }

    static func groups() -> [(name: String, gid: UInt32, members: [String])] {
        records("/etc/group") { text, fields in
            guard fields.count >= 3, let gid = AccountFiles.id(text[fields[2]]) else { return nil }
            let members = fields.count > 3 ? string(text, fields[3]).split(separator: ",").map(String.init) : []
            return (string(text, fields[0]), gid, members)
        }
    }

    /// What `record` makes of each record of the file.
    private static func records<Record>(_ path: String,
                                        _ record: (UnsafeRawBufferPointer, [Range<Int>]) -> Record?) -> [Record] {
        guard let bytes = readProcBytes(path) else { return [] }
        var records: [Record] = []
        bytes.withUnsafeBytes { text in
            AccountFiles.forEachRecord(in: text) { fields in
                if let made = record(text, fields) { records.append(made) }
                return true
            }
        }
        return records
    }

    private static func string(_ text: UnsafeRawBufferPointer, _ field: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: text[field]), as: UTF8.self)
    }
}
