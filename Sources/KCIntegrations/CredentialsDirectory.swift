import Keyrings

#if canImport(Glibc)
import Glibc
#endif

/// The private directory of `kc exec --files`: in memory ($XDG_RUNTIME_DIR or
/// /dev/shm, both tmpfs), mode 0500 with files 0400, named
/// `kc-exec.<pid>.<random>` so a later run can tell when its owner is gone.
///
/// /dev/shm is writable by every user, so nothing here goes by path below the base
/// directory: the directory is made with `mkdirat` and opened with `O_NOFOLLOW`, and
/// its files are made, zeroed and removed with `openat`/`unlinkat` on its descriptor.
/// A link another user planted is never followed, and a name already taken is never
/// used: kc picks another.
public struct CredentialsDirectory {
    /// What `$CREDENTIALS_DIRECTORY` says.
    public let path: String
    private let base: BaseDirectory
    private let name: String
    private let descriptor: Int32

    private static let prefix = "kc-exec."

    /// Why no directory could be made or filled: `message` is the line after `kc: `.
    /// Nothing is left behind.
    public struct Failure: Error {
        public var message: String
    }

    /// Removes what a killed `kc exec` left, then makes a new directory with every item
    /// as a file named after it. Two services with an item of the same name cannot share
    /// the flat directory: that is an error.
    public static func create(with items: [PassedItem]) throws(Failure) -> CredentialsDirectory {
        guard let base = BaseDirectory.open() else {
            throw Failure(message: "no private place for the files: neither $XDG_RUNTIME_DIR nor /dev/shm is a directory only you can write or a sticky one; set XDG_RUNTIME_DIR to a directory of your own")
        }
        removeStale(in: base)
        let directory = try makeDirectory(in: base)
        var seen: [KeyName: KeyName] = [:]
        for item in items {
            if let other = seen[item.name] {
                directory.remove()
                throw Failure(message: "services '\(other)' and '\(item.service)' both have an item '\(item.name)'; pass them in separate 'kc exec' runs, or use --env")
            }
            seen[item.name] = item.service
            guard directory.write(item.value, named: item.name) else {
                let reason = String(cString: strerror(errno))
                directory.remove()
                throw Failure(message: "cannot write \(directory.path)/\(item.name): \(reason)")
            }
        }
        fchmod(directory.descriptor, 0o500)
        return directory
    }

