import Keyrings

#if canImport(Glibc)
import Glibc
#endif

/// Every kc process may hold values, so `KC.main()` first makes it undumpable and sets
/// its core-file size limit to 0: no core file, no ptrace or /proc/PID/mem by the
/// user's other processes, and no crash report that prints memory (``disableCrashReports()``). Two system calls, `getrlimit` and `prctl`, and a `setrlimit`
/// where the limit was not 0 already.
enum CoreDumps {
    /// The core-file size limit kc was started with, which `kc exec` gives back to its
    /// command; reading it first turns core dumps off, once.
    static let callersLimit: rlimit = {
        // Glibc's Swift import has no prlimit (a GNU extension) to set and read in one call.
        let core = __rlimit_resource_t(RLIMIT_CORE.rawValue)
        var limit = rlimit()
        // Most systems start processes with a soft limit of 0 already: then no setrlimit.
        if getrlimit(core, &limit) == 0, limit.rlim_cur != 0 {
            // Only the soft limit: the hard one stays, so the command can have this back.
            var off = limit
            off.rlim_cur = 0
            _ = setrlimit(core, &off)
        }
        try? disableDumping()
        try? disableCrashReports()
        return limit
    }()

    /// Turns core dumps and ptrace by the same uid off for this process.
    static func disable() {
        _ = callersLimit
    }

    /// Runs `body` (which starts a program) with the caller's core-file limit, so the
    /// program kc starts dumps core as it would have without kc. kc stays undumpable
    /// meanwhile: that flag is not inherited across exec, and is what stops a dump.
    static func withCallersLimit<R>(_ body: () -> R) -> R {
        let core = __rlimit_resource_t(RLIMIT_CORE.rawValue)
        var limit = callersLimit
        var off = rlimit()
        guard getrlimit(core, &off) == 0, off.rlim_cur != limit.rlim_cur else { return body() }
        _ = setrlimit(core, &limit)
        defer { _ = setrlimit(core, &off) }
        return body()
    }
}
