import KCIntegrations

#if canImport(Glibc)
import Glibc
#endif

/// How a supervised command ended.
enum ChildStatus {
    case exited(Int32)
    case signalled(Int32)
    case failedToStart(Int32)
}

/// Signals kc passes on to the command it runs.
private let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH]

/// Runs `argv` (found on PATH) with exactly `environment`, passing on the signals kc
/// receives, and waits for it. Arguments and environment are bytes, handed over
/// unchanged. The signals are blocked and taken with `sigwaitinfo`, so no handler or
/// global state is needed; the child starts with kc's original signal mask and default
/// dispositions. The environment, which may hold secrets, is zeroed (kc's C copy and
/// `environment` itself) once the child has its copy.
func runSupervised(_ argv: [[UInt8]], environment: inout ChildEnvironment) -> ChildStatus {
    var waited = sigset_t()
    sigemptyset(&waited)
    for signal in forwardedSignals + [SIGCHLD] { sigaddset(&waited, signal) }
    var original = sigset_t()
    sigprocmask(SIG_BLOCK, &waited, &original)
    defer { sigprocmask(SIG_SETMASK, &original, nil) }

    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    posix_spawnattr_setsigmask(&attributes, &original)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in forwardedSignals { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    let arguments = cStrings(argv)
    let variables = cStrings(environment.entries)
    var pid: pid_t = 0
    let spawned: Int32
    if arguments.dropLast().contains(nil) || variables.dropLast().contains(nil) {
        spawned = ENOMEM  // a copy could not be allocated: run nothing rather than less
    } else if let program = arguments.first ?? nil {
        spawned = CoreDumps.withCallersLimit {
            posix_spawnp(&pid, program, nil, &attributes, arguments, variables)
        }
    } else {
        spawned = ENOENT
    }
    arguments.forEach { free($0) }
    for variable in variables {
        if let variable { memset(variable, 0, strlen(variable)) }
        free(variable)
    }
    environment.overwriteWithZeros()
    guard spawned == 0 else { return .failedToStart(spawned) }

    while true {
        var info = siginfo_t()
        let signal = sigwaitinfo(&waited, &info)
        if signal < 0 { continue }  // EINTR
        if signal != SIGCHLD {
            kill(pid, signal)
            continue
        }
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        guard reaped == pid else { continue }
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros.
        let terminatingSignal = status & 0x7f
        if terminatingSignal == 0 { return .exited((status >> 8) & 0xff) }
        if terminatingSignal != 0x7f { return .signalled(terminatingSignal) }
    }
}

/// A NULL-terminated array of C strings holding exactly `strings`' bytes, for
/// `posix_spawn`; the caller frees each. A string must not contain NUL (it would end
/// early). An element is nil where the copy could not be allocated.
private func cStrings(_ strings: [[UInt8]]) -> [UnsafeMutablePointer<CChar>?] {
    strings.map { bytes -> UnsafeMutablePointer<CChar>? in
        guard let copy = malloc(bytes.count + 1)?.assumingMemoryBound(to: CChar.self) else { return nil }
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress { memcpy(copy, base, bytes.count) }
        }
        copy[bytes.count] = 0
        return copy
    } + [nil]
}
