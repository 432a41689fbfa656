import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where one operation's items live, resolved once at the start of each public
/// ``Keychain`` call ("resolve, then act") and handed down: nothing below resolves again.
internal enum ServiceRings {
    /// The caller's own service (it may not exist yet).
    case own(OwnService)
    /// Another user's service, shared with the caller through a group.
    case shared(SharedService)
    /// ``Keychain/anyService``: whichever of the caller's services holds the item.
    case anyService
}

/// The caller's own service, and what governs writes to it: the level that is its home
/// (searched first, and where writes put items) and the sharing policy of the keychain
/// that resolved it.
internal struct OwnService: Sendable {
    let name: KeyName
    var home: Accessibility
    /// The group a write shares the service with (see ``Keychain/accessGroup``).
    var accessGroup: AccessGroup? = nil
    /// Whether a write that first shares the service lets the group change items.
    var groupWritable: Bool = false
    /// `kc:NAME`, when the keychain that resolved this made it already (see
    /// ``ringDescription(_:)``).
    var portableRingDescription: KeyName? = nil

    /// The description of the service's keyrings with `marker`.
    func ringDescription(_ marker: ServiceMarker) -> KeyName {
        if marker == .portable, let portableRingDescription { return portableRingDescription }
        return marker.keyringDescription(for: name)
    }

    /// The same service, with `level` as its home.
    func at(_ level: Accessibility) -> OwnService {
        var copy = self
        copy.home = level
        return copy
    }
}

/// An item found in the kernel: its key and the keyring it is linked in, and its level
/// where it is known exactly (see ``OwnService/locate(_:exactLevel:)``); nil for
/// another user's item.
internal struct LocatedItem {
    var ring: KeySerial
    var item: KeySerial
    var accessibility: Accessibility?
    /// The ring's description, where the search read it.
    var ringInfo: KeyDescription? = nil

    /// The item's deadline as /proc/keys shows it, exact where kc's record agrees (see
    /// ``DeadlineRecords``): what a listing, a rename or a reconciliation copies.
    var shownDeadline: Deadline? { DeadlineRecords.deadline(of: item) }

    /// ``shownDeadline`` for one of many items: /proc/keys is read once, into `shown`,
    /// at the first call (a key made since is looked up on its own).
    func shownDeadline(using shown: inout [KeySerial: ProcKeysEntry.Expiry]?) -> Deadline? {
        if shown == nil { shown = DeadlineRecords.shownExpiries() }
        guard let expiry = shown?[item] else { return shownDeadline }
        return DeadlineRecords.deadline(of: item, shown: expiry)
    }

    /// The deadline record kc made for the item, if it set one: what a save trusts,
    /// without reading /proc/keys.
    var deadlineRecord: DeadlineRecords.Record? { DeadlineRecords.record(of: item) }

    /// What a new key for this item of the caller's own copies: the sharing of its
    /// keyring (every item is shared as its keyring is), else owner-only.
    func likeOwnItem(named key: KeyName) -> KeyDescription? {
        ringInfo.map { KeyDescription.ownItem(named: key, sharedAs: Sharing($0)) }
    }
}

extension KeyDescription {
    /// An item of the caller's own as kc makes it: owner-only, or shared as `sharing`.
    static func ownItem(named key: KeyName, sharedAs sharing: Sharing?) -> KeyDescription {
        KeyDescription(type: "user", uid: geteuid(), gid: sharing?.group.gid ?? getegid(),
                       permissions: sharing?.permissions(for: .item) ?? .ownerOnly, description: key)
    }
}

extension Keychain {
    /// The one resolution of this keychain into where its items live. Only a keychain
    /// with an access group or an owner pays for finding another user's service.
    internal func resolve(forWriting: Bool) throws(KeychainError) -> ServiceRings {
        guard let service = serviceName else { return .anyService }
        if reachesShared, let shared = try sharedService(forWriting: forWriting) { return .shared(shared) }
        return .own(OwnService(name: service, home: accessibility, accessGroup: accessGroup, groupWritable: groupWritable,
                               portableRingDescription: portableRingDescription))
    }

    /// The caller's own service, for what only its owner may do (`action` completes
    /// the refusal "only OWNER ... can").
    internal func ownService(toDo action: String) throws(KeychainError) -> OwnService {
        switch try resolve(forWriting: true) {
        case .anyService: throw .serviceRequired
        case .shared(let shared): throw .ownerOnly(shared, action: action)
        case .own(let own): return own
        }
    }
}
