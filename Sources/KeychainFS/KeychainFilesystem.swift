public import KernelKeychain
public import SystemPackage

/// The filesystem's meaning, over plain types: services are directories and items are
/// files. It holds no secret and no cache: every answer comes from the kernel at the
/// time it is asked, so a change made with `kc set` or the library shows at once.
/// The FUSE bridge (Bridge/) turns requests into these calls and their results into replies.
public final class KeychainFilesystem: Sendable {
    public let configuration: MountConfiguration

    public init(configuration: MountConfiguration) {
        self.configuration = configuration
    }

    // MARK: Names

    /// The node `name` would be inside `parent`; nil if `parent` is a file or the name
    /// can never exist (the kernel checks `/`, NUL and the 255-byte limit first).
    public func child(of parent: Node, named name: String) throws(FilesystemError) -> Node {
        switch parent {
        case .root:
            if let service = configuration.service { return .item(service: service, name: name) }
            if configuration.showsShared && name == MountConfiguration.sharedDirectoryName { return .sharedRoot }
            try check(name, as: .service)
            return .service(name)
        case .service(let service):
            try check(name, as: .item)
            return .item(service: service, name: name)
        case .sharedRoot:
            try check(name, as: .service)  // a user name: the same rules serve
            return .sharedOwner(name)
        case .sharedOwner(let owner):
            try check(name, as: .service)
            return .sharedService(owner: owner, service: name)
        case .sharedService(let owner, let service):
            try check(name, as: .item)
            return .sharedItem(owner: owner, service: service, name: name)
        case .item, .sharedItem:
            throw FilesystemError(.notDirectory)
        }
    }

    private func check(_ name: String, as kind: NameKind) throws(FilesystemError) {
        do {
            try validateName(name, as: kind)
        } catch {
            throw FilesystemError(error)
        }
    }

    // MARK: Reading

    /// Attributes of a node that exists; ENOENT otherwise. `pendingSize` is the size of
    /// a file being written through an open handle and not yet committed.
    public func attributes(of node: Node, pendingSize: Int? = nil) throws(FilesystemError) -> NodeAttributes {
        switch node {
        case .root:
            return directoryAttributes()
        case .service(let service):
            guard try attempt({ () throws(KeychainError) in try keychain(service).serviceExists() }) else {
                throw FilesystemError(.noSuchFileOrDirectory)
            }
            return directoryAttributes()
        case .item(let service, let name):
            if let pendingSize { return fileAttributes(size: pendingSize) }
            guard let size = try attempt({ () throws(KeychainError) in try keychain(service).size(ofItem: name) }) else {
                throw FilesystemError(.noSuchFileOrDirectory)
            }
            return fileAttributes(size: size)
        case .sharedRoot:
            return directoryAttributes(shared: true)
        case .sharedOwner(let owner):
            guard try !sharedServices(of: owner).isEmpty else { throw FilesystemError(.noSuchFileOrDirectory) }
            return directoryAttributes(shared: true)
        case .sharedService(let owner, let service):
            guard try sharedServices(of: owner).contains(where: { $0.service == service }) else {
                throw FilesystemError(.noSuchFileOrDirectory)
            }
            return directoryAttributes(shared: true)
        case .sharedItem(let owner, let service, let name):
            guard let size = try attempt({ () throws(KeychainError) in try sharedKeychain(owner, service).size(ofItem: name) }) else {
                throw FilesystemError(.noSuchFileOrDirectory)
            }
            return fileAttributes(size: size, shared: true)
        }
    }

