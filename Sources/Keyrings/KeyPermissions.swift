/// A key's permission mask: four bytes for possessor, user, group and other, each
/// holding view, read, write, search, link and setattr bits (`key_perm_t`).
public struct KeyPermissions: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// The six rights one class of caller can hold, in the low byte's order.
    public struct Rights: OptionSet, Hashable, Sendable {
        public var rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let view = Rights(rawValue: 0x01)
        public static let read = Rights(rawValue: 0x02)
        public static let write = Rights(rawValue: 0x04)
        public static let search = Rights(rawValue: 0x08)
        public static let link = Rights(rawValue: 0x10)
        public static let setattr = Rights(rawValue: 0x20)
        public static let all: Rights = [.view, .read, .write, .search, .link, .setattr]
    }

    public static func possessor(_ rights: Rights) -> KeyPermissions { KeyPermissions(rawValue: rights.rawValue << 24) }
    public static func user(_ rights: Rights) -> KeyPermissions { KeyPermissions(rawValue: rights.rawValue << 16) }
    public static func group(_ rights: Rights) -> KeyPermissions { KeyPermissions(rawValue: rights.rawValue << 8) }
    public static func other(_ rights: Rights) -> KeyPermissions { KeyPermissions(rawValue: rights.rawValue) }

    /// Rights a caller holds through each class.
    public var possessorRights: Rights { Rights(rawValue: (rawValue >> 24) & 0x3f) }
    public var userRights: Rights { Rights(rawValue: (rawValue >> 16) & 0x3f) }
    public var groupRights: Rights { Rights(rawValue: (rawValue >> 8) & 0x3f) }
    public var otherRights: Rights { Rights(rawValue: rawValue & 0x3f) }

    /// `0x003f0000`: everything for the owning uid, nothing for anyone else, possessors
    /// included. Possession follows the session keyring, not the uid: another uid in the
    /// owner's session (after `su`, `sudo` or `runuser`) possesses what the session
    /// holds, so possessor rights would be rights for that uid too.
    public static let ownerOnly: KeyPermissions = [.user(.all)]

    /// These permissions without write for the group and for others.
    public var withoutWriteForOthers: KeyPermissions {
        subtracting([.group(.write), .other(.write)])
    }

    /// These permissions with no write right for anyone: a keyring so marked takes no new
    /// key (`add_key` and `keyctl_link`/`keyctl_move` into it fail with EACCES) while it
    /// can still be read, searched and unlinked from its parent. kc bars a service
    /// keyring this way while it decides whether it is empty.
    public var removalBarrier: KeyPermissions {
        subtracting([.possessor(.write), .user(.write), .group(.write), .other(.write)])
    }

    /// Whether these are a removal's bar: the owner may read and change the attributes
    /// but not write, which no keyring kc makes has otherwise.
    public var isRemovalBarrier: Bool {
        userRights.isSuperset(of: [.read, .setattr]) && !userRights.contains(.write)
    }

    /// A bar lifted: the owner's write right back (a group that may write its share
    /// gets it back from its next share or store; until then it reads).
    public var liftingRemovalBarrier: KeyPermissions {
        union(.user(.write))
    }

    /// The mask as `keyctl describe` prints it: eight hex digits.
    public var description: String {
        let hex = String(rawValue, radix: 16)
        return String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }
}
