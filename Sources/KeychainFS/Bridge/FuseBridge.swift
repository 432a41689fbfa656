import Keyrings
import KernelKeychain
import SystemPackage
internal import CFuse3

#if canImport(Glibc)
import Glibc
#endif

/// Turns FUSE requests into calls on ``KeychainFilesystem`` and their results into
/// ``Reply`` values. Owns the inode table and the open handles; the trampolines reach
/// it through the session's userdata.
final class FuseBridge: Sendable {
    let filesystem: KeychainFilesystem
    let inodes = InodeTable()
    let handles = OpenHandles()
    /// When the mount started: keys have no timestamps, so every node shows this time.
    let mountedAt: timespec
    /// The mount's ids in this mount namespace (/proc/self/mountinfo: the mount and its
    /// bind mounts), which a process's /proc/PID/fdinfo names for a file of this
    /// filesystem; set once mounted (``OwnMounts``).
    let mountIDs = Locked<Set<Int>>([])

    init(filesystem: KeychainFilesystem) {
        self.filesystem = filesystem
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        mountedAt = now
    }

    private func node(_ number: UInt64) throws(FilesystemError) -> Node {
        guard let node = inodes.node(number) else { throw FilesystemError(.noSuchFileOrDirectory) }
        return node
    }

    /// A file's attributes; `handle`, the open file a request named (the kernel names
    /// one for some internal requests; `fstat` arrives without one, as `stat` does).
    ///
    /// Each open for writing has its own copy, stored when it closes (the last close
    /// wins), and a read sees the stored value until then. So a file's size is the stored
    /// value's, what a read returns now; a request through a writer's handle sees its
    /// copy's; and a file created by a writer that has not closed yet has the largest
    /// pending size.
    private func attributes(of node: Node, handle: UInt64? = nil) throws -> NodeAttributes {
        if let handle, let pending = handles.file(handle)?.pending, pending.node == node, !pending.isUnlinked {
            return try filesystem.attributes(of: node, pendingSize: pending.size)
        }
        guard let pendingSize = handles.pendingSize(of: node) else { return try filesystem.attributes(of: node) }
        do {
            return try filesystem.attributes(of: node)
        } catch let error as FilesystemError where error.errno == .noSuchFileOrDirectory {
            return try filesystem.attributes(of: node, pendingSize: pendingSize)
        }
    }

    // MARK: Names

    func lookup(parent: UInt64, name: KeyName) throws -> Reply {
        let child = try filesystem.child(of: node(parent), named: name)
        let attributes = try attributes(of: child)
        return .entry(number: inodes.remember(child), attributes: attributes)
    }

    func forget(_ number: UInt64, count: UInt64) -> Reply {
        inodes.forget(number, count: count)
        return .none
    }

    func getattr(_ number: UInt64, handle: UInt64? = nil) throws -> Reply {
        .attributes(number: number, attributes: try attributes(of: node(number), handle: handle))
    }

    /// Size changes resize the open copy or the stored value; mode and owner may only
    /// be "changed" to what they are (cp -p, sed -i); times are accepted and ignored
    /// (the kernel keeps none for keys).
    func setattr(_ number: UInt64, size: Int?, mode: UInt32?, uid: UInt32?, gid: UInt32?, handle: UInt64?) throws -> Reply {
        let node = try node(number)
        let current = try attributes(of: node)
        if let mode, mode & 0o7777 != current.permissions { throw FilesystemError(.notPermitted) }
        if let uid, uid != current.uid { throw FilesystemError(.notPermitted) }
        if let gid, gid != current.gid { throw FilesystemError(.notPermitted) }
        if let size {
            guard !node.isDirectory else { throw FilesystemError(.isDirectory) }
            if filesystem.configuration.readOnly { throw FilesystemError(.readOnlyFileSystem) }
            if let handle, let pending = handles.file(handle)?.pending {
                try pending.resize(to: size)
            } else if !handles.pending(node).isEmpty {
                for pending in handles.pending(node) { try pending.resize(to: size) }
            } else {
                try filesystem.resize(node, to: size)
            }
        }
        return .attributes(number: number, attributes: try attributes(of: node))
    }

