import Keyrings
import KeyringCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// kc running inside a user namespace: rootless podman runs its secret driver there,
/// and `podman unshare` runs any command there, as uid 0 mapped to the user's own uid.
///
/// The kernel keeps one user keyring and one persistent keyring per uid *per user
/// namespace*: `@u` inside rootless podman's namespace is `_uid.0`, a keyring of that
/// namespace that nothing outside sees and that dies with it. An item stored there is
/// not in the user's keychain. The keys themselves belong to the kernel uid, which is
/// the user's own, so the user's real keyrings stay usable by serial from inside: kc
/// finds the user keyring of the outside uid in /proc/keys (which lists every key the
/// caller may view) and anchors there instead. The session keyring is inherited by
/// processes, not looked up by uid, so it needs nothing.
///
/// The persistent keyring grants its owner only view and read unless possessed, and
/// the kernel hands it out (`keyctl_get_persistent`) only for the caller's own
/// namespace, so from inside, the outside one can be neither searched nor written:
/// `always` items are out of reach there, and kc says so rather than storing them in
/// the namespace's keyring.
///
/// One level of nesting is handled (rootless podman, `unshare -U`): the outside uid is
/// the one in the parent namespace's map.
internal enum UserNamespace {
    /// The uid outside the namespace, or nil in the initial namespace. One `stat`;
    /// the map is read only inside a namespace.
    static let outsideUID: UInt32? = {
        guard InitialUserNamespace.contains == false else { return nil }
        guard let map = readProcFile("/proc/self/uid_map") else { return nil }
        return outsideUID(of: geteuid(), map: map)
    }()

    /// Whether this is a user namespace that does not map the caller's uid: there the
    /// kernel shows every unmapped owner, the caller's own outside and any other user's,
    /// as the overflow uid, which is also the caller's uid inside, so an owner check
    /// passes for any key (found by a hostile review: another uid's keyring planted in a
    /// shared session was read and written as the caller's). kc uses no keyring there.
    static let isUnmapped: Bool = {
        guard InitialUserNamespace.contains == false,
              let map = readProcFile("/proc/self/uid_map") else { return false }
        return outsideUID(of: geteuid(), map: map) == nil
    }()

    /// Maps `uid` through a `uid_map` text (`inside outside count` per line).
    static func outsideUID(of uid: UInt32, map: String) -> UInt32? {
        for line in map.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 3, let inside = UInt32(fields[0]), let outside = UInt32(fields[1]),
                  let count = UInt32(fields[2]) else { continue }
            if uid >= inside, uid - inside < count { return outside &+ (uid - inside) }
        }
        return nil
    }

    /// The outside user keyring, as a serial usable from inside, or nil in the initial
    /// namespace (where `@u` is right). Looked up once per process.
    static func outsideUserKeyring() throws(KeychainError) -> KeySerial? {
        try outsideUserKeyringLookup?.get()
    }

    /// Among the keyrings described `_uid.N` (N the outside uid) that the caller owns,
    /// the namespace's own `@u` is left out (with an identity map it has the same
    /// description). It must exist: every login and every earlier kc run outside made it.
    private static let outsideUserKeyringLookup: Result<KeySerial, KeychainError>? = {
        guard let uid = outsideUID else { return nil }
        let description = "_uid.\(uid)"
        let own = try? SpecialKeyring.user.serial.resolved(create: false)
        for entry in ProcKeysEntry.parse(readProcFile("/proc/keys") ?? "")
        where entry.type == "keyring" && entry.descriptionPrefix == description && entry.uid == geteuid() && entry.serial != own {
            guard let info = try? entry.serial.describe(), info.type == "keyring",
                  info.description == KeyName(description), info.uid == geteuid() else { continue }
            return .success(entry.serial)
        }
        return .failure(.unreachableFromUserNamespace(level: .afterFirstUnlock, outsideUID: uid))
    }()
}
