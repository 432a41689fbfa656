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
/// receives, and waits for it. The signals are blocked and taken with `sigwaitinfo`,
/// so no handler or global state is needed; the child starts with kc's original
/// signal mask and default dispositions. The environment strings, which may hold
/// secrets, are zeroed once the child has its copy.
func runSupervised(_ argv: [String], environment: [String: String]) -> ChildStatus {
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

    let arguments: [UnsafeMutablePointer<CChar>?] = argv.map { (text: String) in strdup(text) } + [nil]
    let variables: [UnsafeMutablePointer<CChar>?] = environment.map { (name, value) in strdup("\(name)=\(value)") } + [nil]
    var pid: pid_t = 0
    let spawned = posix_spawnp(&pid, argv[0], nil, &attributes, arguments, variables)
    arguments.forEach { free($0) }
    for variable in variables {
        if let variable { memset(variable, 0, strlen(variable)) }
        free(variable)
    }
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