    /// The names in a directory, with whether each is a directory.
    public func entries(of node: Node) throws(FilesystemError) -> [(name: String, node: Node)] {
        switch node {
        case .root:
            if let service = configuration.service { return try items(of: service) }
            var services = try attempt { () throws(KeychainError) in try Keychain.services() }.map { ($0, Node.service($0)) }
            if configuration.showsShared {
                services.removeAll { $0.0 == MountConfiguration.sharedDirectoryName }
                services.append((MountConfiguration.sharedDirectoryName, .sharedRoot))
            }
            return services
        case .service(let service):
            return try items(of: service)
        case .sharedRoot:
            let shared = try attempt { () throws(KeychainError) in try Keychain.sharedServices() }
            return Set(shared.map(\.ownerName)).sorted().map { ($0, Node.sharedOwner($0)) }
        case .sharedOwner(let owner):
            return try sharedServices(of: owner).map { ($0.service, Node.sharedService(owner: owner, service: $0.service)) }
        case .sharedService(let owner, let service):
            let names = try attempt { () throws(KeychainError) in try sharedKeychain(owner, service).allKeys() }
            return names.map { ($0, Node.sharedItem(owner: owner, service: service, name: $0)) }
        case .item, .sharedItem:
            throw FilesystemError(.notDirectory)
        }
    }

    /// The services `owner` shares with the mounting user; none for an unknown user.
    private func sharedServices(of owner: String) throws(FilesystemError) -> [SharedService] {
        do {
            return try Keychain.sharedServices(owner: owner)
        } catch {
            if case .unknownUser = error { return [] }
            throw FilesystemError(error)
        }
    }

    private func items(of service: String) throws(FilesystemError) -> [(name: String, node: Node)] {
        let names = try attempt { () throws(KeychainError) in try keychain(service).allKeys() }
        return names.map { ($0, Node.item(service: service, name: $0)) }
    }

    /// The item's value (a copy the caller zeroes when done); ENOENT if missing.
    public func contents(of node: Node) throws(FilesystemError) -> [UInt8] {
        let read: () throws(KeychainError) -> [UInt8]?
        switch node {
        case .item(let service, let name):
            read = { () throws(KeychainError) in try self.keychain(service).data(forKey: name) }
        case .sharedItem(let owner, let service, let name):
            read = { () throws(KeychainError) in try self.sharedKeychain(owner, service).data(forKey: name) }
        default:
            throw FilesystemError(.isDirectory)
        }
        guard let value = try attempt(read) else {
            throw FilesystemError(.noSuchFileOrDirectory)
        }
        return value
    }

    // MARK: Changing

    /// Stores a file's bytes as the item's value, atomically. An existing item keeps its
    /// accessibility and timeout; a new one takes the mount's accessibility.
    public func write(_ bytes: [UInt8], to node: Node) throws(FilesystemError) {
        try requireWritable(node)
        guard case .item(let service, let name) = node else { throw FilesystemError(.isDirectory) }
        try attempt { () throws(KeychainError) in
            let existing = try keychain(service).item(name)
            var target = try keychain(service).accessibility(existing?.accessibility ?? configuration.newItemAccessibility)
            if let seconds = existing?.secondsLeft, seconds > 0 { target = try target.timeout(.seconds(seconds)) }
            try target.set(bytes, forKey: name)
        }
    }

    /// `rm`.
    public func remove(_ node: Node) throws(FilesystemError) {
        try requireWritable(node)
        guard case .item(let service, let name) = node else { throw FilesystemError(.isDirectory) }
        let removed = try attempt { () throws(KeychainError) in try keychain(service).remove(name) }
        if !removed { throw FilesystemError(.noSuchFileOrDirectory) }
    }

    /// `mkdir`: a new, empty service at the mount's accessibility.
    public func makeDirectory(_ node: Node) throws(FilesystemError) {
        try requireWritable(node)
        guard case .service(let service) = node else { throw FilesystemError(.notPermitted) }
        try attempt { () throws(KeychainError) in
            let keychain = try keychain(service)
            if try keychain.serviceExists() { throw KeychainError.kernel(.init(.fileExists, call: "mkdir")) }
            try keychain.accessibility(configuration.newItemAccessibility).createService()
        }
    }

    /// `rmdir`: only an empty service.
    public func removeDirectory(_ node: Node) throws(FilesystemError) {
        try requireWritable(node)
        guard case .service(let service) = node else { throw FilesystemError(.notPermitted) }
        try attempt { () throws(KeychainError) in
            let keychain = try keychain(service)
            guard try keychain.serviceExists() else { throw KeychainError.kernel(.init(.noSuchFileOrDirectory, call: "rmdir")) }
            guard try keychain.allKeys().isEmpty else { throw KeychainError.kernel(.init(.directoryNotEmpty, call: "rmdir")) }
            try keychain.removeAll()
        }
    }

