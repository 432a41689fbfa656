public import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a keychain operation failed, and what to do about it. A missing item is not an
/// error: reads return nil.
///
/// Every case that comes from the kernel carries the ``KeyctlError`` underneath, which
/// names the failing libkeyutils call and its errno.
public enum KeychainError: Error, Sendable, Equatable, CustomStringConvertible {
    // MARK: Input: what the caller asked for cannot be done as asked; nothing reached the kernel

    /// The service or item name breaks the naming rules; nothing was sent to the kernel.
    case invalidName(kind: NameKind, problem: NameProblem)
    /// An empty value refused. kc no longer throws it: an empty value is held as
    /// ``ItemValue`` says. Kept so that code matching it still compiles.
    case emptyValue
    /// The value is larger than a `user` key can hold (32767 bytes).
    case valueTooLarge(size: Int)
    /// A timeout of zero, or longer than the kernel can express.
    case invalidTimeout(String)
    /// The stored bytes are not what the caller asked to decode them as.
    case decodingFailed(item: String, reason: String)
    /// A write or removal through ``Keychain/anyService``, which names no service.
    case serviceRequired
    /// No Unix group has this name.
    case unknownGroup(String)
    /// No user has this name (or number).
    case unknownUser(String)

    // MARK: Kernel: the keyrings refused or cannot be reached

    /// The kernel refused: the key belongs to another uid, lacks a permission, or the
    /// keyring is not possessed.
    case accessDenied(KeyctlError)
    /// The uid's key quota is full (`kernel.keys.maxkeys` / `maxbytes`).
    case quotaExceeded(KeyctlError, usage: KeyQuota?)
    /// A task that stores many keys (an import) was checked against the quota first
    /// and would not fit: `keys` and `bytes` are what it needs. Nothing was stored.
    case notEnoughQuota(what: String, keys: Int, bytes: Int, usage: KeyQuota)
    /// Keyring system calls are not available: blocked by seccomp (most containers) or
    /// not built into the kernel, or the persistent keyring is not supported.
    case keyringsUnavailable(KeyctlError)
    /// Any other kernel failure.
    case kernel(KeyctlError)
    /// The session keyring belongs to another uid (after `su`, `sudo` or `runuser`
    /// without a new session): what kc stored there would be that uid's to remove.
    case sessionOfAnotherUser(uid: UInt32)
    /// A keyring the caller may not even look at holds the name kc gives the service's
    /// keyring at `level` (another uid that shares the caller's session, after su or
    /// runuser, can link one into the session keyring), so the kernel refuses kc's own
    /// there. kc cannot tell whose it is, and does not remove what it cannot see.
    case serviceKeyringNameTaken(service: String, level: Accessibility.Level)
    /// kc runs inside a user namespace (rootless podman's secret driver, `podman
    /// unshare`), where the level's keyring of the user outside (uid `outsideUID`)
    /// cannot be reached; kc does not fall back to the namespace's own keyring, which
    /// nothing outside sees.
    case unreachableFromUserNamespace(level: Accessibility.Level, outsideUID: UInt32)
    /// kc runs inside a user namespace whose uid map does not hold the caller's uid
    /// (`unshare -U` without a map): every key's owner shows there as the overflow uid,
    /// so kc cannot tell the caller's keyrings from another user's, and uses none.
    case unmappedUserNamespace
    /// The caller has no service of this name at any accessibility.
    case noSuchService(String)
    /// A rename's target exists: an item (`name`), or a service with items (`name` nil).
    case alreadyExists(service: String, name: String?)
    /// The whole set of a service's items cannot be replaced at once while the service
    /// is shared with a group (``Keychain/replaceAllItems(with:until:)``).
    case sharedServiceCannotBeReplaced(service: String)

    // MARK: Sharing: another user's service, or a group's

