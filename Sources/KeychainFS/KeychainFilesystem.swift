public import KernelKeychain
public import Keyrings
public import SystemPackage

/// The filesystem's meaning, over plain types: services are directories and items are
/// files. It holds no secret and no cache: every answer comes from the kernel at the
/// time it is asked, so a change made with `kc set` or the library shows at once.
/// The FUSE bridge (Bridge/) turns requests into these calls and their results into replies.
///
/// A method that reaches the keychain throws untyped: a ``FilesystemError`` for the
/// filesystem's own refusals, or the library's `KeychainError` unchanged. Typed throws
/// converts no error type into another, so a `throws(FilesystemError)` here would need
/// a conversion at every library call; instead the bridge converts once per request,
/// with `Errno(reporting:)`. What refuses without the keychain stays typed.
public final class KeychainFilesystem: Sendable {
    public let configuration: MountConfiguration
    /// Attributes of items just removed or renamed away, for a new file in their place.
    let recentlyReplaced = RecentlyReplaced()

    public init(configuration: MountConfiguration) {
        self.configuration = configuration
    }

    // MARK: Names

    /// The node `name` would be inside `parent`; nil if `parent` is a file or the name
    /// can never exist (the kernel checks `/`, NUL and the 255-byte limit first).
    public func child(of parent: Node, named name: KeyName) throws -> Node {
        switch parent {
        case .root:
            if let service = configuration.service { return .item(service: service, name: name) }
            if configuration.showsShared && name == MountConfiguration.sharedDirectoryName { return .sharedRoot }
            try validateName(name, as: .service)
            return .service(name)
        case .service(let service):
            try validateName(name, as: .item)
            return .item(service: service, name: name)
        case .sharedRoot:
            try validateName(name, as: .service)  // a user name: the same rules serve
            guard let owner = name.text else { throw FilesystemError(.noSuchFileOrDirectory) }
            return .sharedOwner(owner)
        case .sharedOwner(let owner):
            try validateName(name, as: .service)
            return .sharedService(owner: owner, service: name)
        case .sharedService(let owner, let service):
            try validateName(name, as: .item)
            return .sharedItem(owner: owner, service: service, name: name)
        case .item, .sharedItem:
            throw FilesystemError(.notDirectory)
        }
    }

    // MARK: Reading

