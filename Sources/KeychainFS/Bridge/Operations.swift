import Keyrings
internal import CFuse3
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

// The C side of the bridge: one `@convention(c)` trampoline per low-level operation.
// Each finds the bridge through the session's userdata (never a global), runs the
// operation, and sends its single reply; nothing here can end the daemon.

private func bridge(_ request: fuse_req_t) -> FuseBridge? {
    guard let userdata = fuse_req_userdata(request) else { return nil }
    return Unmanaged<FuseBridge>.fromOpaque(userdata).takeUnretainedValue()
}

private func answer(
    _ request: fuse_req_t?, _ fileInfo: UnsafeMutablePointer<fuse_file_info>? = nil,
    _ operation: (FuseBridge) throws -> Reply
) {
    guard let request else { return }
    guard let bridge = bridge(request) else {
        fuse_reply_err(request, EIO)
        return
    }
    let reply: Reply
    do {
        reply = try operation(bridge)
    } catch {
        // The one place a failure becomes the errno the kernel gets.
        reply = .error(Errno(reporting: error))
    }
    send(reply, to: request, fileInfo: fileInfo, times: bridge.mountedAt)
}

/// The thread id of the process that made the request.
private func caller(_ request: fuse_req_t?) -> Int32 {
    guard let request, let context = fuse_req_ctx(request) else { return 0 }
    return context.pointee.pid
}

/// The uid of the process that made the request.
private func callerUID(_ request: fuse_req_t?) -> UInt32 {
    guard let request, let context = fuse_req_ctx(request) else { return UInt32.max }
    return context.pointee.uid
}

private func string(_ name: UnsafePointer<CChar>?) -> String? {
    name.map { String(cString: $0) }
}

/// A file name from the kernel, byte for byte.
private func keyName(_ name: UnsafePointer<CChar>?) -> KeyName {
    name.map { KeyName(cString: $0) } ?? KeyName(bytes: [])
}

/// `times`: what every node shows as its times (keys have none): when the mount started.
private func send(_ reply: Reply, to request: fuse_req_t, fileInfo: UnsafeMutablePointer<fuse_file_info>?, times: timespec) {
    switch reply {
    case .error(let errno):
        fuse_reply_err(request, errno.rawValue)
    case .success:
        fuse_reply_err(request, 0)
    case .none:
        fuse_reply_none(request)
    case .entry(let number, let attributes):
        var entry = entryParameters(number, attributes, times)
        fuse_reply_entry(request, &entry)
    case .attributes(let number, let attributes):
        var status = statBuffer(number, attributes, times)
        fuse_reply_attr(request, &status, 0)
    case .open(let handle, let directIO, let noFlush):
        guard let fileInfo else { fuse_reply_err(request, EIO); return }
        fileInfo.pointee.fh = handle
        if directIO { CFuse3_file_info_set_direct_io(fileInfo) }
        if noFlush { CFuse3_file_info_set_noflush(fileInfo) }
        fuse_reply_open(request, fileInfo)
    case .create(let number, let attributes, let handle):
        guard let fileInfo else { fuse_reply_err(request, EIO); return }
        fileInfo.pointee.fh = handle
        CFuse3_file_info_set_direct_io(fileInfo)
        var entry = entryParameters(number, attributes, times)
        fuse_reply_create(request, &entry, fileInfo)
    case .bytes(var bytes):
        bytes.withUnsafeBytes { buffer in
            _ = fuse_reply_buf(request, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), buffer.count)
        }
        for index in bytes.indices { bytes[index] = 0 }  // may be a secret
    case .attributeSize(let size):
        fuse_reply_xattr(request, size)
    case .written(let count):
        fuse_reply_write(request, count)
    case .statistics(let statistics):
        var result = statvfs()
        result.f_bsize = 1
        result.f_frsize = 1
        result.f_blocks = __fsblkcnt_t(statistics.totalBytes)
        result.f_bfree = __fsblkcnt_t(statistics.freeBytes)
        result.f_bavail = __fsblkcnt_t(statistics.freeBytes)
        result.f_files = __fsfilcnt_t(statistics.totalFiles)
        result.f_ffree = __fsfilcnt_t(statistics.freeFiles)
        result.f_favail = __fsfilcnt_t(statistics.freeFiles)
        result.f_namemax = 255
        fuse_reply_statfs(request, &result)
    case .directory(let directory, let offset, let maxSize):
        sendDirectory(directory, offset: offset, maxSize: maxSize, to: request)
    }
}

