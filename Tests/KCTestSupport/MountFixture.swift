import Foundation
import XCTest

/// A real mount served by the built `kc` in a child process, in a fresh temporary
/// directory, unmounted at the end.
public final class MountFixture {
    public let path: String
    private var unmounted = false
    private let inPodmanNamespace: Bool

    /// Throws XCTSkip where FUSE cannot work here.
    public static func requireFUSE() throws {
        let fd = open("/dev/fuse", O_RDWR)
        if fd >= 0 { close(fd) } else if getuid() == 0 {
            throw XCTSkip("/dev/fuse cannot be opened here: \(String(cString: strerror(errno)))")
        }
        guard programExists("fusermount3") else { throw XCTSkip("fusermount3 is not installed (package fuse3)") }
    }

    /// Mounts with `kc mount [options] DIR` (which returns once the mount is ready).
    /// With `inPodmanNamespace`, as `podman unshare kc mount ...`: in rootless podman's
    /// user and mount namespaces, where its containers can see it (README: containers).
    public init(options: [String] = [], inPodmanNamespace: Bool = false) throws {
        try Self.requireFUSE()
        path = try Self.makeDirectory()
        self.inPodmanNamespace = inPodmanNamespace
        let result = inPodmanNamespace
            ? try runCommand("/usr/bin/env", ["podman", "unshare", builtKC, "mount"] + options + [path])
            : try kc(["mount"] + options + [path])
        guard result.status == 0 else {
            throw XCTSkip("kc mount failed here: \(result.standardError)")
        }
    }

    public static func makeDirectory(owner: String? = nil) throws -> String {
        let path = "/tmp/kc-mount-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        if let owner { _ = try runCommand("/bin/chown", [owner, path]) }
        return path
    }

    public func file(_ components: String...) -> String {
        ([path] + components).joined(separator: "/")
    }

    public func unmount() {
        guard !unmounted else { return }
        unmounted = true
        if inPodmanNamespace {
            _ = try? runCommand("/usr/bin/env", ["podman", "unshare", builtKC, "umount", path])
        } else {
            _ = try? kc("umount", path)
        }
        try? FileManager.default.removeItem(atPath: path)
    }

    deinit { unmount() }
}

/// Whether `path` is a mount point now (from /proc/self/mountinfo).
public func isMounted(_ path: String) -> Bool {
    guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
    return table.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first == Substring(path) }
}

/// The live kc-mountd whose last argument is `path` (`kc mount` passes the mount point).
public func daemonProcess(serving path: String) -> pid_t? {
    let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return processes.compactMap { pid_t($0) }.first { pid in
        guard let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), !command.isEmpty else { return false }
        let arguments = command.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
        return arguments.first?.hasSuffix("/kc-mountd") == true && arguments.last == path
    }
}

/// Starts `strace -f -p daemon` killing the daemon (SIGKILL) as it enters one of
/// `syscalls` (strace's syntax: `rename,renameat`; `when` as strace takes it, e.g. "1"),
/// and returns it once every thread of the daemon is traced. Throws XCTSkip where it
/// cannot attach: kc-mountd is not dumpable, so only root (CAP_SYS_PTRACE) may trace it.
public func killingTracer(of daemon: pid_t, at syscalls: String, when: String? = nil) throws -> SpawnedProcess {
    try faultingTracer(of: daemon, at: syscalls, fault: "signal=SIGKILL" + (when.map { ":when=" + $0 } ?? ""))
}

/// As ``killingTracer(of:at:when:)``, with another fault of strace's `-e inject` syntax:
/// `error=EIO:when=1` makes the first of `syscalls` fail with EIO.
public func faultingTracer(of daemon: pid_t, at syscalls: String, fault: String) throws -> SpawnedProcess {
    let inject = "inject=\(syscalls):" + fault
    let tracer = try SpawnedProcess("/usr/bin/env", ["strace", "-qq", "-f", "-p", String(daemon), "-o", "/dev/null",
                                                     "-e", "trace=" + syscalls, "-e", inject])
    for _ in 0..<500 {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon)/task")) ?? []
        let traced = !tasks.isEmpty && tasks.allSatisfy { task in
            let status = readWholeFile("/proc/\(daemon)/task/\(task)/status") ?? ""
            let tracer = status.split(separator: "\n").first { $0.hasPrefix("TracerPid:") }
            return (tracer?.split(separator: "\t").last).flatMap { Int($0) }.map { $0 != 0 } ?? false
        }
        if traced { return tracer }
        if !tracer.isRunning { break }
        usleep(10_000)
    }
    if tracer.isRunning { kill(tracer.pid, SIGTERM) }
    throw XCTSkip("strace could not attach to kc-mountd \(daemon) (it is not dumpable: only root may trace it): \(tracer.wait().standardError)")
}

/// Detaches whatever is still mounted at `path` (a mount whose daemon died, too), so a
/// failing test leaves nothing behind.
public func forceUnmount(_ path: String) {
    while isMounted(path.replacingOccurrences(of: " ", with: "\\040")) || isMounted(path) {
        guard (try? runCommand("/usr/bin/env", ["fusermount3", "-u", "-z", path]))?.status == 0
            || (try? runCommand("/bin/umount", ["-l", path]))?.status == 0 else { return }
    }
}

/// open/write/close through the mount with plain syscalls; the errno of the first
/// failing step, or 0.
public func writeFile(_ path: String, _ bytes: [UInt8], flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) -> Int32 {
    let fd = open(path, flags, 0o600)
    guard fd >= 0 else { return errno }
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
        if written < 0 { let error = errno; close(fd); return error }
        offset += written
    }
    return close(fd) == 0 ? 0 : errno
}

/// A test case whose tests may mount once (`kc mount` of a fresh directory, made at
/// the first ``mount()`` of a test) and find it unmounted at tearDown.
open class MountingTestCase: KeyringTestCase {
    private var fixture: MountFixture?

    /// The test's mount, made on first use.
    public func mount() throws -> MountFixture {
        if let fixture { return fixture }
        let made = try MountFixture()
        fixture = made
        return made
    }

    open override func tearDownWithError() throws {
        fixture?.unmount()
        fixture = nil
        try super.tearDownWithError()
    }
}