    /// `mv` of an item, within or across services. The value lands at the target's
    /// accessibility if the target exists (so an editor's save-by-rename keeps the
    /// item's level), else at the source's; then the source is removed. Directories
    /// answer EXDEV, so `mv` copies them item by item.
    public func rename(_ source: Node, to target: Node, replacing: Bool = true) throws(FilesystemError) {
        try requireWritable(source)
        try requireWritable(target)
        guard case .item(let fromService, let fromName) = source, case .item(let toService, let toName) = target else {
            throw FilesystemError(.improperLink)
        }
        if source == target { return }
        try attempt { () throws(KeychainError) in
            let from = try keychain(fromService), to = try keychain(toService)
            guard let moving = try from.item(fromName), var value = try from.data(forKey: fromName) else {
                throw KeychainError.kernel(.init(.noSuchFileOrDirectory, call: "rename"))
            }
            defer { value.overwriteWithZeros() }
            let replaced = try to.item(toName)
            if replaced != nil && !replacing { throw KeychainError.kernel(.init(.fileExists, call: "rename")) }
            let keep = replaced ?? moving
            var destination = to.accessibility(keep.accessibility ?? configuration.newItemAccessibility)
            if let seconds = keep.secondsLeft, seconds > 0 { destination = try destination.timeout(.seconds(seconds)) }
            try destination.set(value, forKey: toName)
            try from.remove(fromName)
        }
    }

    /// `truncate` of a file that is not open: shrink or zero-extend the stored value.
    public func resize(_ node: Node, to size: Int) throws(FilesystemError) {
        try requireWritable(node)
        var value = try contents(of: node)
        defer { value.overwriteWithZeros() }
        if size < value.count { value.removeLast(value.count - size) } else { value += [UInt8](repeating: 0, count: size - value.count) }
        try write(value, to: node)
    }

    // MARK: Extended attributes

    public static let accessAttribute = "user.kc.access"
    public static let deviceOnlyAttribute = "user.kc.this-device-only"
    public static let timeoutAttribute = "user.kc.timeout"
    public static let serialAttribute = "user.kc.serial"

    /// The attribute names a node has (items only).
    public func extendedAttributeNames(of node: Node) -> [String] {
        switch node {
        case .item: [Self.accessAttribute, Self.deviceOnlyAttribute, Self.timeoutAttribute, Self.serialAttribute]
        // Another user's level is not visible (their anchor keyrings are private).
        case .sharedItem: [Self.timeoutAttribute, Self.serialAttribute]
        default: []
        }
    }

    /// An attribute's value as text: the level (`always`), `1`/`0`, seconds left (`0` for
    /// no expiry) or the key serial. ENODATA for any other name.
    public func extendedAttribute(_ name: String, of node: Node) throws(FilesystemError) -> String {
        guard extendedAttributeNames(of: node).contains(name) else { throw FilesystemError(.noData) }
        let lookup: () throws(KeychainError) -> KeychainItem?
        switch node {
        case .item(let service, let key): lookup = { () throws(KeychainError) in try self.keychain(service).item(key) }
        case .sharedItem(let owner, let service, let key): lookup = { () throws(KeychainError) in try self.sharedKeychain(owner, service).item(key) }
        default: throw FilesystemError(.noData)
        }
        guard let item = try attempt(lookup) else { throw FilesystemError(.noSuchFileOrDirectory) }
        let accessibility = item.accessibility ?? configuration.newItemAccessibility
        switch name {
        case Self.accessAttribute: return accessibility.level.rawValue
        case Self.deviceOnlyAttribute: return accessibility.isThisDeviceOnly ? "1" : "0"
        case Self.timeoutAttribute: return String(item.secondsLeft ?? 0)
        default: return String(item.serial.rawValue)
        }
    }

