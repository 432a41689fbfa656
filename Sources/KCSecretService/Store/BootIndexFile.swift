import KernelKeychain
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// kc-secretd's index for a user without a vault: `$XDG_STATE_HOME/kc/secret-service-index`
/// (by default `~/.local/state/kc/secret-service-index`), mode 0600 in a folder of mode
/// 0700, holding the boot it belongs to (`/proc/sys/kernel/random/boot_id`).
///
/// Why a file there: without a vault the values live in the kernel until reboot (the
/// `login` collection's in the user keyring, which outlives every login), so their
/// attributes must outlive any one daemon (a new login or `dbus-run-session`, a restart)
/// and no more than the boot. Kernel keys are the wrong home: an ordinary user's quota
/// is 20,000 bytes, and a browser stores about 20 attributes per password.
/// `$XDG_RUNTIME_DIR` is removed at the user's last logout, while the user keyring's
/// items stay. The vault's folder (`$XDG_DATA_HOME/kc`) is where `kc vault init` makes a
/// vault, and whatever is there is taken for one. `$XDG_STATE_HOME` is the XDG base
/// directory spec's place for state that should outlive a program but is not worth
/// keeping with the user's data: a boot's attributes are that. A file of an earlier boot
/// describes items the reboot took: it is discarded, never read.
///
/// Attributes and labels are not secrets (gnome-keyring keeps them readable on disk too),
/// but a record names the kc item a client gets for its attributes: whoever could write
/// the file could hand git another site's password. So every folder on the way must be
/// root's or the user's and closed to others' writes (as OpenSSH's StrictModes asks),
/// the folder the user's own with mode 0700, and the file the user's regular file with
/// mode 0600, opened without following a link. A folder that fails is not used (the
/// index stays in memory, logged); a file that fails is neither read nor written over.
/// Two daemons (two session buses of one user) change it under a lock (`flock` of
/// `secret-service-index.lock`), each applying its change to the file as it is then.
struct BootIndexFile: IndexHome {
    /// The folder: `$XDG_STATE_HOME/kc` or `~/.local/state/kc`.
    let folder: String
    /// This boot's id.
    let boot: String

    static let fileName = "secret-service-index"
    static let lockName = "secret-service-index.lock"
    /// Copies being written: a save killed mid-way leaves one, which the next save
    /// (under the lock, so no save is in progress) removes.
    static let stagedPrefix = "secret-service-index.new-"
    static let magic = Array("kc-secret-service-boot-index 1\n".utf8)
    /// The largest file read back, as for the vault's documents.
    static let sizeLimit = 64 << 20

    var location: String { folder + "/" + Self.fileName }

    /// The file for this user and boot; nil (with why) where there can be none: no
    /// folder to name (no absolute XDG_STATE_HOME, HOME or home in the password
    /// database) or no boot id.
    static func current() -> Result<BootIndexFile, BusError> {
        guard let folder = defaultFolder() else {
            return .failure(.failed("no folder for the index: set XDG_STATE_HOME, or HOME to your home"))
        }
        guard let boot = bootID() else { return .failure(.failed("cannot read /proc/sys/kernel/random/boot_id")) }
        return .success(BootIndexFile(folder: folder, boot: boot))
    }

    /// `$XDG_STATE_HOME/kc` if that is an absolute path, else `$HOME/.local/state/kc` if
    /// HOME is the caller's, else the home in the password database. For root, an
    /// XDG_STATE_HOME or HOME that is another user's (`sudo -E`) is not root's, as for
    /// the vault.
    static func defaultFolder() -> String? {
        if let state = getenv("XDG_STATE_HOME").map({ String(cString: $0) }), state.hasPrefix("/") {
            var info = stat()
            if geteuid() != 0 || stat(state, &info) != 0 || info.st_uid == 0 { return state + "/kc" }
        }
        if let home = getenv("HOME").map({ String(cString: $0) }), home.hasPrefix("/") {
            var info = stat()
            if stat(home, &info) == 0, info.st_uid == geteuid() { return home + "/.local/state/kc" }
        }
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>? = nil
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(geteuid(), &entry, &buffer, buffer.count, &found) == 0, found != nil, let directory = entry.pw_dir else { return nil }
        let home = String(cString: directory)
        return home.hasPrefix("/") ? home + "/.local/state/kc" : nil
    }

