#if canImport(Glibc)
import Glibc
#endif

/// Starts a program found on PATH (or by path) with `arguments`; returns its pid, or
/// nil if it could not start. `movingToThree` becomes the child's descriptor 3.
func spawn(_ program: String, _ arguments: [String], closingInChild: [Int32] = [], movingToThree: Int32? = nil, standardOutput: Int32? = nil) -> pid_t? {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for descriptor in closingInChild { posix_spawn_file_actions_addclose(&actions, descriptor) }
    if let movingToThree { posix_spawn_file_actions_adddup2(&actions, movingToThree, 3) }
    if let standardOutput { posix_spawn_file_actions_adddup2(&actions, standardOutput, 1) }
    let argv: [UnsafeMutablePointer<CChar>?] = ([program] + arguments).map { (text: String) in strdup(text) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let status = posix_spawnp(&pid, program, &actions, nil, argv, environ)
    return status == 0 ? pid : nil
}

/// A pipe whose both ends close on exec (`pipe2` is hidden behind _GNU_SOURCE): a
/// child gets an end only as a descriptor `spawn` moves into place.
func closeOnExecPipe() -> (read: Int32, write: Int32)? {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { return nil }
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    return (ends[0], ends[1])
}

/// `O_PATH` from <fcntl.h>, hidden behind _GNU_SOURCE: a descriptor that names a file
/// without opening it (no FUSE request, no read permission needed). The value is the
/// same on every architecture kc builds for (x86_64, aarch64).
let O_PATH: Int32 = 0o10000000

/// Runs a program to completion; its exit status, or nil if it could not start or was killed.
func runToCompletion(_ program: String, _ arguments: [String]) -> Int32? {
    guard let pid = spawn(program, arguments) else { return nil }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { return nil }
    }
    // WIFEXITED / WEXITSTATUS are macros.
    return status & 0x7f == 0 ? (status >> 8) & 0xff : nil
}

/// Runs a program to completion and returns its exit status and standard output (at most
/// 64 KiB); nil if it could not start or was killed.
func runCapturingOutput(_ program: String, _ arguments: [String]) -> (status: Int32, output: String)? {
    guard let pipe = closeOnExecPipe() else { return nil }
    let pid = spawn(program, arguments, standardOutput: pipe.write)
    close(pipe.write)
    defer { close(pipe.read) }
    guard let pid else { return nil }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while output.count < 65536 {
        let count = read(pipe.read, &buffer, buffer.count)
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        output += buffer[..<count]
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { return nil }
    }
    guard status & 0x7f == 0 else { return nil }
    return ((status >> 8) & 0xff, String(decoding: output, as: UTF8.self))
}

/// How a program run with a deadline (``runWithDeadline(_:_:seconds:grace:)``) ended.
enum DeadlineOutcome: Equatable {
    case exited(Int32)
    case killedBySignal(Int32)
    /// Still running at the deadline, so killed (SIGKILL). `ended` is false if it did
    /// not end even then, within the grace: a process waiting in the kernel for a FUSE
    /// daemon that already took its request cannot die until the daemon answers. It
    /// is left behind, not waited for.
    case timedOut(ended: Bool)
    case couldNotStart
}

/// Runs a program and waits for it at most `seconds`; then kills it and waits at most
/// `grace` seconds more. Never waits longer: the caller goes on whatever the child does.
func runWithDeadline(_ program: String, _ arguments: [String], seconds: Int, grace: Int = 5) -> DeadlineOutcome {
    guard let pid = spawn(program, arguments) else { return .couldNotStart }
    if let status = waitForExit(of: pid, seconds: seconds) {
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros.
        return status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .killedBySignal(status & 0x7f)
    }
    kill(pid, SIGKILL)
    return .timedOut(ended: waitForExit(of: pid, seconds: grace) != nil)
}

/// The child's wait status once it ended, or nil if it still runs after `seconds`.
/// Polls (`waitpid` with WNOHANG), at 1 ms at first and at most every 50 ms, so a quick
/// child costs no more than a blocking wait and a slow one little.
private func waitForExit(of pid: pid_t, seconds: Int) -> Int32? {
    let deadline = monotonicNanoseconds() + UInt64(seconds) * 1_000_000_000
    var pause: UInt32 = 1_000
    while true {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid { return status }
        // ECHILD: someone else reaped it (SIGCHLD ignored): it ended, how is unknown,
        // so it counts as failed (exit 2).
        if result < 0 && errno == ECHILD { return 2 << 8 }
        if monotonicNanoseconds() >= deadline { return nil }
        usleep(pause)
        pause = min(pause * 2, 50_000)
    }
}

func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// The path of this executable.
func ownExecutablePath() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard length > 0 else { return CommandLine.arguments[0] }
    buffer[length] = 0
    return String(cString: buffer)
}

/// The path to name kc by in a command printed for the user to keep (a containers.conf
/// line): this file, or, when this is the full kc installed as `kc-full` beside its
/// front (docs/FRONT.md), the front `kc` beside it, which runs it.
func installedCommandPath() -> String {
    let own = ownExecutablePath()
    guard own.hasSuffix("/kc-full") else { return own }
    let front = String(own.dropLast("kc-full".count)) + "kc"
    return access(front, X_OK) == 0 ? front : own
}

/// A program installed next to this one (`kc-mountd` beside `kc`).
func siblingExecutable(_ name: String) -> String {
    let own = ownExecutablePath()
    return String(own[..<(own.lastIndex(of: "/") ?? own.startIndex)]) + "/" + name
}
