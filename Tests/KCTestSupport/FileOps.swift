import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

// Precise steps for the write-path, deadline and race tests: raw syscalls that return
// the errno of what failed, the kernel's view of a key's expiry, and `kc ls --json`.

/// Plain system calls on paths and descriptors; each returns 0 or the errno.
public enum FileOps {
    /// open(2): the descriptor, or -1 and the errno.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) -> (fd: Int32, errno: Int32) {
        let fd = Glibc.open(path, flags, mode)
        return (fd, fd >= 0 ? 0 : Glibc.errno)
    }

    /// write(2) until every byte is written; 0 or the errno of the failing call.
    public static func write(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 { return Glibc.errno }
            offset += written
        }
        return 0
    }

    public static func write(_ fd: Int32, _ text: String) -> Int32 { write(fd, Array(text.utf8)) }

    /// pwrite(2) of all of `bytes` at `offset`; 0 or the errno.
    public static func pwrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int) -> Int32 {
        let written = bytes.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress!, bytes.count, off_t(offset)) }
        if written < 0 { return Glibc.errno }
        return written == bytes.count ? 0 : EIO
    }

    /// close(2): 0 or the errno (a FUSE filesystem reports a failed FLUSH here).
    public static func close(_ fd: Int32) -> Int32 { Glibc.close(fd) == 0 ? 0 : Glibc.errno }
    public static func unlink(_ path: String) -> Int32 { Glibc.unlink(path) == 0 ? 0 : Glibc.errno }
    public static func rename(_ from: String, _ to: String) -> Int32 { Glibc.rename(from, to) == 0 ? 0 : Glibc.errno }
    public static func mkdir(_ path: String) -> Int32 { Glibc.mkdir(path, 0o700) == 0 ? 0 : Glibc.errno }
    public static func rmdir(_ path: String) -> Int32 { Glibc.rmdir(path) == 0 ? 0 : Glibc.errno }

    /// Whether `path` exists (stat succeeds).
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    /// The errno `stat` gives, or 0.
    public static func statError(_ path: String) -> Int32 {
        var info = stat()
        return stat(path, &info) == 0 ? 0 : Glibc.errno
    }

    /// The size `stat` reports, or nil.
    public static func size(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }
}

/// Runs `path` with `arguments` through posix_spawn with no file actions, so the child
/// inherits every descriptor of this process that is not close-on-exec (and closes the
/// close-on-exec ones when it execs). Returns the exit status (128+signal if killed).
public func spawnInheritingDescriptors(_ path: String, _ arguments: [String] = []) throws -> Int32 {
    var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, path, nil, nil, &argv, environ)
    guard result == 0 else {
        throw NSError(domain: NSPOSIXErrorDomain, code: Int(result), userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(path)"])
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
}

// MARK: Deadlines

/// An item as `kc ls SERVICE --long --json` lists it.
public struct ListedItem: Decodable, Sendable {
    public var name: String
    public var access: String?
    public var thisDeviceOnly: Bool?
    public var size: Int
    public var secondsLeft: UInt64?
    public var serial: Int32
}

private struct ListedService: Decodable {
    var service: String
    var items: [ListedItem]
}

/// The items `kc ls SERVICE --long --json` lists; none if the service does not exist
/// (exit 1). Fails the test on any other outcome.
public func listedItems(_ service: String, file: StaticString = #filePath, line: UInt = #line) throws -> [ListedItem] {
    let result = try kc("ls", service, "--long", "--json")
    if result.status == 1 { return [] }
    guard result.status == 0 else {
        XCTFail("kc ls \(service) --long --json: \(result)", file: file, line: line)
        return []
    }
    return try JSONDecoder().decode(ListedService.self, from: Data(result.standardOutput)).items
}

/// The expiry column of /proc/keys for a key: `perm`, `expd`, `50s`, `59m`, `1h`, `6d`, `1w`.
public func procKeysExpiry(serial: Int32) -> String? {
    guard let text = readWholeFile("/proc/keys") else { return nil }
    let wanted = String(UInt32(bitPattern: serial), radix: 16)
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 3, fields[0].drop(while: { $0 == "0" }) == Substring(wanted) else { continue }
        return String(fields[3])
    }
    return nil
}

