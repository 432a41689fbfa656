import Keyrings
#if canImport(Glibc)
import Glibc
#endif

/// The private directory of `kc exec --files`: in memory ($XDG_RUNTIME_DIR or
/// /dev/shm, both tmpfs), mode 0500 with files 0400, named
/// `kc-exec.<pid>.<random>` so a later run can tell when its owner is gone.
struct CredentialsDirectory {
    let path: String

    private static let prefix = "kc-exec."

    /// Where the directories go: the user's runtime directory if it is usable.
    private static var base: String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            var info = stat()
            if stat(runtime, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() { return runtime }
        }
        return "/dev/shm"
    }

    /// Writes every item as a file named after it. Two services with an item of the
    /// same name cannot share the flat directory: that is an error.
    static func create(with items: [PassedItem]) throws -> CredentialsDirectory {
        let random = UInt64.random(in: .min ... .max)
        let path = "\(base)/\(prefix)\(getpid()).\(String(random, radix: 16))"
        guard mkdir(path, 0o700) == 0 else {
            standardError("kc: cannot create \(path): \(String(cString: strerror(errno)))")
            throw ExitStatus.failure
        }
        let directory = CredentialsDirectory(path: path)
        var seen: [KeyName: KeyName] = [:]
        for item in items {
            if let other = seen[item.name] {
                directory.remove()
                standardError("kc: services '\(other)' and '\(item.service)' both have an item '\(item.name)'; pass them in separate 'kc exec' runs, or use --env")
                throw ExitStatus.failure
            }
            seen[item.name] = item.service
            let fd = (KeyName(path + "/") + item.name).withCString {
                open($0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o400)
            }
            let written = fd >= 0 && item.value.withUnsafeBytes { writeAll(fd: fd, $0) }
            if fd >= 0 { close(fd) }
            guard written else {
                let reason = String(cString: strerror(errno))
                directory.remove()
                standardError("kc: cannot write \(path)/\(item.name): \(reason)")
                throw ExitStatus.failure
            }
        }
        chmod(path, 0o500)
        return directory
    }

    /// Zeroes and removes every file, then the directory.
    func remove() {
        chmod(path, 0o700)
        guard let stream = opendir(path) else { return }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name == "." || name == ".." { continue }
            let file = path + "/" + name
            let fd = open(file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                var info = stat()
                if fstat(fd, &info) == 0, info.st_size > 0 {
                    let zeros = [UInt8](repeating: 0, count: Int(info.st_size))
                    zeros.withUnsafeBytes { _ = writeAll(fd: fd, $0) }
                }
                close(fd)
            }
            unlink(file)
        }
        closedir(stream)
        rmdir(path)
    }

    /// Removes directories of this uid left by a `kc exec` that was killed.
    static func removeStale() {
        guard let stream = opendir(base) else { return }
        var stale: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard name.hasPrefix(prefix) else { continue }
            let fields = name.dropFirst(prefix.count).split(separator: ".")
            guard fields.count == 2, let pid = pid_t(fields[0]) else { continue }
            var info = stat()
            guard stat(base + "/" + name, &info) == 0, info.st_uid == getuid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { stale.append(base + "/" + name) }
        }
        closedir(stream)
        for path in stale { CredentialsDirectory(path: path).remove() }
    }
}
