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

    /// The group called `name` (from the system's group database: /etc/group, or LDAP
    /// and the like through NSS).
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
        getegid() == gid || Accounts.supplementaryGroups().contains(gid)
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

/// Lookups in the user and group databases through the C library's reentrant calls.
internal enum Accounts {
    static func gid(ofGroup name: String) -> UInt32? {
        withGroup { entry, buffer, size, result in getgrnam_r(name, entry, buffer, size, result) }.map { $0.gid }
    }

    static func name(ofGroup gid: UInt32) -> String? {
        withGroup { entry, buffer, size, result in getgrgid_r(gid, entry, buffer, size, result) }.map { $0.name }
    }

    static func members(ofGroup name: String) -> [String] {
        withGroup { entry, buffer, size, result in getgrnam_r(name, entry, buffer, size, result) }?.members ?? []
    }

    static func uid(ofUser name: String) -> UInt32? {
        withUser { entry, buffer, size, result in getpwnam_r(name, entry, buffer, size, result) }?.uid
    }

    static func name(ofUser uid: UInt32) -> String? {
        withUser { entry, buffer, size, result in getpwuid_r(uid, entry, buffer, size, result) }?.name
    }

    /// A user named by name or, failing that, by number.
    static func uid(ofUserNameOrNumber text: String) -> UInt32? {
        uid(ofUser: text) ?? UInt32(text)
    }

    static func supplementaryGroups() -> [UInt32] {
        let count = getgroups(0, nil)
        guard count > 0 else { return [] }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = getgroups(count, &groups)
        return filled > 0 ? Array(groups.prefix(Int(filled))) : []
    }

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
    private static func withUser(_ call: UserCall) -> (uid: UInt32, name: String)? {
        var size = 1024
        while size <= 1 << 20 {
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>? = nil
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let status = call(&entry, buffer, size, &result)
            if status == ERANGE { size *= 4; continue }
            guard status == 0, let found = result?.pointee else { return nil }
            return (found.pw_uid, String(cString: found.pw_name))
        }
        return nil
    }
}