    /// A new directory of a name nobody has taken. `mkdirat` fails on any existing
    /// entry, a link included, so another user's entry is never used.
    private static func makeDirectory(in base: BaseDirectory) throws(Failure) -> CredentialsDirectory {
        for _ in 0..<8 {
            let name = "\(prefix)\(getpid()).\(String(UInt64.random(in: .min ... .max), radix: 16))"
            guard mkdirat(base.descriptor, name, 0o700) == 0 else {
                if errno == EEXIST { continue }
                throw Failure(message: "cannot create a directory in \(base.path): \(String(cString: strerror(errno)))")
            }
            let descriptor = openat(base.descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            var info = stat()
            guard descriptor >= 0, fstat(descriptor, &info) == 0, info.st_uid == geteuid() else {
                if descriptor >= 0 { close(descriptor) }
                throw Failure(message: "\(base.path)/\(name) changed under kc as it was made; not using it")
            }
            fchmod(descriptor, 0o700)  // whatever the umask
            return CredentialsDirectory(path: base.path + "/" + name, base: base, name: name, descriptor: descriptor)
        }
        throw Failure(message: "cannot create a directory in \(base.path): every name tried was taken")
    }

    /// Writes a new file of mode 0400; false with `errno` set if that fails.
    private func write(_ value: [UInt8], named name: KeyName) -> Bool {
        let file = name.withCString { openat(descriptor, $0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o400) }
        guard file >= 0 else { return false }
        defer { close(file) }
        return fchmod(file, 0o400) == 0 && value.withUnsafeBytes { writeAll(fd: file, $0) }
    }

    /// Zeroes and removes every file, then the directory.
    public func remove() {
        Self.removeFiles(in: descriptor)
        close(descriptor)
        unlinkat(base.descriptor, name, AT_REMOVEDIR)
        base.close()
    }

    /// Removes the directories of this uid left by a `kc exec` that was killed: only a
    /// real directory (not a link) that we own with a mode kc gives (0700 while it
    /// fills, 0500 after), and in it only the files kc could have written.
    private static func removeStale(in base: BaseDirectory) {
        for entry in entryNames(in: base.descriptor) {
            let name = String(decoding: entry.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard name.hasPrefix(prefix) else { continue }
            let fields = name.dropFirst(prefix.count).split(separator: ".")
            guard fields.count == 2, let pid = pid_t(fields[0]), kill(pid, 0) != 0, errno == ESRCH else { continue }
            let directory = openat(base.descriptor, entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard directory >= 0 else { continue }
            defer { close(directory) }
            var info = stat()
            guard fstat(directory, &info) == 0, info.st_uid == geteuid(),
                  [0o500, 0o700].contains(info.st_mode & 0o7777) else { continue }
            removeFiles(in: directory)
            unlinkat(base.descriptor, entry, AT_REMOVEDIR)
        }
    }

    /// Zeroes and unlinks each regular file of ours in the open directory. Anything else
    /// (a link, a file of another user's, one linked from elsewhere) is left alone.
    private static func removeFiles(in directory: Int32) {
        fchmod(directory, 0o700)
        for name in entryNames(in: directory) {
            let file = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard file >= 0 else { continue }
            var info = stat()
            let ours = fstat(file, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_uid == geteuid()
            // A second link means the bytes are also someone else's file: unlink, do not zero.
            if ours && info.st_nlink == 1 { zeroFill(file, named: name, in: directory) }
            close(file)
            if ours { unlinkat(directory, name, 0) }
        }
    }

    /// Overwrites the open file with zeros, so the value does not stay in freed memory.
    /// kc's files are read-only, so this makes it writable and opens it again by name,
    /// and writes only if that is still the same file.
    private static func zeroFill(_ file: Int32, named name: [CChar], in directory: Int32) {
        var opened = stat()
        guard fstat(file, &opened) == 0, opened.st_size > 0, fchmod(file, 0o600) == 0 else { return }
        let writer = openat(directory, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard writer >= 0 else { return }
        defer { close(writer) }
        var info = stat()
        guard fstat(writer, &info) == 0, info.st_dev == opened.st_dev, info.st_ino == opened.st_ino else { return }
        let zeros = [UInt8](repeating: 0, count: 4096)
        var remaining = Int(info.st_size)
        while remaining > 0 {
            let count = Swift.min(remaining, zeros.count)
            guard zeros[..<count].withUnsafeBytes({ writeAll(fd: writer, $0) }) else { return }
            remaining -= count
        }
    }

    /// The names in an open directory, without `.` and `..`, each a NUL-terminated C
    /// string of the exact bytes (a name need not be UTF-8).
    private static func entryNames(in directory: Int32) -> [[CChar]] {
        let reader = dup(directory)
        guard reader >= 0, let stream = fdopendir(reader) else {
            if reader >= 0 { close(reader) }
            return []
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [[CChar]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                Array(bytes.bindMemory(to: CChar.self).prefix { $0 != 0 }) + [0]
            }
            if name == [0x2E, 0] || name == [0x2E, 0x2E, 0] { continue }
            names.append(name)
        }
        return names
    }
}

/// Where the directories go, open: the user's runtime directory if it is a directory
/// only this user can write, else /dev/shm if it is sticky (another user cannot remove
/// or rename what kc makes there). Below it everything goes by descriptor.
private struct BaseDirectory {
    let path: String
    let descriptor: Int32

    static func open() -> BaseDirectory? {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty,
           let base = BaseDirectory(opening: runtime) {
            return base
        }
        return BaseDirectory(opening: "/dev/shm")
    }

    private init?(opening path: String) {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var info = stat()
        let opened = fstat(descriptor, &info) == 0
        let privateToUs = info.st_uid == geteuid() && info.st_mode & 0o022 == 0
        let sticky = info.st_uid == 0 && info.st_mode & S_ISVTX != 0
        guard opened, privateToUs || sticky else {
            Glibc.close(descriptor)
            return nil
        }
        self.path = path
        self.descriptor = descriptor
    }

    func close() {
        Glibc.close(descriptor)
    }
}