    /// Sets an attribute: `user.kc.access` moves the item to that level,
    /// `user.kc.this-device-only` (1/0) marks or unmarks it, `user.kc.timeout` sets the
    /// kernel expiry in seconds (0 clears it). `user.kc.serial` is read-only (EPERM).
    public func setExtendedAttribute(_ name: String, to text: String, of node: Node) throws(FilesystemError) {
        try requireWritable(node)
        guard case .item(let service, let key) = node, extendedAttributeNames(of: node).contains(name) else {
            throw FilesystemError(.notSupported)
        }
        let value = text.trimmingTrailingNewlines
        try attempt { () throws(KeychainError) in
            let keychain = try keychain(service)
            guard let item = try keychain.item(key) else { throw KeychainError.kernel(.init(.noSuchFileOrDirectory, call: "setxattr")) }
            switch name {
            case Self.accessAttribute:
                guard let level = Accessibility.Level(rawValue: value) else { throw KeychainError.invalidTimeout(value) }
                try move(keychain, key, item, to: Accessibility(level: level, thisDeviceOnly: item.accessibility?.isThisDeviceOnly ?? false))
            case Self.deviceOnlyAttribute:
                guard value == "1" || value == "0" else { throw KeychainError.invalidTimeout(value) }
                try move(keychain, key, item, to: Accessibility(level: (item.accessibility ?? configuration.newItemAccessibility).level, thisDeviceOnly: value == "1"))
            case Self.timeoutAttribute:
                guard let seconds = UInt32(value) else { throw KeychainError.invalidTimeout(value) }
                try keychain.setTimeout(seconds == 0 ? nil : .seconds(seconds), forKey: key)
            default:
                throw KeychainError.kernel(.init(.notPermitted, call: "setxattr"))
            }
        }
    }

    private func move(_ keychain: Keychain, _ key: String, _ item: KeychainItem, to accessibility: Accessibility) throws(KeychainError) {
        guard accessibility != item.accessibility else { return }
        var target = keychain
        if let seconds = item.secondsLeft, seconds > 0 { target = try target.timeout(.seconds(seconds)) }
        try target.move(key, to: accessibility)
    }

    // MARK: Quota

    /// The uid's key quota: bytes as blocks of one byte, keys as inodes.
    public func statistics() -> FilesystemStatistics {
        guard let quota = KeyQuota.current() else {
            return FilesystemStatistics(totalBytes: 0, freeBytes: 0, totalFiles: 0, freeFiles: 0)
        }
        return FilesystemStatistics(
            totalBytes: UInt64(max(quota.maxBytes, 0)), freeBytes: UInt64(max(quota.maxBytes - quota.bytes, 0)),
            totalFiles: UInt64(max(quota.maxKeys, 0)), freeFiles: UInt64(max(quota.maxKeys - quota.keys, 0)))
    }

    // MARK: Helpers

    private func keychain(_ service: String) throws(KeychainError) -> Keychain {
        try Keychain(service: service)
    }

    private func sharedKeychain(_ owner: String, _ service: String) throws(KeychainError) -> Keychain {
        try Keychain(service: service, owner: owner)
    }

    private func requireWritable(_ node: Node) throws(FilesystemError) {
        if configuration.readOnly || node.isShared { throw FilesystemError(.readOnlyFileSystem) }
    }

    private func directoryAttributes(shared: Bool = false) -> NodeAttributes {
        NodeAttributes(isDirectory: true, size: 0, permissions: configuration.readOnly || shared ? 0o500 : 0o700,
                       uid: configuration.uid, gid: configuration.gid)
    }

    private func fileAttributes(size: Int, shared: Bool = false) -> NodeAttributes {
        NodeAttributes(isDirectory: false, size: size, permissions: configuration.readOnly || shared ? 0o400 : 0o600,
                       uid: configuration.uid, gid: configuration.gid)
    }
}

/// Runs keychain work, turning its error into the errno a shell user sees.
@inline(__always)
func attempt<R>(_ body: () throws(KeychainError) -> R) throws(FilesystemError) -> R {
    do {
        return try body()
    } catch {
        throw FilesystemError(error)
    }
}

extension String {
    /// `setfattr -v` and `echo` may leave a newline on a value.
    var trimmingTrailingNewlines: String {
        var text = Substring(self)
        while text.last == "\n" || text.last == "\r" { text = text.dropLast() }
        return String(text)
    }
}
