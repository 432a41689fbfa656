import Keyrings
import KeyringCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A path as exact bytes: service and item names may hold any byte but `/` and NUL,
/// and the vault names its files after them verbatim, so a String would not do.
internal struct VaultPath: Hashable, Sendable, CustomStringConvertible {
    var bytes: [UInt8]

    init(_ text: String) { bytes = Array(text.utf8) }
    init(bytes: [UInt8]) { self.bytes = bytes }

    func appending(_ component: String) -> VaultPath { appending(bytes: Array(component.utf8)) }
    func appending(_ name: KeyName) -> VaultPath { appending(bytes: name.bytes) }
    func appending(bytes component: [UInt8]) -> VaultPath {
        VaultPath(bytes: bytes + [UInt8(ascii: "/")] + component)
    }

    /// The folder holding this path.
    var parent: VaultPath {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")), slash > 0 else { return VaultPath("/") }
        return VaultPath(bytes: Array(bytes[..<slash]))
    }

    var description: String { String(decoding: bytes, as: UTF8.self) }

    func withCString<R>(_ body: (UnsafePointer<CChar>) throws(KeychainError) -> R) throws(KeychainError) -> R {
        let terminated = bytes.map { CChar(bitPattern: $0) } + [0]
        return try terminated.withUnsafeBufferPointer { buffer throws(KeychainError) in try body(buffer.baseAddress!) }
    }
}

/// The vault's folder on disk (`$XDG_DATA_HOME/kc`, by default `~/.local/share/kc`):
///
///     identity.age        the vault's X25519 identity, in an age file sealed by the passphrase (scrypt)
///     recipient           its public key (age1…), so writes need no passphrase
///     device-recipient    this machine's id and the public key of device-only items
///     lock                flock(2)ed by every write, so kernel and vault change together
///     status              the last unlock: when, and the last error
///     tmp/                new files before they are renamed into place
///     items/LEVEL/SERVICE/ITEM   one age file per item; LEVEL is the accessibility's name
///
/// The folder is the user's, mode 0700, its files 0600; kc refuses one that is not.
/// Files are read without following links and written by rename, so a reader never
/// sees half a file. What is below the folder is looked at and read from the folder
/// on, never across a mount point (``openInside(_:flags:mode:)``): another filesystem
/// mounted inside the vault is refused, not looked into.
internal struct VaultDirectory: Sendable {
    let root: VaultPath
    /// Whose files these must be: the caller's own, or root's for the host key.
    let owner: uid_t
    /// The vault's lock, if this value is the one ``withLock(_:)`` handed its body: what
    /// is done through it is done under the lock, and locking it again runs at once.
    private(set) var heldLock: VaultLock? = nil

    init(root: VaultPath, owner: uid_t = geteuid()) {
        self.root = root
        self.owner = owner
    }

    /// Whether this value holds the vault's lock (see ``withLock(_:)``).
    var holdsLock: Bool { heldLock != nil }

    /// `$XDG_DATA_HOME/kc` if that is an absolute path, else `$HOME/.local/share/kc` if
    /// HOME is the caller's, else the home folder in the password database (PAM runs kc
    /// without HOME).
    /// The environment's part is the core's ``VaultLocation`` (the front finds the vault by it too).
    static func defaultRoot() -> VaultPath? {
        if let root = VaultLocation.rootFromEnvironment { return VaultPath(bytes: root) }
        guard let home = Accounts.home(ofUser: geteuid()) else { return nil }
        return VaultPath(bytes: VaultLocation.root(underHome: Array(home.utf8)))
    }

    var identityFile: VaultPath { root.appending("identity.age") }
    var recipientFile: VaultPath { root.appending("recipient") }
    var deviceRecipientFile: VaultPath { root.appending("device-recipient") }
    var hostRecipientFile: VaultPath { root.appending("host-recipient") }
    var lockFile: VaultPath { root.appending("lock") }
    var statusFile: VaultPath { root.appending("status") }
    var temporaryFolder: VaultPath { root.appending("tmp") }
    var itemsFolder: VaultPath { root.appending("items") }

    func levelFolder(_ accessibility: Accessibility) -> VaultPath { itemsFolder.appending(accessibility.name) }
    func serviceFolder(_ accessibility: Accessibility, _ service: KeyName) -> VaultPath {
        levelFolder(accessibility).appending(service)
    }
    func itemFile(_ accessibility: Accessibility, _ service: KeyName, _ name: KeyName) -> VaultPath {
        serviceFolder(accessibility, service).appending(name)
    }

