#if canImport(Glibc)
import Glibc
#endif

/// Starts a program found on PATH (or by path) with `arguments`; returns its pid, or
/// nil if it could not start. `movingToThree` becomes the child's descriptor 3.
func spawn(_ program: String, _ arguments: [String], closingInChild: [Int32] = [], movingToThree: Int32? = nil) -> pid_t? {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for descriptor in closingInChild { posix_spawn_file_actions_addclose(&actions, descriptor) }
    if let movingToThree { posix_spawn_file_actions_adddup2(&actions, movingToThree, 3) }
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

/// The path of this executable.
func ownExecutablePath() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard length > 0 else { return CommandLine.arguments[0] }
    buffer[length] = 0
    return String(cString: buffer)
}

/// A program installed next to this one (`kc-mountd` beside `kc`).
func siblingExecutable(_ name: String) -> String {
    let own = ownExecutablePath()
    return String(own[..<(own.lastIndex(of: "/") ?? own.startIndex)]) + "/" + name
}