private func sendDirectory(_ directory: OpenDirectory, offset: Int, maxSize: Int, to request: fuse_req_t) {
    var buffer = [CChar](repeating: 0, count: maxSize)
    var used = 0
    var index = max(offset, 0)
    while index < directory.entries.count {
        let entry = directory.entries[index]
        var status = stat()
        status.st_ino = ino_t(entry.number)
        status.st_mode = entry.isDirectory ? S_IFDIR : S_IFREG
        let needed = buffer.withUnsafeMutableBufferPointer { destination in
            entry.name.withCString { name in
                fuse_add_direntry(request, destination.baseAddress.map { $0 + used }, maxSize - used,
                                  name, &status, off_t(index + 1))
            }
        }
        if needed > maxSize - used { break }
        used += needed
        index += 1
    }
    _ = buffer.withUnsafeBufferPointer { fuse_reply_buf(request, $0.baseAddress, used) }
}

private func statBuffer(_ number: UInt64, _ attributes: NodeAttributes, _ times: timespec) -> stat {
    var status = stat()
    status.st_ino = ino_t(number)
    status.st_mode = (attributes.isDirectory ? S_IFDIR : S_IFREG) | mode_t(attributes.permissions)
    status.st_nlink = nlink_t(attributes.linkCount)
    status.st_uid = attributes.uid
    status.st_gid = attributes.gid
    status.st_size = off_t(attributes.size)
    status.st_blksize = 4096
    status.st_blocks = blkcnt_t((attributes.size + 511) / 512)
    status.st_atim = times
    status.st_mtim = times
    status.st_ctim = times
    return status
}

private func entryParameters(_ number: UInt64, _ attributes: NodeAttributes, _ times: timespec) -> fuse_entry_param {
    var entry = fuse_entry_param()
    entry.ino = number
    entry.generation = 1
    entry.attr = statBuffer(number, attributes, times)
    // No caching: a value changed with `kc set` shows at the next stat or read.
    entry.attr_timeout = 0
    entry.entry_timeout = 0
    return entry
}