    // MARK: Checks

    /// Whether the vault was made (`kc vault init`): its recipient file is there, or
    /// its key (a vault whose recipient was lost must not pass for no vault: writes
    /// would stop being saved, and `kc vault init` would replace the key). One `lstat`
    /// without a vault (of the folder); this is all a write costs a user who has none.
    ///
    /// A folder kc may not use or cannot look into (another user's, open to others, not
    /// a folder) counts as a vault too: it may hold one, and taking it for none would
    /// make `kc vault status` say "none" and writes silently stop being saved. So the
    /// vault's own checks (``checkOwnership()``) run and refuse it, loudly, with the fix.
    var exists: Bool {
        guard isPresent(root) else { return false }
        return isPresent(recipientFile) || isPresent(identityFile) || rootIsRefused
    }

    /// Whether the vault's folder is there but is not one kc would use as the caller's:
    /// not a folder, another uid's, or open to group or others.
    var rootIsRefused: Bool {
        guard let info = try? status(of: root) else { return false }
        return (info.st_mode & S_IFMT) != S_IFDIR || info.st_uid != owner || info.st_mode & 0o077 != 0
    }

    private func isPresent(_ path: VaultPath) -> Bool {
        let fd = openInside(path, flags: O_PATH)
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }

    // MARK: Opening without crossing a mount