    /// Attributes of a node that exists; ENOENT otherwise. `pendingSize` is the size of
    /// a file being written through an open handle and not yet committed.
    public func attributes(of node: Node, pendingSize: Int? = nil) throws -> NodeAttributes {
        switch node {
        case .root:
            return directoryAttributes()
        case .service(let service):
            guard try keychain(service).serviceExists() else {
                throw FilesystemError(.noSuchFileOrDirectory)
            }
            return directoryAttributes()
        case .item(let service, let name):
            if let pendingSize { return fileAttributes(size: pendingSize) }
            guard let size = try keychain(service).size(ofItem: name) else {
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
            guard let size = try sharedKeychain(owner, service).size(ofItem: name) else {
                throw FilesystemError(.noSuchFileOrDirectory)
            }
            return fileAttributes(size: size, shared: true)
        }
    }

    /// The names in a directory, with whether each is a directory.
    public func entries(of node: Node) throws -> [(name: KeyName, node: Node)] {
        switch node {
        case .root:
            if let service = configuration.service { return try items(of: service) }
            var services = try Keychain.services().map { ($0, Node.service($0)) }
            if configuration.showsShared {
                services.removeAll { $0.0 == MountConfiguration.sharedDirectoryName }
                services.append((MountConfiguration.sharedDirectoryName, .sharedRoot))
            }
            return services
        case .service(let service):
            return try items(of: service)
        case .sharedRoot:
            let shared = try Keychain.sharedServices()
            return Set(shared.map(\.ownerName)).sorted().map { (KeyName($0), Node.sharedOwner($0)) }
        case .sharedOwner(let owner):
            return try sharedServices(of: owner).map { ($0.service, Node.sharedService(owner: owner, service: $0.service)) }
        case .sharedService(let owner, let service):
            let names = try sharedKeychain(owner, service).allKeyNames()
            return names.map { ($0, Node.sharedItem(owner: owner, service: service, name: $0)) }
        case .item, .sharedItem:
            throw FilesystemError(.notDirectory)
        }
    }

    /// The services `owner` shares with the mounting user; none for an unknown user.
    private func sharedServices(of owner: String) throws(KeychainError) -> [SharedService] {
        do {
            return try Keychain.sharedServices(owner: owner)
        } catch {
            if case .unknownUser = error { return [] }
            throw error
        }
    }

    private func items(of service: KeyName) throws(KeychainError) -> [(name: KeyName, node: Node)] {
        let names = try keychain(service).allKeyNames()
        return names.map { ($0, Node.item(service: service, name: $0)) }
    }

    /// The item's value (a copy the caller zeroes when done); ENOENT if missing.
    public func contents(of node: Node) throws -> [UInt8] {
        let read: [UInt8]?
        switch node {
        case .item(let service, let name):
            read = try keychain(service).data(forKey: name)
        case .sharedItem(let owner, let service, let name):
            read = try sharedKeychain(owner, service).data(forKey: name)
        default:
            throw FilesystemError(.isDirectory)
        }
        guard let value = read else {
            throw FilesystemError(.noSuchFileOrDirectory)
        }
        return value
    }

    // MARK: Changing

    /// Stores a file's bytes when it is closed. An existing item takes the value in
    /// place and keeps its level, device-only flag and deadline exactly. A missing one
    /// is created with `newItem` (see ``newItemAttributes(for:)``); with nil, the file
    /// was opened on an item that has since been removed, and like a write to an
    /// unlinked file nothing is stored: returns false.
    @discardableResult
    public func commit(_ bytes: [UInt8], to node: Node, newItem: NewItemAttributes?) throws -> Bool {
        try requireWritable(node)
        guard case .item(let service, let name) = node else { throw FilesystemError(.isDirectory) }
        let keychain = try keychain(service)
        if try keychain.replace(bytes, forKey: name) { return true }
        guard let newItem else { return false }
        try keychain.accessibility(newItem.accessibility).set(bytes, forKey: name, until: newItem.deadline)
        return true
    }

    /// What a new file at `node` becomes when first stored: the level, device-only flag
    /// and deadline of an item that had this name until a moment ago (an editor that
    /// renames the original away, or removes it, and writes a new file in its place),
    /// else the mount's level with no deadline.
    public func newItemAttributes(for node: Node) -> NewItemAttributes {
        recentlyReplaced.take(node) ?? NewItemAttributes(accessibility: configuration.newItemAccessibility)
    }

    /// EDQUOT now, rather than at close where a shell loses it, if a new item of
    /// `name` and `size` bytes cannot fit in the uid's key quota.
    public func checkRoom(forNewItem node: Node, size: Int = 1) throws(FilesystemError) {
        guard case .item(_, let name) = node, let quota = KeyQuota.current() else { return }
        if quota.keys + 1 > quota.maxKeys || quota.bytes + name.bytes.count + max(size, 1) > quota.maxBytes {
            throw FilesystemError(.diskQuotaExceeded)
        }
    }

    /// EDQUOT if growing a value from `oldSize` to `newSize` bytes cannot fit in the quota.
    public func checkRoom(growing oldSize: Int, to newSize: Int) throws(FilesystemError) {
        guard newSize > oldSize, let quota = KeyQuota.current() else { return }
        if quota.bytes + (newSize - oldSize) > quota.maxBytes { throw FilesystemError(.diskQuotaExceeded) }
    }

    /// ENOSPC now, rather than at close where a shell loses it, if the vault could not
    /// save `size` bytes for the item at `node` (its disk is full; see
    /// `Keychain.checkRoomToSave(_:forKey:)`), and the vault's own refusal if it cannot be
    /// used. The errno is what the bridge would answer; a pending write keeps it for its
    /// close.
    public func checkVaultRoom(for node: Node, size: Int) throws(FilesystemError) {
        guard case .item(let service, let name) = node else { return }
        do {
            try keychain(service).checkRoomToSave(max(size, 1), forKey: name)
        } catch {
            throw FilesystemError(Errno(reporting: error))
        }
    }

    /// `rm`.
    public func remove(_ node: Node) throws {
        try requireWritable(node)
        guard case .item(let service, let name) = node else { throw FilesystemError(.isDirectory) }
        let keychain = try keychain(service)
        if let item = try keychain.item(name) { recentlyReplaced.remember(node, item) }
        if !(try keychain.remove(name)) { throw FilesystemError(.noSuchFileOrDirectory) }
    }

    /// `mkdir`: a new, empty service at the mount's accessibility.
    public func makeDirectory(_ node: Node) throws {
        try requireWritable(node)
        guard case .service(let service) = node else { throw FilesystemError(.notPermitted) }
        let keychain = try keychain(service)
        if try keychain.serviceExists() { throw FilesystemError(.fileExists) }
        try keychain.accessibility(configuration.newItemAccessibility).createService()
    }

    /// `rmdir`: only an empty service.
    public func removeDirectory(_ node: Node) throws {
        try requireWritable(node)
        guard case .service(let service) = node else { throw FilesystemError(.notPermitted) }
        let existing = try keychain(service)
        guard try existing.serviceExists() else { throw FilesystemError(.noSuchFileOrDirectory) }
        // What the service holds is the kernel's items and the vault's, locked or not:
        // a folder that lists empty while a locked vault keeps its items is not empty,
        // and an item stored while it is being removed keeps it (ENOTEMPTY either way).
        guard try existing.removeServiceIfEmpty() else { throw FilesystemError(.directoryNotEmpty) }
    }

    /// `mv`. An item moves within or across services: onto an existing item it gives
    /// its value and the target keeps its level and deadline (an editor's
    /// save-by-rename); otherwise it keeps its own. A service directory is renamed in
    /// the kernel, every item keeping its key. Both stay in the kernel: nothing is
    /// copied through the daemon, and the attributes `mv` would copy are never lost.
    public func rename(_ source: Node, to target: Node, replacing: Bool = true) throws {
        try requireWritable(source)
        try requireWritable(target)
        if source == target { return }
        switch (source, target) {
        case (.item(let fromService, let fromName), .item(let toService, let toName)):
            let from = try keychain(fromService), to = try keychain(toService)
            if let item = try from.item(fromName) { recentlyReplaced.remember(source, item) }
            if !(try from.rename(fromName, to: toName, in: to, replacing: replacing)) {
                throw FilesystemError(.noSuchFileOrDirectory)
            }
        case (.service(let fromService), .service(let toService)):
            if !replacing, try keychain(toService).serviceExists() { throw FilesystemError(.fileExists) }
            try keychain(fromService).renameService(to: toService)
        case (.service, _), (_, .service):
            throw FilesystemError(.notDirectory)
        default:
            throw FilesystemError(.notPermitted)
        }
    }

    /// `truncate` of a file that is not open: shrink or zero-extend the stored value,
    /// keeping its level and deadline.
    public func resize(_ node: Node, to size: Int) throws {
        try requireWritable(node)
        guard size <= KeychainError.maximumValueSize else { throw FilesystemError(.fileTooLarge) }
        var value = try contents(of: node)
        defer { value.overwriteWithZeros() }
        try checkRoom(growing: value.count, to: size)
        if size < value.count { value.removeLast(value.count - size) } else { value += [UInt8](repeating: 0, count: size - value.count) }
        if !(try commit(value, to: node, newItem: nil)) { throw FilesystemError(.noSuchFileOrDirectory) }
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
    public func extendedAttribute(_ name: String, of node: Node) throws -> String {
        guard extendedAttributeNames(of: node).contains(name) else { throw FilesystemError(.noData) }
        let found: KeychainItem?
        switch node {
        case .item(let service, let key): found = try keychain(service).item(key)
        case .sharedItem(let owner, let service, let key): found = try sharedKeychain(owner, service).item(key)
        default: throw FilesystemError(.noData)
        }
        guard let item = found else { throw FilesystemError(.noSuchFileOrDirectory) }
        switch name {
        case Self.serialAttribute: return String(item.serial.rawValue)
        default:
            let attributes = NewItemAttributes(accessibility: item.accessibility ?? configuration.newItemAccessibility, deadline: item.deadline)
            return try attributes.value(of: name)
        }
    }

    /// Sets an attribute: `user.kc.access` moves the item to that level,
    /// `user.kc.this-device-only` (1/0) marks or unmarks it (both move the same key, so
    /// its deadline stays), `user.kc.timeout` sets the kernel expiry in seconds (0 clears
    /// it). `user.kc.serial` is read-only (EPERM).
    public func setExtendedAttribute(_ name: String, to text: String, of node: Node) throws {
        try requireWritable(node)
        guard case .item(let service, let key) = node, extendedAttributeNames(of: node).contains(name) else {
            throw FilesystemError(.notSupported)
        }
        let keychain = try keychain(service)
        guard let item = try keychain.item(key) else { throw FilesystemError(.noSuchFileOrDirectory) }
        var attributes = NewItemAttributes(accessibility: item.accessibility ?? configuration.newItemAccessibility, deadline: item.deadline)
        let before = attributes
        try attributes.set(name, to: text)
        let found: Bool
        if attributes.accessibility != before.accessibility {
            found = try keychain.move(key, to: attributes.accessibility)
        } else if attributes.deadline != before.deadline {
            found = try keychain.setTimeout(attributes.deadline.map { .seconds($0.secondsLeft) }, forKey: key)
        } else {
            found = true
        }
        if !found { throw FilesystemError(.noSuchFileOrDirectory) }
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

    private func keychain(_ service: KeyName) throws(KeychainError) -> Keychain {
        try Keychain(service: service)
    }

    private func sharedKeychain(_ owner: String, _ service: KeyName) throws(KeychainError) -> Keychain {
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

extension String {
    /// `setfattr -v` and `echo` may leave a newline on a value.
    var trimmingTrailingNewlines: String {
        var text = Substring(self)
        while text.last == "\n" || text.last == "\r" { text = text.dropLast() }
        return String(text)
    }
}