    /// This process does not carry the group. `addedSinceLogin`: the group database
    /// lists the user, but this login session began before that.
    case notInGroup(AccessGroup, addedSinceLogin: Bool)
    /// Nobody (or not that owner, or not through that group) shares the service with
    /// the caller that the caller can see.
    case notShared(service: String, group: String?, owner: String?)
    /// More than one user shares a service of this name with the caller.
    case sharedByMany(service: String, owners: [String])
    /// The shared service was found, but its keyring died before it could be used.
    case sharedServiceGone(SharedService)
    /// A member tried to change a service shared read-only.
    case sharedReadOnly(SharedService)
    /// Something only the service's owner may do.
    case ownerOnly(SharedService, action: String)
    /// A member's write into a group-writable service that kc refuses: see
    /// ``MemberWriteLimit``.
    case memberWriteRefused(SharedService, item: String, MemberWriteLimit)
    /// The service is already shared with another group.
    case sharedWithAnotherGroup(service: String, current: AccessGroup, requested: AccessGroup)

    // MARK: Vault: the encrypted copy on disk (see ``Vault``)

    /// The item is not in the kernel but the vault holds it, and the vault is locked.
    case vaultLocked(service: String, item: String)
    /// A change of level, deadline or name of an item members of a group-writable share
    /// may write, while the vault is locked: the vault saves only the owner's value,
    /// which it must open to carry over.
    case vaultLockedForMembersItem(service: String, item: String)
    /// The item is not in the kernel and the vault holds it at `when-unlocked`, which
    /// comes back only in a login session that unlocked (PAM's session step, or
    /// `kc unlock` in that session): not in cron, a service, or a shell outside the login.
    case vaultKeepsForLoginSessions(service: String, item: String)
    /// No vault here: `kc vault init` makes one.
    case vaultNotInitialized(path: String)
    /// `kc vault init` where a vault exists.
    case vaultAlreadyExists(path: String)
    /// The passphrase does not open the vault's identity. Nothing was loaded or changed.
    case wrongPassphrase(path: String)
    /// An empty passphrase.
    case weakPassphrase
    /// A scrypt work factor outside 10...22.
    case invalidWorkFactor(Int)
    /// A vault file or folder that kc will not use: another uid's, open to others, a link.
    case vaultUnsafe(path: String, problem: String, fix: String)
    /// A file of the vault could not be read or written (`reason`: the errno's text).
    case vaultIOFailed(path: String, action: String, reason: String)
    /// The vault's disk has no room for a write's file (no space, no inode left, or the
    /// disk quota is full; `reason` says which). Nothing was changed in the kernel.
    case vaultFull(path: String, reason: String)
    /// The vault is unlocked for `path` (its key is in the user keyring) but the folder
    /// there is not the vault: it is gone (`problem` says what is there instead). A write
    /// then changes nothing, rather than change the kernel and save nowhere.
    case vaultMissing(path: String, problem: String)
    /// The kernel holds a write's new value, but putting its vault file in place failed
    /// afterwards (`reason`: the errno's text): until it is saved, a reboot brings back
    /// the old value.
    case vaultNotSaved(path: String, reason: String)
    /// A vault file that is not a well-formed age file for this vault.
    case vaultCrypto(path: String, String)
    /// A device-only item cannot be encrypted yet: the vault was copied here from
    /// another machine and not unlocked on this one.
    case vaultNotUnlockedOnThisMachine(path: String)
    /// `kc unlock --pam` could not become the PAM user.
    case cannotSwitchUser(user: String, reason: String)
    /// What an error is about, for whoever turns errors into something else (an exit
    /// status, an errno): each case belongs to one.
    public enum Concern: Sendable, Hashable {
        /// The request itself: a name, a value, a timeout, a user or group that does not exist.
        case input
        /// The keyrings: permissions, quota, availability.
        case kernel
        /// Another user's service, or a group's.
        case sharing
        /// The vault's files and keys.
        case vault
    }

    /// The concern this error belongs to.
    public var concern: Concern {
        switch self {
        case .invalidName, .emptyValue, .valueTooLarge, .invalidTimeout, .decodingFailed, .serviceRequired, .unknownGroup, .unknownUser:
            .input
        case .accessDenied, .quotaExceeded, .notEnoughQuota, .keyringsUnavailable, .kernel, .sessionOfAnotherUser, .serviceKeyringNameTaken, .unreachableFromUserNamespace, .unmappedUserNamespace, .noSuchService, .alreadyExists, .sharedServiceCannotBeReplaced:
            .kernel
        case .notInGroup, .notShared, .sharedByMany, .sharedServiceGone, .sharedReadOnly, .ownerOnly, .memberWriteRefused, .sharedWithAnotherGroup:
            .sharing
        case .vaultLocked, .vaultLockedForMembersItem, .vaultKeepsForLoginSessions, .vaultNotInitialized, .vaultAlreadyExists, .wrongPassphrase, .weakPassphrase, .invalidWorkFactor, .vaultUnsafe, .vaultIOFailed, .vaultFull, .vaultMissing, .vaultNotSaved, .vaultCrypto, .vaultNotUnlockedOnThisMachine, .cannotSwitchUser:
            .vault
        }
    }