    static func bootID() -> String? {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = Glibc.read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count].prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        return text.isEmpty ? nil : text
    }

    // MARK: The folder

    /// `O_PATH` from <fcntl.h>, hidden behind _GNU_SOURCE: a descriptor that names a
    /// folder for `openat` and `fstat` without needing read permission on it.
    private static let pathOnly: Int32 = 0o10000000

    /// Why the folder is not used: the index then stays in memory.
    struct FolderProblem: Error { var message: String }

    /// Opens the folder, made (0700, and any missing folder above it, as the XDG spec
    /// asks) if need be, after checking every folder on the way from `/`, each opened
    /// from the one above without following a link, so what is checked is what is used;
    /// a missing folder is made only under one that passed. Links in the part that
    /// exists (a home reached through `/home -> /data/home`) are resolved first.
    func openFolder() throws(FolderProblem) -> Int32 {
        var existing = folder.split(separator: "/").map(String.init)
        var missing: [String] = []
        var resolved: String? = nil
        while resolved == nil {
            let prefix = "/" + existing.joined(separator: "/")
            if let real = realpath(prefix, nil) {
                resolved = String(cString: real)
                free(real)
            } else {
                guard errno == ENOENT, let last = existing.popLast() else {
                    throw FolderProblem(message: "\(prefix): \(String(cString: strerror(errno)))")
                }
                missing.insert(last, at: 0)
            }
        }
        // What is made is made where named: `..` there would walk back out of a folder
        // checked to be the user's.
        guard !missing.contains(where: { $0 == "." || $0 == ".." }) else {
            throw FolderProblem(message: "\(folder) names '.' or '..' in a part that does not exist yet")
        }
        let components = (resolved ?? "/").split(separator: "/").map(String.init) + missing
        let firstMissing = components.count - missing.count
        var fd = open("/", Self.pathOnly | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FolderProblem(message: "/: \(String(cString: strerror(errno)))") }
        var walked = ""
        do throws(FolderProblem) {
            try Self.checkAbove(fd, "/", stickyAbove: false)
            var stickyAbove = try Self.isSticky(fd)
            for (position, component) in components.enumerated() {
                let last = position == components.count - 1
                walked += "/" + component
                if position >= firstMissing, mkdirat(fd, component, 0o700) != 0, errno != EEXIST {
                    throw FolderProblem(message: "cannot make \(walked): \(String(cString: strerror(errno)))")
                }
                let next = openat(fd, component, (last ? O_RDONLY : Self.pathOnly) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard next >= 0 else { throw FolderProblem(message: "\(walked): \(String(cString: strerror(errno)))") }
                close(fd)
                fd = next
                if last {
                    if stickyAbove { try Self.checkAbove(fd, walked, stickyAbove: true) }
                    try Self.checkOwn(fd, walked)
                } else {
                    try Self.checkAbove(fd, walked, stickyAbove: stickyAbove)
                    stickyAbove = try Self.isSticky(fd)
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    private static func status(_ fd: Int32, _ path: String) throws(FolderProblem) -> stat {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw FolderProblem(message: "\(path): \(String(cString: strerror(errno)))") }
        return info
    }

    private static func isSticky(_ fd: Int32) throws(FolderProblem) -> Bool {
        let info = try status(fd, "")
        return info.st_mode & 0o022 != 0 && info.st_mode & S_ISVTX != 0
    }

    /// A folder above: root's or the user's, and no one else can write in it, except a
    /// sticky folder (/tmp), where no one can move another's entries; the folder after
    /// a sticky one must be the user's.
    private static func checkAbove(_ fd: Int32, _ path: String, stickyAbove: Bool) throws(FolderProblem) {
        let info = try status(fd, path)
        if stickyAbove && info.st_uid != geteuid() {
            throw FolderProblem(message: "\(path) is in a folder everyone can write in, but is not yours (uid \(info.st_uid))")
        }
        guard info.st_uid == 0 || info.st_uid == geteuid() else {
            throw FolderProblem(message: "\(path) belongs to uid \(info.st_uid), who could put another index in its place")
        }
        guard info.st_mode & 0o022 == 0 || info.st_mode & S_ISVTX != 0 else {
            throw FolderProblem(message: "\(path) has mode \(String(info.st_mode & 0o7777, radix: 8)): others can write in it ('chmod go-w \(path)')")
        }
    }

    /// The folder itself: the user's own, mode 0700.
    private static func checkOwn(_ fd: Int32, _ path: String) throws(FolderProblem) {
        let info = try status(fd, path)
        guard info.st_uid == geteuid() else { throw FolderProblem(message: "\(path) belongs to uid \(info.st_uid), not to you") }
        guard info.st_mode & 0o077 == 0 else {
            throw FolderProblem(message: "\(path) has mode \(String(info.st_mode & 0o777, radix: 8)): run 'chmod 700 \(path)'")
        }
    }

    // MARK: The file

    func stamp() -> [Int]? {
        guard let folderFD = try? openFolder() else { return nil }
        defer { close(folderFD) }
        return Self.stamp(in: folderFD)
    }

    private static func stamp(in folderFD: Int32) -> [Int]? {
        var info = stat()
        guard fstatat(folderFD, fileName, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return [Int(info.st_ino), Int(info.st_size), Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec)]
    }

    func read() throws(BusError) -> SecretIndex? {
        let folderFD: Int32
        do { folderFD = try openFolder() } catch { throw .failed("the index's folder cannot be used: \(error.message)") }
        defer { close(folderFD) }
        return try read(in: folderFD).index
    }

    /// The file's index if it is this boot's; `earlierBoot` if the file is another's.
    private func read(in folderFD: Int32) throws(BusError) -> (index: SecretIndex?, earlierBoot: Bool) {
        let fd = openat(folderFD, Self.fileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return (nil, false) }
            if errno == ELOOP { throw unusable("is a symbolic link") }
            throw unusable("cannot be opened (\(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw unusable("cannot be looked at (\(String(cString: strerror(errno))))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw unusable("is not a regular file") }
        guard info.st_uid == geteuid() else { throw unusable("belongs to uid \(info.st_uid), not to you") }
        guard info.st_mode & 0o077 == 0 else { throw unusable("has mode \(String(info.st_mode & 0o777, radix: 8)): others may read or change it") }
        guard Int(info.st_size) <= Self.sizeLimit else { throw unusable("is \(info.st_size) bytes, more than an index can be") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw unusable("cannot be read (\(String(cString: strerror(errno))))") }
            if count == 0 { break }
            filled += count
        }
        guard filled < bytes.count else { throw unusable("grew while being read") }
        bytes.removeLast(bytes.count - filled)
        guard bytes.starts(with: Self.magic) else { throw unknownFormat }
        var rest = bytes[Self.magic.count...]
        let bootLine = Array("boot ".utf8)
        guard rest.starts(with: bootLine), let end = rest.firstIndex(of: UInt8(ascii: "\n")) else { throw unknownFormat }
        let boot = String(decoding: rest[(rest.startIndex + bootLine.count)..<end], as: UTF8.self)
        guard boot == self.boot else { return (nil, true) }
        rest = rest[(end + 1)...]
        guard let index = SecretIndex(decoding: Array(rest)) else { throw unknownFormat }
        return (index, false)
    }

    private func unusable(_ problem: String) -> BusError {
        .failed("the index \(location) \(problem): kc-secretd neither reads nor writes over it; check it, and move it away to start a new one")
    }

    private var unknownFormat: BusError {
        .failed("the index \(location) is not one this kc-secretd can read (damaged, or a newer kc's): "
                + "it is left as it is and nothing is changed; move it away to start a new one")
    }

    func update(alongside: (_ held: Vault?) throws(KeychainError) -> Void,
                _ body: (SecretIndex?) throws(BusError) -> SecretIndex?) throws(IndexUpdateFailure) -> [Int]? {
        let folderFD: Int32
        do { folderFD = try openFolder() } catch {
            throw .refused(.failed("the index's folder cannot be used: \(error.message)"))
        }
        defer { close(folderFD) }
        let lockFD: Int32
        do throws(BusError) { lockFD = try lock(in: folderFD) } catch { throw .refused(error) }
        defer { close(lockFD) }  // and with it the lock
        removeStagedCopies(in: folderFD)
        let staged: String
        do throws(BusError) {
            guard let changed = try body(read(in: folderFD).index) else { return Self.stamp(in: folderFD) }
            let encoded = changed.encoded()
            try SecretLimits.checkIndex(size: encoded.count)
            staged = try stage(Self.magic + Array("boot \(boot)\n".utf8) + encoded, in: folderFD)
        } catch {
            throw .refused(error)
        }
        do {
            try alongside(nil)
        } catch {
            unlinkat(folderFD, staged, 0)
            throw .alongside(error)
        }
        guard renameat(folderFD, staged, folderFD, Self.fileName) == 0 else {
            let reason = String(cString: strerror(errno))
            unlinkat(folderFD, staged, 0)
            throw .refused(.failed("the index could not be saved as \(location): \(reason)"))
        }
        fsync(folderFD)
        return Self.stamp(in: folderFD)
    }

    /// Takes the lock two daemons of the user share; held until the descriptor closes.
    private func lock(in folderFD: Int32) throws(BusError) -> Int32 {
        let fd = openat(folderFD, Self.lockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .failed("cannot open \(folder)/\(Self.lockName): \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_mode & 0o077 == 0 else {
            close(fd)
            throw .failed("\(folder)/\(Self.lockName) is not a file of yours with mode 0600: remove it (kc-secretd makes it again)")
        }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let reason = String(cString: strerror(errno))
                close(fd)
                throw .failed("cannot lock \(folder)/\(Self.lockName): \(reason)")
            }
        }
        return fd
    }

    /// Writes `bytes` to a new file of the folder (0600) and flushes it: a full disk
    /// fails here, before anything else changed. Returns its name.
    private func stage(_ bytes: [UInt8], in folderFD: Int32) throws(BusError) -> String {
        var generator = SystemRandomNumberGenerator()
        let name = Self.stagedPrefix + String(generator.next() as UInt64, radix: 36)
        let fd = openat(folderFD, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw saveFailure(errno) }
        var failure: Int32 = 0
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let count = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += count
            }
        }
        if failure == 0, fsync(fd) != 0 { failure = errno }
        if close(fd) != 0, failure == 0, errno != EINTR { failure = errno }
        guard failure == 0 else {
            unlinkat(folderFD, name, 0)
            throw saveFailure(failure)
        }
        return name
    }

    private func saveFailure(_ code: Int32) -> BusError {
        let message = "the index could not be saved in \(folder): \(String(cString: strerror(code)))"
        return code == ENOSPC || code == EDQUOT ? .limitsExceeded(message) : .failed(message)
    }

    /// Staged copies a killed save left: under the lock no save is in progress.
    private func removeStagedCopies(in folderFD: Int32) {
        let listing = openat(folderFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard listing >= 0, let stream = fdopendir(listing) else {
            if listing >= 0 { close(listing) }
            return
        }
        defer { closedir(stream) }
        let prefix = Array(Self.stagedPrefix.utf8)
        var doomed: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix(while: { $0 != 0 })) }
            if name.starts(with: prefix) { doomed.append(String(decoding: name, as: UTF8.self)) }
        }
        for name in doomed { unlinkat(folderFD, name, 0) }
    }

    func tidy() {
        guard let folderFD = try? openFolder() else { return }
        defer { close(folderFD) }
        guard let lockFD = try? lock(in: folderFD) else { return }
        defer { close(lockFD) }
        removeStagedCopies(in: folderFD)
        // An earlier boot's index: its items went with that boot.
        if (try? read(in: folderFD))?.earlierBoot == true {
            unlinkat(folderFD, Self.fileName, 0)
            fsync(folderFD)
        }
    }
}