/// The operations table handed to `fuse_session_new`.
func keychainOperations() -> fuse_lowlevel_ops {
    var operations = fuse_lowlevel_ops()
    operations.`init` = { _, connection in
        guard let connection else { return }
        // O_TRUNC arrives with open(), so `printf v > f` is one atomic replacement.
        if connection.pointee.capable & UInt32(FUSE_CAP_ATOMIC_O_TRUNC) != 0 {
            connection.pointee.want |= UInt32(FUSE_CAP_ATOMIC_O_TRUNC)
        }
    }
    operations.lookup = { request, parent, name in
        answer(request) { bridge in
            try bridge.lookup(parent: parent, name: keyName(name))
        }
    }
    operations.forget = { request, number, count in
        answer(request) { bridge in bridge.forget(number, count: count) }
    }
    operations.forget_multi = { request, count, forgets in
        answer(request) { bridge in
            for index in 0..<count {
                if let forget = forgets?[index] { _ = bridge.forget(forget.ino, count: forget.nlookup) }
            }
            return .none
        }
    }
    operations.getattr = { request, number, fileInfo in
        answer(request) { bridge in try bridge.getattr(number, handle: fileInfo?.pointee.fh) }
    }
    operations.setattr = { request, number, attributes, toSet, fileInfo in
        answer(request) { bridge in
            let values = attributes?.pointee
            return try bridge.setattr(
                number,
                size: toSet & FUSE_SET_ATTR_SIZE != 0 ? values.map { Int($0.st_size) } : nil,
                mode: toSet & FUSE_SET_ATTR_MODE != 0 ? values.map { UInt32($0.st_mode) } : nil,
                uid: toSet & FUSE_SET_ATTR_UID != 0 ? values.map { $0.st_uid } : nil,
                gid: toSet & FUSE_SET_ATTR_GID != 0 ? values.map { $0.st_gid } : nil,
                handle: fileInfo?.pointee.fh)
        }
    }
    operations.open = { request, number, fileInfo in
        answer(request, fileInfo) { bridge in
            try bridge.open(number, flags: fileInfo?.pointee.flags ?? O_RDONLY, caller: caller(request), callerUID: callerUID(request))
        }
    }
    operations.create = { request, parent, name, _, fileInfo in
        answer(request, fileInfo) { bridge in
            try bridge.create(parent: parent, name: keyName(name), flags: fileInfo?.pointee.flags ?? O_WRONLY, caller: caller(request))
        }
    }
    operations.read = { request, _, size, offset, fileInfo in
        answer(request) { bridge in
            try bridge.read(handle: fileInfo?.pointee.fh ?? 0, size: size, offset: Int(offset))
        }
    }
    operations.write = { request, _, data, size, offset, fileInfo in
        answer(request) { bridge in
            try bridge.write(handle: fileInfo?.pointee.fh ?? 0, data: UnsafeRawBufferPointer(start: data, count: size), offset: Int(offset))
        }
    }
    operations.flush = { request, number, fileInfo in
        answer(request) { bridge in try bridge.flush(handle: fileInfo?.pointee.fh ?? 0, caller: caller(request), inode: number) }
    }
    operations.fsync = { request, _, _, fileInfo in
        answer(request) { bridge in try bridge.fsync(handle: fileInfo?.pointee.fh ?? 0) }
    }
    operations.release = { request, _, fileInfo in
        answer(request) { bridge in bridge.release(handle: fileInfo?.pointee.fh ?? 0) }
    }
    operations.unlink = { request, parent, name in
        answer(request) { bridge in try bridge.unlink(parent: parent, name: keyName(name)) }
    }
    operations.rename = { request, parent, name, newParent, newName, flags in
        answer(request) { bridge in
            try bridge.rename(parent: parent, name: keyName(name), newParent: newParent, newName: keyName(newName), flags: flags)
        }
    }
    operations.mkdir = { request, parent, name, _ in
        answer(request) { bridge in try bridge.mkdir(parent: parent, name: keyName(name)) }
    }
    operations.rmdir = { request, parent, name in
        answer(request) { bridge in try bridge.rmdir(parent: parent, name: keyName(name)) }
    }
    // Symlinks, hard links and special files have no meaning in a keychain: refused
    // with EPERM (as a filesystem that cannot hold them answers), not ENOSYS.
    operations.symlink = { request, _, _, _ in answer(request) { _ in .error(.notPermitted) } }
    operations.link = { request, _, _, _ in answer(request) { _ in .error(.notPermitted) } }
    operations.mknod = { request, _, _, _, _ in answer(request) { _ in .error(.notPermitted) } }
    operations.opendir = { request, number, fileInfo in
        answer(request, fileInfo) { bridge in try bridge.opendir(number) }
    }
    operations.readdir = { request, _, size, offset, fileInfo in
        answer(request) { bridge in
            try bridge.readdir(handle: fileInfo?.pointee.fh ?? 0, size: size, offset: Int(offset))
        }
    }
    operations.releasedir = { request, _, fileInfo in
        answer(request) { bridge in bridge.releasedir(handle: fileInfo?.pointee.fh ?? 0) }
    }
    operations.statfs = { request, _ in
        answer(request) { bridge in bridge.statfs() }
    }
    operations.getxattr = { request, number, name, size in
        answer(request) { bridge in try bridge.getxattr(number, name: string(name) ?? "", size: size) }
    }
    operations.listxattr = { request, number, size in
        answer(request) { bridge in try bridge.listxattr(number, size: size) }
    }
    operations.setxattr = { request, number, name, value, size, _ in
        answer(request) { bridge in
            let text = String(decoding: UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : size), as: UTF8.self)
            return try bridge.setxattr(number, name: string(name) ?? "", value: text)
        }
    }
    operations.removexattr = { request, number, name in
        answer(request) { bridge in try bridge.removexattr(number, name: string(name) ?? "") }
    }
    return operations
}