    /// The biggest value a `user` key accepts.
    public static let maximumValueSize = 32767

    /// The kernel call underneath, where there is one.
    public var underlying: KeyctlError? {
        switch self {
        case .accessDenied(let error), .quotaExceeded(let error, _), .keyringsUnavailable(let error), .kernel(let error):
            error
        default:
            nil
        }
    }

    /// One line: the cause, then what to do.
    public var description: String {
        switch self {
        case .invalidName(let kind, let problem):
            return "invalid \(kind.rawValue) name: it \(problem); use 1-255 bytes without '/' or NUL, not '.' or '..'"
        case .emptyValue:
            return "empty value: kernel keys cannot be empty; store at least one byte, or remove the item instead"
        case .valueTooLarge(let size):
            return "value too large: \(size) bytes, the kernel's limit for a key is \(Self.maximumValueSize) bytes; store a smaller value (or a path to a file)"
        case .invalidTimeout(let text):
            return "invalid timeout '\(text)': use a positive duration such as 90s, 15m, 2h, 7d or 1h30m (at most 136 years)"
        case .accessDenied(let error):
            return "permission denied (\(error)): the key belongs to another user or lacks a permission; check it with 'keyctl describe', or run as its owner"
        case .quotaExceeded(let error, let usage):
            var text = "key quota exceeded (\(error))"
            if let usage { text += ": uid \(usage.uid)\(Accounts.name(ofUser: usage.uid).map { " (\($0))" } ?? "") uses \(usage.keys)/\(usage.maxKeys) keys and \(usage.bytes)/\(usage.maxBytes) bytes" }
            let raise = (usage ?? KeyQuota(uid: geteuid(), keys: 0, maxKeys: 200, bytes: 0, maxBytes: 20000)).raiseCommand()
            return text + "; remove unused items, or raise the limits: \(raise)"
        case .notEnoughQuota(let what, let keys, let bytes, let usage):
            return "not enough key quota for \(what): it needs \(keys) keys and \(bytes) bytes, and uid \(usage.uid) has \(usage.freeKeys) keys and \(usage.freeBytes) bytes free (uses \(usage.keys)/\(usage.maxKeys) keys, \(usage.bytes)/\(usage.maxBytes) bytes); remove unused items, or raise the limits: \(usage.raiseCommand(forMoreKeys: keys, bytes: bytes))"
        case .keyringsUnavailable(let error):
            if error.call == "keyctl_get_persistent" {
                return "persistent keyrings unavailable (\(error)): the kernel lacks CONFIG_PERSISTENT_KEYRINGS; use --access after-first-unlock instead"
            }
            return "kernel keyrings unavailable (\(error)): keyring system calls are blocked (a container's seccomp profile) or not built in; run kc on the host and pass secrets in with 'kc exec' or a mount"
        case .decodingFailed(let item, let reason):
            return "cannot decode item '\(item)': \(reason)"
        case .serviceRequired:
            return "no service named: the any-service keychain only reads; name a service to write or remove"
        case .kernel(let error):
            return "kernel keyring call failed (\(error)); run 'kc doctor' to check the keyrings"
        case .unknownGroup(let name):
            return "no group named '\(name)' on this system; check the name with 'getent group \(name)', or create it with 'sudo groupadd \(name)'"
        case .notInGroup(let group, let addedSinceLogin):
            if addedSinceLogin {
                return "this login does not carry group '\(group.name)' yet (you were added after it began); log in again, or run 'newgrp \(group.name)'"
            }
            return "you are not in group '\(group.name)'; ask an administrator to run 'sudo usermod -aG \(group.name) \(Accounts.name(ofUser: geteuid()) ?? "USER")', then log in again"
        case .unknownUser(let name):
            return "no user named '\(name)' on this system; check the name with 'getent passwd \(name)'"
        case .noSuchService(let service):
            return "no service '\(service)'; store an item in it first (kc set), or list the services with 'kc ls'"
        case .notShared(let service, let group, let owner):
            var text = "no service '\(service)' is shared with you"
            if let owner { text += " by \(owner)" }
            if let group { text += " through group '\(group)'" }
            return text + ": it was never shared or was unshared, or it lived in its owner's login session (when-unlocked), which has ended; ask the owner to run 'kc share \(service) --group GROUP' on a service stored at after-first-unlock or always"
        case .sharedByMany(let service, let owners):
            return "service '\(service)' is shared with you by several users (\(owners.joined(separator: ", "))); pick one with --from USER"
        case .sharedServiceGone(let shared):
            return "\(shared.ownerName)'s keyring holding '\(shared.service)' is gone: their login session ended (a when-unlocked service lives only as long as it) or they removed it; ask \(shared.ownerName) to store it again at after-first-unlock or always"
        case .sharedReadOnly(let shared):
            return "'\(shared.service)' is shared by \(shared.ownerName) read-only; ask them to run 'kc share \(shared.service) --group \(shared.sharing.group.name) --group-writable'"
        case .ownerOnly(let shared, let action):
            return "only \(shared.ownerName), who owns '\(shared.service)', can \(action); ask them to do it"
        case .memberWriteRefused(let shared, let item, let limit):
            let owner = shared.ownerName
            switch limit {
            case .hasDeadline:
                return "item '\(item)' of \(owner)'s '\(shared.service)' has a deadline, so only \(owner) may change it (the kernel drops a key's deadline when anyone changes its value, and only its owner may set one again); ask \(owner) to store it"
            case .larger(let current, let new):
                return "a member may not make item '\(item)' of \(owner)'s '\(shared.service)' larger than it is (\(current) bytes; this value has \(new)): \(owner)'s key quota pays for it; ask \(owner) to store it, or to store a value at least that large first"
            case .overPage(let new, let page):
                return "a member can write at most \(page) bytes into an item (the kernel's limit for changing a key in place; this value has \(new)); ask \(owner) to store item '\(item)' of '\(shared.service)'"
            case .emptyOrNul:
                return "a member cannot make item '\(item)' of \(owner)'s '\(shared.service)' empty (or one NUL byte): kc holds such a value in a new key, which only \(owner) can make; ask \(owner) to store it"
            }
        case .sessionOfAnotherUser(let uid):
            let owner = Accounts.name(ofUser: uid) ?? String(uid)
            return "this session keyring belongs to \(owner) (you reached it through su, sudo or runuser), who could remove what you store in it; start a session of your own with 'keyctl session', or store at --access after-first-unlock"
        case .serviceKeyringNameTaken(let service, let level):
            let (keyring, spec) = switch level {
            case .whenUnlocked: ("session", "@s")
            case .afterFirstUnlock: ("user", "@u")
            case .always: ("persistent", "$(keyctl get_persistent @s)")
            }
            return "a keyring you may not look at holds the name of service '\(service)' in your \(keyring) keyring (another user who shares this session through su or runuser can link one there), so kc cannot make the service's keyring there; find it with 'keyctl show \(spec)' and unlink it with 'keyctl unlink SERIAL \(spec)', or store at another --access level"
        case .unreachableFromUserNamespace(let level, let uid):
            if level == .always {
                return "the always level cannot be reached from inside a user namespace (rootless podman, podman unshare): the kernel gives uid \(uid)'s persistent keyring only to processes outside it; store this item from outside, or at --access after-first-unlock"
            }
            return "kc runs inside a user namespace (rootless podman, podman unshare) and uid \(uid)'s user keyring outside it does not exist yet; run any kc command outside once (kc ls), then try again"
        case .unmappedUserNamespace:
            return "kc runs inside a user namespace that does not map your uid (unshare -U without a map): every key's owner shows as the overflow uid there, so kc cannot tell your keyrings from another user's; run kc outside it, or in one that maps your uid (unshare -r, podman unshare)"
        case .sharedServiceCannotBeReplaced(let service):
            return "service '\(service)' is shared with a group: its items cannot be replaced as one set; unshare it first ('kc unshare \(service)'), or sync into a service of its own"
        case .alreadyExists(let service, let name):
            if let name { return "item '\(name)' already exists in service '\(service)'; remove it first (kc rm \(service) \(name)) or choose another name" }
            return "service '\(service)' already has items; remove them first (kc rm) or choose another name"
        case .vaultLocked(let service, let item):
            return "no item '\(item)' in service '\(service)' in the kernel: the vault holds it but is locked; run 'kc unlock'"
        case .vaultLockedForMembersItem(let service, let item):
            return "item '\(item)' of '\(service)' is in a group-writable share, so the kernel's value may be a member's, and the vault saves only yours: run 'kc unlock' so kc can carry your saved value over, then try again"
        case .vaultKeepsForLoginSessions(let service, let item):
            return "no item '\(item)' in service '\(service)' in this session: the vault keeps when-unlocked items for login sessions (not cron, services or shells outside a login); run 'kc unlock' to load them here, or store it with --access after-first-unlock"
        case .vaultNotInitialized(let path):
            return "no vault at \(path); create one with 'kc vault init' (or set XDG_DATA_HOME to where yours is)"
        case .vaultAlreadyExists(let path):
            return "a vault already exists at \(path); change its passphrase with 'kc vault passwd', or set XDG_DATA_HOME to make another"
        case .wrongPassphrase(let path):
            return "wrong passphrase for the vault at \(path): nothing was loaded or changed; try again"
        case .weakPassphrase:
            return "empty passphrase: the vault's key is sealed with a passphrase; type it at the prompt, or pass it on standard input or with --passphrase-fd"
        case .invalidWorkFactor(let factor):
            return "invalid work factor \(factor): use 10 to 22 (scrypt N = 2^factor; age 1.1.1 refuses more than 22)"
        case .vaultUnsafe(let path, let problem, let fix):
            return "refusing the vault: \(path) \(problem); \(fix)"
        case .vaultIOFailed(let path, let action, let reason):
            return "cannot \(action) \(path): \(reason); nothing was changed (free space or fix the folder, then try again)"
        case .vaultFull(let path, let reason):
            return "no room on the vault's disk to save this (\(path): \(reason)); nothing was changed: free space there, then try again"
        case .vaultMissing(let path, let problem):
            return "the vault at \(path) is unlocked but \(problem); nothing was changed: put the vault folder back (or mount it), or run 'kc lock' to store without it"
        case .vaultNotSaved(let path, let reason):
            return "the new value is in the kernel, but the vault could not save it (\(path): \(reason)); fix that, then set the item again (or run 'kc unlock') so that it survives a reboot"
        case .vaultCrypto(let path, let reason):
            return "vault file \(path) is not usable: \(reason); restore it from a backup of the vault folder"
        case .vaultNotUnlockedOnThisMachine(let path):
            return "device-only items cannot be saved to the vault at \(path) yet: it came from another machine; run 'kc unlock' once here"
        case .cannotSwitchUser(let user, let reason):
            return "cannot become user '\(user)': \(reason); nothing was loaded"
        case .sharedWithAnotherGroup(let service, let current, let requested):
            return "'\(service)' is already shared with group '\(current.name)'; to share it with '\(requested.name)' instead run 'kc share \(service) --group \(requested.name)'"
        }
    }

    /// Classifies a kernel failure.
    internal init(_ error: KeyctlError) {
        switch error.errno {
        case .permissionDenied:
            self = .accessDenied(error)
        case .notPermitted:
            // Docker's default seccomp profile answers EPERM for the key syscalls.
            self = KeyringProbe.syscallsWork() ? .accessDenied(error) : .keyringsUnavailable(error)
        case .diskQuotaExceeded:
            self = .quotaExceeded(error, usage: KeyQuota.current())
        case .noFunction, .notSupported:
            self = .keyringsUnavailable(error)
        default:
            self = .kernel(error)
        }
    }
}

/// Why kc refuses a member's write into another user's group-writable service. The
/// kernel would take some of these from a member who bypasses kc (see docs/SECURITY.md).
public enum MemberWriteLimit: Sendable, Hashable {
    /// The item has a deadline, and so no write permission for members.
    case hasDeadline
    /// The value is larger than the item is now: its owner's quota would pay the growth.
    case larger(current: Int, new: Int)
    /// The value is over a page, the most `keyctl_update` takes.
    case overPage(new: Int, page: Int)
    /// The value is empty or one NUL byte, which only a new key holds (``ItemValue``).
    case emptyOrNul
}