    // MARK: Files

    /// `caller` is the thread id the kernel names in the request, `callerUID` its uid
    /// (for the audit log of `kc mount --audit`).
    func open(_ number: UInt64, flags: Int32, caller: Int32, callerUID: UInt32 = 0) throws -> Reply {
        let node = try node(number)
        guard !node.isDirectory else { throw FilesystemError(.isDirectory) }
        let accessMode = flags & O_ACCMODE
        let writable = accessMode == O_WRONLY || accessMode == O_RDWR
        // The kernel checks modes only with --allow-other, so refuse here what 0400 shows.
        if writable && (filesystem.configuration.readOnly || node.isShared) { throw FilesystemError(.readOnlyFileSystem) }
        let file: OpenFile
        if writable {
            let truncate = flags & O_TRUNC != 0
            // The file is an item (lookup found it) or a new file still being written,
            // which this open creates too if its close comes first.
            let newItem = handles.pending(node).first(where: { $0.newItem != nil })?.newItem
            // Without O_TRUNC (`>>`, `1<>`) the copy starts from the stored value: of a
            // new file, nothing. Its creator's copy is not the item until stored whole;
            // starting from it stored a mix nobody wrote ("half-" + "X").
            var bytes: [UInt8] = []
            if !truncate {
                do {
                    bytes = try filesystem.contents(of: node)
                } catch where newItem != nil && Errno(reporting: error) == .noSuchFileOrDirectory {}
            }
            let pending = PendingWrite(node: node, bytes: bytes, dirty: truncate, newItem: newItem, appends: flags & O_APPEND != 0)
            file = OpenFile(writing: pending, opener: threadGroup(of: caller))
        } else {
            // The stored value and nothing else: another open's copy is not the item's
            // until its close stores it whole. A new file whose writer has not closed
            // yet (`printf v > f` between its open and its close, when it held nothing
            // or only part of v) is absent to a reader, ENOENT, as an item being saved
            // reads as its old value: never empty, never half (issue 35).
            file = OpenFile(reading: try filesystem.contents(of: node), opener: 0)
        }
        if filesystem.configuration.auditsReads {
            auditOpen(of: node, accessMode: accessMode, caller: caller, callerUID: callerUID)
        }
        // One FUSE round trip fewer per close of a file opened only to read.
        return .open(handle: handles.add(file), directIO: true, noFlush: !writable)
    }

    /// One audit line per open of an item file: who opened which item, and how.
    private func auditOpen(of node: Node, accessMode: Int32, caller: Int32, callerUID: UInt32) {
        let service: KeyName, item: KeyName
        switch node {
        case .item(let itemService, let name):
            (service, item) = (itemService, name)
        case .sharedItem(let owner, let itemService, let name):
            (service, item) = (KeyName("shared/\(owner)/") + itemService, name)
        default:
            return
        }
        let access = accessMode == O_WRONLY ? "write" : accessMode == O_RDWR ? "read-write" : "read"
        ReadAudit.record(ItemRead(via: "mount", service: service, item: item,
                                  readerPID: threadGroup(of: caller), readerUID: callerUID, access: access))
    }

    func create(parent: UInt64, name: KeyName, flags: Int32 = O_WRONLY, caller: Int32) throws -> Reply {
        if filesystem.configuration.readOnly { throw FilesystemError(.readOnlyFileSystem) }
        let child = try filesystem.child(of: node(parent), named: name)
        if child.isShared { throw FilesystemError(.readOnlyFileSystem) }
        guard !child.isDirectory else { throw FilesystemError(.notPermitted) }
        // A new item needs a key and a vault file: say so now if the quota has none left
        // or the vault's disk no room (a shell ignores what close reports).
        try filesystem.checkRoom(forNewItem: child)
        try filesystem.checkVaultRoom(for: child, size: 1)
        // The item is stored when the file is closed; until then stat shows the copy.
        let newItem = handles.pending(child).first(where: { $0.newItem != nil })?.newItem ?? filesystem.newItemAttributes(for: child)
        let pending = PendingWrite(node: child, bytes: [], dirty: true, newItem: newItem, appends: flags & O_APPEND != 0)
        let handle = handles.add(OpenFile(writing: pending, opener: threadGroup(of: caller)))
        let attributes = try filesystem.attributes(of: child, pendingSize: 0)
        return .create(number: inodes.remember(child), attributes: attributes, handle: handle)
    }

