import KernelKeychain
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A directory named to `kc mount` or `kc umount`, resolved once: its parent is opened
/// (links in the parent's path followed then, never again) and every later step works
/// from that descriptor and the last name, which is never followed. So a link planted
/// at the path, or in it after this point, cannot aim kc at another directory.
///
/// Nothing here stats the mount point itself on the calling thread: a FUSE mount whose
/// daemon is stopped would block it for good. That is ``probe(countingEntries:)``'s job.
final class MountPoint {
    /// As /proc/self/mountinfo shows a mount there: absolute, links resolved, no
    /// trailing slash.
    let path: String
    /// O_PATH descriptor of the parent directory.
    private let parent: Int32
    private let name: String

    struct ResolutionError: Error, CustomStringConvertible {
        /// The path named, made absolute.
        var named: String
        var code: Int32
        var description: String { "cannot resolve \(named): \(String(cString: strerror(code)))" }
    }

    init(resolving named: String) throws(ResolutionError) {
        var absolute = absolutePath(named)
        while absolute.count > 1 && absolute.hasSuffix("/") { absolute.removeLast() }
        var lastSlash = absolute.lastIndex(of: "/") ?? absolute.startIndex
        if [".", "..", ""].contains(absolute[absolute.index(after: lastSlash)...]) {
            // `kc mount .` names the directory itself: resolve it whole.
            guard let real = realpath(absolute, nil) else { throw ResolutionError(named: absolute, code: errno) }
            absolute = String(cString: real)
            free(real)
            lastSlash = absolute.lastIndex(of: "/") ?? absolute.startIndex
        }
        name = String(absolute[absolute.index(after: lastSlash)...])
        let parentPath = lastSlash == absolute.startIndex ? "/" : String(absolute[..<lastSlash])
        // "/" has no parent to mount or unmount it from.
        guard !name.isEmpty else { throw ResolutionError(named: absolute, code: EINVAL) }
        parent = open(parentPath, O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { throw ResolutionError(named: absolute, code: errno) }
        // The path of what was opened, as the kernel names it: what mountinfo shows.
        guard let resolvedParent = Self.pathOfDescriptor(parent) else {
            close(parent)
            throw ResolutionError(named: absolute, code: errno)
        }
        path = (resolvedParent == "/" ? "" : resolvedParent) + "/" + name
    }

    deinit { close(parent) }

    /// Seconds a mount point has to answer a stat before kc calls its daemon unresponsive.
    static let answerTimeout: Int32 = 2

    enum Lookup {
        case missing(errno: Int32)
        case symbolicLink
        /// The root of this mount is at the path (the top one, if mounts are stacked).
        case mountPoint(MountEntry)
        /// Something that is not a mount point: the probe says whether a directory.
        case notMountPoint
    }

    /// What is at the path, from the kernel's tables alone: an O_PATH open of the
    /// last name does not reach a FUSE daemon, and its mount id (fdinfo's `mnt_id`)
    /// names the mount it lies in, the one mounted there if it is a mount point.
    func lookUp() -> Lookup {
        let target = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)
        guard target >= 0 else { return .missing(errno: errno) }
        defer { close(target) }
        let mountID = readProcBytes("/proc/self/fdinfo/\(target)").flatMap { info in
            String(decoding: info, as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix("mnt_id:") }
                .flatMap { Int($0.dropFirst("mnt_id:".count).drop { $0 == " " || $0 == "\t" }) }
        }
        if let mountID, let entry = MountTable.entries().first(where: { $0.id == mountID }), entry.mountPoint == path {
            return .mountPoint(entry)
        }
        // Not a mount's root, so fstat stays in the parent's filesystem.
        var info = stat()
        return fstat(target, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK ? .symbolicLink : .notMountPoint
    }

    enum Probe: Equatable {
        /// `entries`: names in the directory besides `.` and `..` (0 unless counted).
        case directory(entries: Int)
        case notDirectory
        case failed(errno: Int32)
        /// No answer within the timeout: a daemon that is stopped, traced or stuck.
        case noAnswer
    }

    /// Stats the path (and counts a directory's entries if asked) on a thread of its
    /// own, and gives up after `timeout` seconds: a FUSE request to a stopped daemon
    /// blocks until the daemon answers. A thread left blocked dies when kc exits (the
    /// kernel's wait for a FUSE answer is killable).
    func probe(countingEntries: Bool, timeout seconds: Int32 = MountPoint.answerTimeout) -> Probe {
        guard let ends = closeOnExecPipe() else { return .failed(errno: errno) }
        let request = ProbeRequest(parent: fcntl(parent, F_DUPFD_CLOEXEC, 0), name: name,
                                   countingEntries: countingEntries, reply: ends.write)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(request).toOpaque()
        guard pthread_create(&thread, nil, { context in
            Unmanaged<ProbeRequest>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context) == 0 else {
            Unmanaged<ProbeRequest>.fromOpaque(context).release()
            close(ends.read)
            return .failed(errno: EAGAIN)
        }
        pthread_detach(thread)
        var ready = pollfd(fd: ends.read, events: Int16(POLLIN), revents: 0)
        var status: Int32
        repeat { status = poll(&ready, 1, seconds * 1000) } while status < 0 && errno == EINTR
        // On no answer the read end stays open, so the thread's late write cannot
        // raise SIGPIPE.
        guard status > 0 else { return .noAnswer }
        defer { close(ends.read) }
        var words: [Int32] = [0, 0]
        let count = words.withUnsafeMutableBytes { read(ends.read, $0.baseAddress, $0.count) }
        guard count == 8 else { return .failed(errno: EIO) }
        return ProbeRequest.decode(words)
    }

    /// Unmounts what is mounted at the path; nil on success, else why not.
    ///
    /// Root unmounts with `umount2(name, UMOUNT_NOFOLLOW)` from the parent resolved at
    /// the start, so nothing renamed or linked in the path since can redirect it;
    /// `fusermount3 -u` would resolve the path string again. Other users must go
    /// through the setuid `fusermount3`, which itself checks that the mount is a FUSE
    /// mount of theirs.
    func unmount(lazy: Bool) -> String? {
        guard getuid() == 0 else {
            guard let status = runToCompletion("fusermount3", ["-u"] + (lazy ? ["-z"] : []) + [path]) else {
                return "cannot run fusermount3; install the fuse3 package"
            }
            return status == 0 ? nil : "fusermount3 -u failed (it said why above)"
        }
        let workingDirectory = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)
        defer { if workingDirectory >= 0 { _ = fchdir(workingDirectory); close(workingDirectory) } }
        guard fchdir(parent) == 0 else { return "cannot enter the parent of \(path): \(String(cString: strerror(errno)))" }
        guard umount2(name, Int32(UMOUNT_NOFOLLOW) | (lazy ? Int32(MNT_DETACH) : 0)) == 0 else {
            return "umount2 failed: \(String(cString: strerror(errno)))"
        }
        return nil
    }

    private static func pathOfDescriptor(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = buffer.withUnsafeMutableBytes { readlink("/proc/self/fd/\(fd)", $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        guard length > 0, length < buffer.count else { return nil }
        return String(decoding: buffer[..<length], as: UTF8.self)
    }
}

/// What a probe thread needs, handed over through `Unmanaged` userdata; the thread owns
/// its duplicate of the parent descriptor and the pipe's write end.
private final class ProbeRequest: @unchecked Sendable {
    let parent: Int32
    let name: String
    let countingEntries: Bool
    let reply: Int32

    init(parent: Int32, name: String, countingEntries: Bool, reply: Int32) {
        self.parent = parent
        self.name = name
        self.countingEntries = countingEntries
        self.reply = reply
    }

    func run() {
        let words = outcome()
        _ = words.withUnsafeBytes { write(reply, $0.baseAddress, $0.count) }
        close(reply)
        close(parent)
    }

    /// [kind, value]: 0 directory (entries), 1 not a directory, 2 failed (errno).
    private func outcome() -> [Int32] {
        var info = stat()
        guard fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return [2, errno] }
        guard info.st_mode & S_IFMT == S_IFDIR else { return [1, 0] }
        guard countingEntries else { return [0, 0] }
        let directory = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard directory >= 0, let stream = fdopendir(directory) else { return [2, errno] }
        defer { closedir(stream) }
        var entries: Int32 = 0
        while let entry = readdir(stream) {
            let isDots = withUnsafeBytes(of: entry.pointee.d_name) { name in
                name.first == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
            }
            if !isDots { entries += 1 }
        }
        return [0, entries]
    }

    static func decode(_ words: [Int32]) -> MountPoint.Probe {
        switch words[0] {
        case 0: return .directory(entries: Int(words[1]))
        case 1: return .notDirectory
        default: return .failed(errno: words[1])
        }
    }
}
