public import KernelKeychain
public import Keyrings

/// A place in the mounted tree, named by what it is rather than by an inode number
/// (the bridge keeps its own numbers: key serials get reused).
public enum Node: Hashable, Sendable {
    /// The mount's root: all services, or with `--service` that service's items.
    case root
    case service(KeyName)
    case item(service: KeyName, name: KeyName)
    /// `shared/` (with `--shared`): services other users share with the mounting user.
    case sharedRoot
    /// `shared/<owner>/`
    case sharedOwner(String)
    /// `shared/<owner>/<service>/`
    case sharedService(owner: String, service: KeyName)
    /// `shared/<owner>/<service>/<item>`
    case sharedItem(owner: String, service: KeyName, name: KeyName)

    public var isDirectory: Bool {
        switch self {
        case .root, .service, .sharedRoot, .sharedOwner, .sharedService: true
        case .item, .sharedItem: false
        }
    }

    /// Other users' nodes, which are always read-only.
    public var isShared: Bool {
        switch self {
        case .sharedRoot, .sharedOwner, .sharedService, .sharedItem: true
        case .root, .service, .item: false
        }
    }
}

/// What `stat` shows of a node.
public struct NodeAttributes: Hashable, Sendable {
    public var isDirectory: Bool
    public var size: Int
    /// Permission bits only (0700, 0600 or 0400); the bridge adds the file type.
    public var permissions: UInt32
    public var uid: UInt32
    public var gid: UInt32
    /// Directories: 2; files: 1.
    public var linkCount: UInt32 { isDirectory ? 2 : 1 }

    public init(isDirectory: Bool, size: Int, permissions: UInt32, uid: UInt32, gid: UInt32) {
        self.isDirectory = isDirectory
        self.size = size
        self.permissions = permissions
        self.uid = uid
        self.gid = gid
    }
}

/// What `df` shows: the uid's kernel key quota.
public struct FilesystemStatistics: Hashable, Sendable {
    public var totalBytes: UInt64
    public var freeBytes: UInt64
    public var totalFiles: UInt64
    public var freeFiles: UInt64
}

/// How a mount behaves.
public struct MountConfiguration: Sendable {
    /// Refuse every change with EROFS; files show mode 0400.
    public var readOnly: Bool
    /// Serve one service's items at the root (for `-v /run/kc/S:/run/secrets:ro`).
    public var service: KeyName?
    /// Where new files (and `mkdir`) put items.
    public var newItemAccessibility: Accessibility
    /// Owner shown for every node: the user who mounted.
    public var uid: UInt32
    public var gid: UInt32
    /// Show `shared/<owner>/<service>/<item>`: services other users share with this one
    /// through a group. Hides a service of the caller's own named `shared`.
    public var showsShared: Bool
    /// Log one line per open of an item file (`kc mount --audit`): see ``ReadAudit``.
    public var auditsReads: Bool

    public static let sharedDirectoryName: KeyName = "shared"

    public init(readOnly: Bool = false, service: KeyName? = nil,
                newItemAccessibility: Accessibility = .whenUnlocked, uid: UInt32, gid: UInt32, showsShared: Bool = false, auditsReads: Bool = false) {
        self.showsShared = showsShared
        self.auditsReads = auditsReads
        self.readOnly = readOnly
        self.service = service
        self.newItemAccessibility = newItemAccessibility
        self.uid = uid
        self.gid = gid
    }
}