    func read(handle: UInt64, size: Int, offset: Int) throws(FilesystemError) -> Reply {
        guard let file = handles.file(handle) else { throw FilesystemError(.badFileDescriptor) }
        return .bytes(file.read(offset: offset, count: size))
    }

    func write(handle: UInt64, data: UnsafeRawBufferPointer, offset: Int) throws(FilesystemError) -> Reply {
        guard let pending = handles.file(handle)?.pending else { throw FilesystemError(.badFileDescriptor) }
        try pending.write(data, offset: offset) { (checked, size) throws(FilesystemError) in
            try filesystem.checkRoom(growing: checked, to: size)
            // A full vault disk fails the write(2) itself: a shell ignores close's error.
            try filesystem.checkVaultRoom(for: pending.node, size: size)
        }
        return .written(data.count)
    }

    /// close(2) of one descriptor. The opener's close stores the value now, and an error
    /// reaches its close. Another process's close of an inherited copy stores nothing,
    /// nor does the opener's if a signal killed it.
    ///
    /// A shell's `>` opens the file, moves the descriptor to 1 (`dup2`) and closes the
    /// first one before anything is written: that close must not store the empty value
    /// `O_TRUNC` left (readers would see the item empty), so a flush of a value nothing
    /// was written to yet stores nothing while the opener still has the file open; its
    /// last close stores. (`touch f` and `: > f` store the empty item at their close.)
    /// `inode` is the file's number, for that check (nil: none is made).
    func flush(handle: UInt64, caller: Int32, inode: UInt64? = nil) throws -> Reply {
        guard let file = handles.file(handle), let pending = file.pending else { return .success }
        guard threadGroup(of: caller) == file.opener else { return .success }
        if let inode, pending.isUntouchedEmpty,
           OwnMounts.process(file.opener, mayHoldInode: inode, onMounts: mountIDs.withLock { $0 }) {
            return .success
        }
        // A writer killed mid-write closes its files on the way out: its half value is
        // dropped, and the old value stays.
        if killedBySignal(caller) {
            pending.abandon()
            return .success
        }
        try pending.commit(to: filesystem)
        return .success
    }

    /// fsync(2): store now, whoever asks.
    func fsync(handle: UInt64) throws -> Reply {
        try handles.file(handle)?.pending?.commit(to: filesystem)
        return .success
    }

    /// The last close of an open file: what is still pending (written by a process
    /// that inherited the descriptor after the opener closed) is stored.
    func release(handle: UInt64) -> Reply {
        guard let file = handles.removeFile(handle) else { return .success }
        file.discard()
        if let pending = file.pending {
            try? pending.commit(to: filesystem)
            pending.discard()
        }
        return .success
    }

    func unlink(parent: UInt64, name: KeyName) throws -> Reply {
        let child = try filesystem.child(of: node(parent), named: name)
        let wasOpen = handles.unlinkPending(child)
        do {
            try filesystem.remove(child)
        } catch where wasOpen && Errno(reporting: error) == .noSuchFileOrDirectory {
            // A new file not stored yet: removing it was enough.
        }
        return .success
    }

    func rename(parent: UInt64, name: KeyName, newParent: UInt64, newName: KeyName, flags: UInt32) throws -> Reply {
        let source = try filesystem.child(of: node(parent), named: name)
        let target = try filesystem.child(of: node(newParent), named: newName)
        if flags & renameExchange != 0 { throw FilesystemError(.invalidArgument) }
        let replacing = flags & renameNoReplace == 0
        do {
            try filesystem.rename(source, to: target, replacing: replacing)
        } catch where Errno(reporting: error) == .noSuchFileOrDirectory && !handles.pending(source).isEmpty {
            // A new file not stored yet: only its pending write moves.
            if !replacing, (try? attributes(of: target)) != nil { throw FilesystemError(.fileExists) }
        }
        handles.renamePending(source, to: target)
        inodes.renamed(source, to: target)
        return .success
    }