    /// Opens a file or folder of the vault, not following a link at the end, as
    /// `open(2)` does, and returns its descriptor or -1 with errno set. Below the root
    /// the walk starts from the root and never crosses a mount point (``openBeneath``):
    /// EXDEV if one is on the way, the last name included; ELOOP for a link on the way.
    /// The root itself (and a path outside it) is opened by its path.
    ///
    /// A user can mount a filesystem of theirs anywhere in their vault folder, and one
    /// whose daemon is stopped makes every call that reaches it wait for ever (root's
    /// boot load, above all). So every look at an entry below the root goes through
    /// here: an `O_PATH` descriptor and `fstat` instead of `lstat`, this and
    /// `fdopendir` instead of `opendir`.
    func openInside(_ path: VaultPath, flags: Int32, mode: mode_t = 0) -> Int32 {
        let below = root.bytes + [UInt8(ascii: "/")]
        guard path.bytes.count > below.count, path.bytes.starts(with: below) else {
            return (try? path.withCString { open($0, flags | O_NOFOLLOW | O_CLOEXEC, mode) }) ?? -1
        }
        guard let rootFD = try? root.withCString({ open($0, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }), rootFD >= 0 else {
            return -1
        }
        let fd = openBeneath(rootFD, Array(path.bytes[below.count...]), flags: flags, mode: mode)
        let saved = errno
        close(rootFD)
        errno = saved
        return fd
    }

    /// The mount point that made ``openInside(_:flags:mode:)`` refuse `path` (EXDEV):
    /// `path` itself or the first folder on the way to it that is one.
    private func mountPoint(on path: VaultPath) -> VaultPath {
        var prefix = root
        for component in path.bytes[root.bytes.count...].split(separator: UInt8(ascii: "/")) {
            prefix = prefix.appending(bytes: Array(component))
            let fd = openInside(prefix, flags: O_PATH)
            if fd >= 0 { close(fd) } else if errno == EXDEV { return prefix }
        }
        return path
    }

    /// Why kc did not open `path`: another filesystem is mounted on it, or on a folder
    /// on the way to it, inside the vault. The fix unmounts, never removes anything.
    private func mountedInside(_ path: VaultPath) -> KeychainError {
        let mount = mountPoint(on: path)
        let whatIsThere = mount == path ? "is a mount point" : "is under \(mount), a mount point"
        return .vaultUnsafe(path: path.description,
                            problem: "\(whatIsThere): another filesystem is mounted in the vault folder, and kc does not look into it (a filesystem whose daemon is stopped would make kc wait for ever)",
                            fix: "unmount it ('fusermount3 -u \(mount)', or as root 'umount \(mount)'), then try again")
    }

    /// Refuses a vault folder that is not a real folder of the caller's with mode 0700:
    /// another user could read names, replace files, or plant items.
    /// The folders above it are checked too (``checkFoldersAbove()``).
    func checkOwnership() throws(KeychainError) {
        let info = try status(of: root)
        guard let info else { throw .vaultNotInitialized(path: root.description) }
        try check(info, of: root, isFolder: true)
        try checkFoldersAbove()
    }

    /// Refuses a vault under a folder that someone else could change, as OpenSSH's
    /// StrictModes does: whoever can write in a folder on the way can move the vault
    /// away and put one of theirs in its place (kc would then save new items to their
    /// key, and load their items). Each folder above the vault, links resolved, must be
    /// root's or the owner's and not writable by group or others, except a sticky
    /// folder such as /tmp, where nobody can move another's entries: there the next
    /// folder must be the owner's own. Inside a user namespace (`podman unshare`,
    /// rootless podman's secret driver) the folders of uids it does not map, root's
    /// among them, show as the overflow uid (65534): such a folder counts as root's,
    /// since from inside it cannot be told apart (the other rules still hold).
    func checkFoldersAbove() throws(KeychainError) {
        guard let resolved = try root.parent.withCString({ realpath($0, nil) }) else { return }  // no parent: no vault either
        let real = VaultPath(bytes: cStringBytes(resolved))
        free(resolved)
        var folder = VaultPath("/")
        var components = real.bytes.split(separator: UInt8(ascii: "/")).map(Array.init)[...]
        var stickyAbove: VaultPath? = nil
        while true {
            guard let info = try folder.withCString({ path -> stat? in
                var info = stat()
                return stat(path, &info) == 0 ? info : nil
            }) else { return }  // moved meanwhile: the vault's own checks report it
            // Named only for a refusal: the static kc reads /etc/passwd to name a uid.
            var whose: String { Accounts.name(ofUser: info.st_uid) ?? String(info.st_uid) }
            if let sticky = stickyAbove, info.st_uid != owner {
                throw .vaultUnsafe(path: folder.description, problem: "(above the vault) is in the shared folder \(sticky) but belongs to \(whose), not to you",
                                   fix: "keep the vault under a folder of your own there (set XDG_DATA_HOME)")
            }
            guard info.st_uid == 0 || info.st_uid == owner || info.st_uid == Self.unmappedOwner else {
                throw .vaultUnsafe(path: folder.description, problem: "(above the vault) belongs to \(whose), who could move the vault away and put another in its place",
                                   fix: "keep the vault under folders of yours (set XDG_DATA_HOME)")
            }
            let openToOthers = info.st_mode & 0o022 != 0
            if openToOthers && info.st_mode & S_ISVTX == 0 {
                let mode = String(info.st_mode & 0o7777, radix: 8)
                throw .vaultUnsafe(path: folder.description, problem: "(above the vault) has mode \(mode): group or others can write in it, and so move the vault away and put another in its place",
                                   fix: "run 'chmod go-w \(folder)', or keep the vault elsewhere (set XDG_DATA_HOME)")
            }
            stickyAbove = openToOthers ? folder : nil
            guard let next = components.popFirst() else { return }
            folder = folder.bytes == [UInt8(ascii: "/")] ? VaultPath(bytes: [UInt8(ascii: "/")] + next) : folder.appending(bytes: next)
        }
    }

    /// The fixes never remove anything inside the vault: a folder or file there holds
    /// saved items, so the fix is to make it the owner's own again.
    private func check(_ info: stat, of path: VaultPath, isFolder: Bool) throws(KeychainError) {
        let inside = path != root
        let kind = info.st_mode & S_IFMT
        guard kind == (isFolder ? S_IFDIR : S_IFREG) else {
            throw .vaultUnsafe(path: path.description, problem: isFolder ? "is not a folder (a link or a file)" : "is not a regular file (a link?)",
                               fix: inside ? "move it out of the vault folder (kc makes what it needs again)" : "move it away and run 'kc vault init'")
        }
        guard info.st_uid == owner else {
            let owner = Accounts.name(ofUser: info.st_uid) ?? String(info.st_uid)
            let you = Accounts.name(ofUser: self.owner) ?? String(self.owner)
            let takeBack = "sudo chown \(isFolder ? "-R " : "")\(you): \(path)"
            throw .vaultUnsafe(path: path.description, problem: "belongs to \(owner), not to you",
                               fix: inside ? "check what is in it (another user put it there or changed it), then take it back: \(takeBack)"
                                           : "use your own vault (set XDG_DATA_HOME), or if it is yours take it back: \(takeBack)")
        }
        guard info.st_mode & 0o077 == 0 else {
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw .vaultUnsafe(path: path.description, problem: "has mode \(mode): other users may read or change it",
                               fix: "run 'chmod \(isFolder ? "700" : "600") \(path)' and check nothing was changed")
        }
    }

    /// Why kc will not use this folder of the vault (another uid's, open to others, not
    /// a folder), as the error a write there throws; nil if it may, or if there is none.
    func unusableFolder(_ folder: VaultPath) -> KeychainError? {
        do throws(KeychainError) {
            guard let info = try status(of: folder) else { return nil }
            try check(info, of: folder, isFolder: true)
            return nil
        } catch {
            return error
        }
    }

    /// What `lstat` says of `path`, but from an `O_PATH` descriptor opened without
    /// crossing a mount (``openInside(_:flags:mode:)``); nil if there is nothing there.
    func status(of path: VaultPath) throws(KeychainError) -> stat? {
        let fd = openInside(path, flags: O_PATH)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw failure(Errno(rawValue: errno), action: "look at", path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(Errno(rawValue: errno), action: "look at", path) }
        return info
    }

    // MARK: Reading

    /// A whole file of the vault, refused if it is not the caller's own regular file
    /// with mode 0600 (or stricter). Nil if there is no such file.
    /// Files over `limit` bytes are refused before anything is allocated (an item file
    /// is at most a few KiB over the largest value).
    func read(_ path: VaultPath, limit: Int = 1 << 20) throws(KeychainError) -> [UInt8]? {
        let fd = openInside(path, flags: O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw failure(Errno(rawValue: errno), action: "open", path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw .vaultIOFailed(path: path.description, action: "look at", reason: Errno(rawValue: errno).description)
        }
        try check(info, of: path, isFolder: false)
        guard info.st_size <= limit else {
            throw .vaultUnsafe(path: path.description, problem: "is \(info.st_size) bytes, more than a vault file can be", fix: "move it out of the vault folder")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while true {
            if filled == bytes.count { bytes.append(contentsOf: [UInt8](repeating: 0, count: 4096)) }
            let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .vaultIOFailed(path: path.description, action: "read", reason: Errno(rawValue: errno).description)
            }
            if count == 0 { break }
            filled += count
            guard filled <= limit else {
                throw .vaultUnsafe(path: path.description, problem: "grew past \(limit) bytes while being read", fix: "move it out of the vault folder")
            }
        }
        bytes.removeLast(bytes.count - filled)
        return bytes
    }

    /// The names in a folder kc may use (``isOwnFolder(_:)``), without `.` and `..`;
    /// empty if there is no such folder.
    func entries(of folder: VaultPath) -> [[UInt8]] {
        guard isOwnFolder(folder) else { return [] }
        return names(in: folder)
    }

    /// ``entries(of:)``, where a folder kc will not use is reported in `skipped` (its
    /// path, what is wrong and the fix) rather than passed over in silence.
    func entries(of folder: VaultPath, skipped: inout [VaultUnlockReport.Problem]) -> [[UInt8]] {
        if let problem = unusableFolder(folder) {
            skipped.append(VaultUnlockReport.Problem(folder, problem))
            return []
        }
        return names(in: folder)  // checked just now: no second lstat
    }

    /// The names in any folder that can be read, kc's to use or not: what is there.
    func names(in folder: VaultPath) -> [[UInt8]] {
        let fd = openInside(folder, flags: O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return [] }
        guard let stream = fdopendir(fd) else {
            close(fd)
            return []
        }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix(while: { $0 != 0 }))
            }
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            names.append(name)
        }
        return names
    }

    // MARK: Writing

    /// Whether `folder` is a real folder (not a link) of the vault's owner that nobody
    /// else can use: kc never lists, fills or empties anything else.
    func isOwnFolder(_ folder: VaultPath) -> Bool {
        guard let info = try? status(of: folder) else { return false }
        return info.st_mode & S_IFMT == S_IFDIR && info.st_uid == owner && info.st_mode & 0o077 == 0
    }

    /// A new file written whole to `tmp/` and flushed to disk, not yet in place.
    struct StagedFile {
        let path: VaultPath
    }

    /// Writes `bytes` to a new file in `tmp/` (0600) and fsyncs it. A full disk or
    /// quota fails here, before anything else changed.
    /// `target`'s folder is made first too, so that a full disk fails here, before the
    /// kernel changes, and not at ``commit(_:to:)``.
    /// Its name begins with `prefix`.
    func stage(_ bytes: [UInt8], for target: VaultPath? = nil, prefix: String = "new-") throws(KeychainError) -> StagedFile {
        try makeFolder(temporaryFolder)
        if let target { try checkReplaceable(target) }
        var generator = SystemRandomNumberGenerator()
        let name = prefix + String(generator.next() as UInt64, radix: 36) + String(generator.next() as UInt64, radix: 36)
        let path = temporaryFolder.appending(name)
        let fd = openInside(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        guard fd >= 0 else { throw failure(Errno(rawValue: errno), action: "create", path) }
        var failure: Errno? = nil
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let count = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    failure = Errno(rawValue: errno)
                    return
                }
                offset += count
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = Errno(rawValue: errno) }
        if close(fd) != 0, failure == nil, errno != EINTR { failure = Errno(rawValue: errno) }
        if let failure {
            remove(path)
            throw self.failure(failure, action: "write", path)
        }
        return StagedFile(path: path)
    }

    /// The owner a folder shows inside a user namespace when its owner is not mapped
    /// there (`kernel.overflowuid`); nil outside one.
    private static let unmappedOwner: uid_t? = UserNamespace.outsideUID == nil ? nil : readSysctl("kernel/overflowuid").map { uid_t($0) }

    /// A file or folder of the vault could not be looked at, made or written: a disk
    /// with no room left is said so (``KeychainError/vaultFull(path:reason:)``, ENOSPC
    /// through the mount), a mount point or a link on the way is refused as unsafe, and
    /// anything else is an I/O failure of that path.
    private func failure(_ errno: Errno, action: String, _ path: VaultPath) -> KeychainError {
        if errno == .noSpace || errno == .diskQuotaExceeded { return .vaultFull(path: root.description, reason: errno.description) }
        if errno == .improperLink { return mountedInside(path) }
        if errno == .tooManySymbolicLinkLevels {
            return .vaultUnsafe(path: path.description, problem: "is a symbolic link", fix: "remove the link")
        }
        return .vaultIOFailed(path: path.description, action: action, reason: errno.description)
    }

    /// Refuses now (``KeychainError/vaultFull(path:reason:)``) when the vault's disk
    /// clearly has no room for a new file of about `size` bytes: no inode left, or fewer
    /// free blocks than the file needs and one more (its folder may be new). A writer that
    /// learns the size before it stores (the mount, at each write(2)) asks, so it is told
    /// at the write and not only when the file is staged. Where statvfs cannot tell,
    /// staging still fails on a full disk, before the kernel changes.
    func checkRoom(forFileOf size: Int) throws(KeychainError) {
        var info = statvfs()
        guard (try root.withCString { statvfs($0, &info) }) == 0 else { return }
        if info.f_files > 0 && info.f_favail == 0 {
            throw .vaultFull(path: root.description, reason: "no inode left")
        }
        let block = max(Int(info.f_frsize), 1)
        let needed = (size + block - 1) / block * block + block
        let free = Int(clamping: info.f_bavail).multipliedReportingOverflow(by: block)
        if !free.overflow && free.partialValue < needed {
            throw .vaultFull(path: root.description, reason: "\(free.partialValue) bytes free, a file of \(size) bytes needs \(needed)")
        }
    }

    /// That the commit's rename to `target` can be made: its folder exists and can be
    /// written in, and nothing but a file is in its place. Checked when staging, before
    /// the kernel changes, so a commit does not fail after it for these causes.
    private func checkReplaceable(_ target: VaultPath) throws(KeychainError) {
        try makeFolder(target.parent)
        let writable = try target.parent.withCString { access($0, W_OK | X_OK) == 0 }
        guard writable else {
            throw .vaultIOFailed(path: target.parent.description, action: "write in", reason: Errno(rawValue: errno).description)
        }
        let kind = try status(of: target).map { $0.st_mode & S_IFMT }
        if let kind, kind != S_IFREG, kind != S_IFLNK {
            throw .vaultUnsafe(path: target.description, problem: "is not a file (a folder or another kind of entry is in its place)",
                               fix: "move it away, then try again")
        }
    }

    /// Writes `bytes` over an existing small file of the owner's, in place (no new file,
    /// so no new block on a full disk), and cuts it to their length. Only for a file
    /// whose torn state is harmless to read (the status file); false if it could not.
    @discardableResult
    func overwrite(_ path: VaultPath, with bytes: [UInt8]) -> Bool {
        let fd = openInside(path, flags: O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == owner else { return false }
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return written == bytes.count && ftruncate(fd, off_t(bytes.count)) == 0 && fsync(fd) == 0
    }

    /// Puts a staged file in place (`rename`, which replaces atomically) and fsyncs the
    /// folder, so after a crash the folder names either the old file or the new one.
    func commit(_ staged: StagedFile, to path: VaultPath) throws(KeychainError) {
        do {
            try makeFolder(path.parent)
        } catch {
            remove(staged.path)
            throw error
        }
        let renamed = try staged.path.withCString { from throws(KeychainError) in
            try path.withCString { to in rename(from, to) }
        }
        guard renamed == 0 else {
            let reason = Errno(rawValue: errno).description
            remove(staged.path)
            throw .vaultIOFailed(path: path.description, action: "replace", reason: reason)
        }
        syncFolder(path.parent)
    }

    /// Removes a file, fsyncing its folder; false if there was none.
    @discardableResult
    func remove(_ path: VaultPath) -> Bool {
        let removed = (try? path.withCString { unlink($0) == 0 }) ?? false
        if removed { syncFolder(path.parent) }
        return removed
    }

    /// Removes a folder and everything in it (a service's items at one level).
    func removeTree(_ folder: VaultPath) {
        guard isOwnFolder(folder) else {
            _ = try? folder.withCString { unlink($0) }  // a link or a file in its place: only the entry goes
            return
        }
        for name in entries(of: folder) {
            let child = folder.appending(bytes: name)
            if (try? child.withCString({ unlink($0) == 0 })) != true { removeTree(child) }
        }
        _ = try? folder.withCString { rmdir($0) }
    }

    /// Removes a folder if it is empty (a service's last item at a level is gone).
    func removeIfEmpty(_ folder: VaultPath) {
        _ = try? folder.withCString { rmdir($0) }
    }

    /// Makes a folder, and any missing parent, with mode 0700 (as the XDG base
    /// directory spec asks for `$XDG_DATA_HOME`: a new user may have no ~/.local/share).
    func makeFolder(_ folder: VaultPath) throws(KeychainError) {
        var made = try folder.withCString { mkdir($0, 0o700) }
        if made != 0, errno == ENOENT, folder.parent != folder, folder.bytes.count > 1 {
            try makeFolder(folder.parent)
            made = try folder.withCString { mkdir($0, 0o700) }
        }
        if made == 0 || errno == EEXIST {
            // Inside the vault every folder must be the owner's own, not a link a
            // careless chmod let someone plant (kc would write through it, or empty it).
            let inside = folder.bytes.count > root.bytes.count && folder.bytes.starts(with: root.bytes)
            if inside, let problem = unusableFolder(folder) { throw problem }
            return
        }
        throw failure(Errno(rawValue: errno), action: "create", folder)
    }

    private func syncFolder(_ folder: VaultPath) {
        let fd = openInside(folder, flags: O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    // MARK: Locking

    /// Runs `body` holding the vault's lock (`flock` on `lock`, exclusive), so a write's
    /// kernel change and file change are not interleaved with another writer's: the
    /// last writer wins in both. `body` gets this directory holding the lock: what it
    /// does through that value, a nested ``withLock(_:)`` included, runs under this
    /// lock (a second `flock` of the file from this process would wait for ever). On a
    /// directory that holds the lock already, `body` runs at once.
    func withLock<R>(_ body: (_ held: VaultDirectory) throws(KeychainError) -> R) throws(KeychainError) -> R {
        if holdsLock { return try body(self) }
        let fd = openInside(lockFile, flags: O_RDWR | O_CREAT, mode: 0o600)
        guard fd >= 0 else { throw failure(Errno(rawValue: errno), action: "open", lockFile) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == owner, info.st_mode & 0o077 == 0 else {
            throw .vaultUnsafe(path: lockFile.description, problem: "is not a file of yours with mode 0600", fix: "remove it (kc makes it again)")
        }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw .vaultIOFailed(path: lockFile.description, action: "lock", reason: Errno(rawValue: errno).description)
            }
        }
        var held = self
        held.heldLock = VaultLock()
        return try body(held)
    }
}

/// The vault's lock, held: made only by ``VaultDirectory/withLock(_:)``, for the
/// directory it hands its body. Reentrancy is a value passed down, not a lookup: a
/// write under the lock (a write of the keychain's, a document's save with the kernel
/// change beside it) is given the vault that holds it.
internal struct VaultLock: Sendable {
    fileprivate init() {}
}
