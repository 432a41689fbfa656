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

    init(filesystem: KeychainFilesystem) {
        self.filesystem = filesystem
    }

    private func node(_ number: UInt64) throws(FilesystemError) -> Node {
        guard let node = inodes.node(number) else { throw FilesystemError(.noSuchFileOrDirectory) }
        return node
    }

    private func attributes(of node: Node) throws(FilesystemError) -> NodeAttributes {
        try filesystem.attributes(of: node, pendingSize: handles.pendingSize(of: node))
    }

    // MARK: Names

    func lookup(parent: UInt64, name: String) throws(FilesystemError) -> Reply {
        let child = try filesystem.child(of: node(parent), named: name)
        let attributes = try attributes(of: child)
        return .entry(number: inodes.remember(child), attributes: attributes)
    }

    func forget(_ number: UInt64, count: UInt64) -> Reply {
        inodes.forget(number, count: count)
        return .none
    }

    func getattr(_ number: UInt64) throws(FilesystemError) -> Reply {
        .attributes(number: number, attributes: try attributes(of: node(number)))
    }

    /// Size changes resize the open copy or the stored value; mode and owner may only
    /// be "changed" to what they are (cp -p, sed -i); times are accepted and ignored
    /// (the kernel keeps none for keys).
    func setattr(_ number: UInt64, size: Int?, mode: UInt32?, uid: UInt32?, gid: UInt32?, handle: UInt64?) throws(FilesystemError) -> Reply {
        let node = try node(number)
        let current = try attributes(of: node)
        if let mode, mode & 0o7777 != current.permissions { throw FilesystemError(.notPermitted) }
        if let uid, uid != current.uid { throw FilesystemError(.notPermitted) }
        if let gid, gid != current.gid { throw FilesystemError(.notPermitted) }
        if let size {
            guard !node.isDirectory else { throw FilesystemError(.isDirectory) }
            if filesystem.configuration.readOnly { throw FilesystemError(.readOnlyFileSystem) }
            if let handle, let file = handles.file(handle) {
                try file.resize(to: size)
            } else {
                try filesystem.resize(node, to: size)
            }
        }
        return .attributes(number: number, attributes: try attributes(of: node))
    }

    // MARK: Files

    func open(_ number: UInt64, flags: Int32) throws(FilesystemError) -> Reply {
        let node = try node(number)
        guard !node.isDirectory else { throw FilesystemError(.isDirectory) }
        let accessMode = flags & O_ACCMODE
        let writable = accessMode == O_WRONLY || accessMode == O_RDWR
        // The kernel checks modes only with --allow-other, so refuse here what 0400 shows.
        if writable && (filesystem.configuration.readOnly || node.isShared) { throw FilesystemError(.readOnlyFileSystem) }
        let truncate = writable && flags & O_TRUNC != 0
        let bytes = truncate ? [] : try filesystem.contents(of: node)
        let file = OpenFile(node: node, bytes: bytes, writable: writable, dirty: truncate)
        // One FUSE round trip fewer per close of a file opened only to read.
        return .open(handle: handles.add(file), directIO: true, noFlush: !writable)
    }

    func create(parent: UInt64, name: String) throws(FilesystemError) -> Reply {
        if filesystem.configuration.readOnly { throw FilesystemError(.readOnlyFileSystem) }
        let child = try filesystem.child(of: node(parent), named: name)
        if child.isShared { throw FilesystemError(.readOnlyFileSystem) }
        guard !child.isDirectory else { throw FilesystemError(.notPermitted) }
        // The item is stored when the file is closed; until then stat shows the copy.
        let file = OpenFile(node: child, bytes: [], writable: true, dirty: true)
        let handle = handles.add(file)
        let attributes = try filesystem.attributes(of: child, pendingSize: 0)
        return .create(number: inodes.remember(child), attributes: attributes, handle: handle)
    }

    func read(handle: UInt64, size: Int, offset: Int) throws(FilesystemError) -> Reply {
        guard let file = handles.file(handle) else { throw FilesystemError(.badFileDescriptor) }
        return .bytes(file.read(offset: offset, count: size))
    }

    func write(handle: UInt64, data: UnsafeRawBufferPointer, offset: Int) throws(FilesystemError) -> Reply {
        guard let file = handles.file(handle), file.writable else { throw FilesystemError(.badFileDescriptor) }
        try file.write(data, offset: offset)
        return .written(data.count)
    }

    /// close(2) of one descriptor: the value is stored now, and an error reaches close.
    func flush(handle: UInt64) throws(FilesystemError) -> Reply {
        guard let file = handles.file(handle) else { return .success }
        try file.commit(to: filesystem)
        return .success
    }

    func release(handle: UInt64) -> Reply {
        guard let file = handles.removeFile(handle) else { return .success }
        try? file.commit(to: filesystem)  // normally already stored by flush
        file.discard()
        return .success
    }

    func unlink(parent: UInt64, name: String) throws(FilesystemError) -> Reply {
        try filesystem.remove(filesystem.child(of: node(parent), named: name))
        return .success
    }

    func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32) throws(FilesystemError) -> Reply {
        let source = try filesystem.child(of: node(parent), named: name)
        let target = try filesystem.child(of: node(newParent), named: newName)
        if flags & renameExchange != 0 { throw FilesystemError(.invalidArgument) }
        try filesystem.rename(source, to: target, replacing: flags & renameNoReplace == 0)
        inodes.renamed(source, to: target)
        return .success
    }

    // MARK: Directories

    func mkdir(parent: UInt64, name: String) throws(FilesystemError) -> Reply {
        let child = try filesystem.child(of: node(parent), named: name)
        try filesystem.makeDirectory(child)
        return .entry(number: inodes.remember(child), attributes: try attributes(of: child))
    }

    func rmdir(parent: UInt64, name: String) throws(FilesystemError) -> Reply {
        try filesystem.removeDirectory(filesystem.child(of: node(parent), named: name))
        return .success
    }

    func opendir(_ number: UInt64) throws(FilesystemError) -> Reply {
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

    func getxattr(_ number: UInt64, name: String, size: Int) throws(FilesystemError) -> Reply {
        let value = Array(try filesystem.extendedAttribute(name, of: node(number)).utf8)
        return sized(value, limit: size)
    }

    func listxattr(_ number: UInt64, size: Int) throws(FilesystemError) -> Reply {
        let names = filesystem.extendedAttributeNames(of: try node(number))
        return sized(names.flatMap { Array($0.utf8) + [0] }, limit: size)
    }

    func setxattr(_ number: UInt64, name: String, value: String) throws(FilesystemError) -> Reply {
        try filesystem.setExtendedAttribute(name, to: value, of: node(number))
        return .success
    }

    func removexattr(_ number: UInt64, name: String) throws(FilesystemError) -> Reply {
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