    // MARK: Directories

    func mkdir(parent: UInt64, name: KeyName) throws -> Reply {
        let child = try filesystem.child(of: node(parent), named: name)
        try filesystem.makeDirectory(child)
        return .entry(number: inodes.remember(child), attributes: try attributes(of: child))
    }

    func rmdir(parent: UInt64, name: KeyName) throws -> Reply {
        let child = try filesystem.child(of: node(parent), named: name)
        try filesystem.removeDirectory(child)
        inodes.detach(child)
        return .success
    }

    func opendir(_ number: UInt64) throws -> Reply {
        let node = try node(number)
        guard node.isDirectory else { throw FilesystemError(.notDirectory) }
        var entries = [OpenDirectory.Entry(name: ".", number: number, isDirectory: true),
                       OpenDirectory.Entry(name: "..", number: InodeTable.rootNumber, isDirectory: true)]
        for (name, child) in try filesystem.entries(of: node) {
            entries.append(OpenDirectory.Entry(name: name, number: inodes.peek(child), isDirectory: child.isDirectory))
        }
        return .open(handle: handles.add(OpenDirectory(entries: entries)), directIO: false, noFlush: false)
    }

    func readdir(handle: UInt64, size: Int, offset: Int) throws(FilesystemError) -> Reply {
        guard let directory = handles.directory(handle) else { throw FilesystemError(.badFileDescriptor) }
        return .directory(directory, offset: offset, maxSize: size)
    }

    func releasedir(handle: UInt64) -> Reply {
        handles.removeDirectory(handle)
        return .success
    }

    func statfs() -> Reply {
        .statistics(filesystem.statistics())
    }

    // MARK: Extended attributes

    func getxattr(_ number: UInt64, name: String, size: Int) throws -> Reply {
        let node = try node(number)
        let text: String
        if let newItem = handles.pending(node).lazy.compactMap(\.newItem).first, name != KeychainFilesystem.serialAttribute,
           filesystem.extendedAttributeNames(of: node).contains(name) {
            text = try newItem.value(of: name)  // not an item yet: what it will be
        } else {
            text = try filesystem.extendedAttribute(name, of: node)
        }
        return sized(Array(text.utf8), limit: size)
    }

    func listxattr(_ number: UInt64, size: Int) throws(FilesystemError) -> Reply {
        let names = filesystem.extendedAttributeNames(of: try node(number))
        return sized(names.flatMap { Array($0.utf8) + [0] }, limit: size)
    }

    func setxattr(_ number: UInt64, name: String, value: String) throws -> Reply {
        let node = try node(number)
        if filesystem.configuration.readOnly || node.isShared { throw FilesystemError(.readOnlyFileSystem) }
        // A file not stored yet takes the attribute when it is (cp -a, mv across filesystems).
        let creating = handles.pending(node).filter { $0.newItem != nil }
        if !creating.isEmpty {
            for pending in creating { _ = try pending.setAttribute(name, to: value) }
            return .success
        }
        try filesystem.setExtendedAttribute(name, to: value, of: node)
        return .success
    }

    func removexattr(_ number: UInt64, name: String) throws -> Reply {
        guard name == KeychainFilesystem.timeoutAttribute else { throw FilesystemError(.notPermitted) }
        try filesystem.setExtendedAttribute(name, to: "0", of: node(number))
        return .success
    }

    /// getxattr/listxattr: size 0 asks for the length; a short buffer is ERANGE.
    private func sized(_ value: [UInt8], limit: Int) -> Reply {
        if limit == 0 { return .attributeSize(value.count) }
        if limit < value.count { return .error(.outOfRange) }
        return .bytes(value)
    }
}

// renameat2(2) flags, from <linux/fs.h> (not exported by Glibc's module).
private let renameNoReplace: UInt32 = 1 << 0
private let renameExchange: UInt32 = 1 << 1