/// Reads a file to its end with read(2): /proc files report size 0, and Foundation's
/// String(contentsOfFile:) returns only the first page of a long /proc/keys.
public func readWholeFile(_ path: String) -> String? {
    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { Glibc.close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if count < 0 { if errno == EINTR { continue }; return nil }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// How /proc/keys shows `seconds` left (security/keys/proc.c: whole units, rounded down).
public func procKeysDisplay(_ seconds: Int64) -> String {
    switch seconds {
    case ..<60: "\(seconds)s"
    case ..<3600: "\(seconds / 60)m"
    case ..<86400: "\(seconds / 3600)h"
    case ..<604_800: "\(seconds / 86400)d"
    default: "\(seconds / 604_800)w"
    }
}

/// Wall-clock seconds, as the kernel counts key expiry (ktime_get_real_seconds).
public func wallSeconds() -> Int64 { Int64(time(nil)) }

/// The key's absolute expiry to the second, read from /proc/keys while under a minute
/// is left (the kernel shows seconds exactly then); nil if it shows another unit.
public func exactKernelDeadline(serial: Int32) -> Int64? {
    for _ in 0..<20 {
        let before = wallSeconds()
        let field = procKeysExpiry(serial: serial)
        let after = wallSeconds()
        guard before == after else { continue }  // straddled a second: read again
        guard let field, field.hasSuffix("s"), let left = Int64(field.dropLast()) else { return nil }
        return before + left
    }
    return nil
}

/// An errno as a test message shows it: `0 (success)`, `ENOENT (No such file or directory)`.
public func errnoName(_ code: Int32) -> String {
    let names: [Int32: String] = [
        0: "0", EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EACCES: "EACCES", EEXIST: "EEXIST",
        EXDEV: "EXDEV", EISDIR: "EISDIR", EINVAL: "EINVAL", EFBIG: "EFBIG", ENOSPC: "ENOSPC", EROFS: "EROFS",
        ENOTEMPTY: "ENOTEMPTY", EDQUOT: "EDQUOT", ENOTDIR: "ENOTDIR", ENAMETOOLONG: "ENAMETOOLONG",
    ]
    let text = code == 0 ? "success" : String(cString: strerror(code))
    return "\(names[code] ?? "errno \(code)") (\(text))"
}

// MARK: Processes without Foundation's Process

/// A child started with posix_spawn: standard input from a pipe (so several children
/// can be released at once by writing to them), standard output to /dev/null, standard
/// error collected. Foundation's Process polls for exit every 50 ms, too slow for
/// hundreds of rounds.
public final class SpawnedProcess {
    public let pid: pid_t
    private var input: Int32
    private let errors: Int32
    private var exitStatus: Int32?

    public init(_ path: String, _ arguments: [String]) throws {
        var inputPipe: [Int32] = [0, 0], errorPipe: [Int32] = [0, 0]
        guard pipe(&inputPipe) == 0, pipe(&errorPipe) == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(errno), userInfo: [NSLocalizedDescriptionKey: "pipe"])
        }
        // Close-on-exec, so no other child holds these ends open (dup2 into 0 and 2 clears it).
        for fd in inputPipe + errorPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inputPipe[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, &argv, environ)
        Glibc.close(inputPipe[0])
        Glibc.close(errorPipe[1])
        guard result == 0 else {
            Glibc.close(inputPipe[1])
            Glibc.close(errorPipe[0])
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(result), userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(path)"])
        }
        self.pid = pid
        self.input = inputPipe[1]
        self.errors = errorPipe[0]
    }

    /// Writes `bytes` to the child's standard input and closes it.
    public func send(_ bytes: [UInt8]) {
        guard input >= 0 else { return }
        _ = FileOps.write(input, bytes)
        Glibc.close(input)
        input = -1
    }

    /// Waits (up to 5 s) until the child is blocked reading its standard input, per
    /// /proc/PID/syscall; false if it never got there (the caller may go on anyway).
    @discardableResult
    public func waitUntilReadingInput() -> Bool {
        #if arch(x86_64)
        let read = "0"
        #elseif arch(arm64)
        let read = "63"
        #else
        return false
        #endif
        for _ in 0..<50_000 {
            // Unreadable (no ptrace access, or a kernel without it): go on unsynchronised.
            guard let text = readWholeFile("/proc/\(pid)/syscall") else { return false }
            let fields = text.split(separator: " ")
            if fields.count > 1, fields[0] == Substring(read), fields[1] == "0x0" { return true }
            if !isRunning { return false }
            usleep(100)
        }
        return false
    }

    /// Whether the child is still running (reaps it if it has exited).
    public var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid { exitStatus = Self.decode(status); return false }
        return result == 0
    }

    /// Waits for the child: its exit status (128+signal if killed) and standard error.
    public func wait() -> (status: Int32, standardError: String) {
        if input >= 0 { Glibc.close(input); input = -1 }
        var collected: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(errors, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            collected.append(contentsOf: chunk[..<count])
        }
        Glibc.close(errors)
        if exitStatus == nil {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            exitStatus = Self.decode(status)
        }
        return (exitStatus ?? -1, String(decoding: collected, as: UTF8.self))
    }

    private static func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}

/// Busy-waits about `microseconds` (usleep sleeps far longer than a race window).
public func spin(microseconds: Int) {
    guard microseconds > 0 else { return }
    var start = timespec(), now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    repeat {
        clock_gettime(CLOCK_MONOTONIC, &now)
    } while (now.tv_sec - start.tv_sec) * 1_000_000 + (now.tv_nsec - start.tv_nsec) / 1000 < microseconds
}

/// How many keys the kernel counts against `uid`'s quota (/proc/key-users), or nil.
public func keysCharged(to uid: String) -> Int? {
    guard let text = readWholeFile("/proc/key-users") else { return nil }
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 3, fields[0] == Substring(uid + ":") else { continue }
        return fields[3].split(separator: "/").first.flatMap { Int($0) }
    }
    return 0
}

/// Waits (at most `seconds`) until `uid` is charged for no more than `count` keys: the
/// kernel frees a dead session's keys asynchronously.
public func waitForKeys(of uid: String, toDropTo count: Int, seconds: Double = 10) {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline, (keysCharged(to: uid) ?? 0) > count { usleep(50_000) }
}
