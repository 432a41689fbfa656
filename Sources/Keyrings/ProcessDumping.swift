import SystemPackage

/// Makes this process undumpable, for a process that holds payloads it read: the
/// kernel writes no core file of it, and other processes of its uid can no longer
/// ptrace it or read its /proc/PID/mem and environ (they become root's). The flag
/// lasts until the process executes another program.
///
/// Needs no permission. The corresponding C function is `prctl(PR_SET_DUMPABLE, 0)`.
public func disableDumping() throws(Errno) {
    _ = try keyctlResult { system_disable_dumping() }.get()
}

/// Turns the Swift runtime's crash reports off, for a process that holds payloads: its
/// backtracer catches SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGQUIT and SIGTRAP and
/// prints, besides the backtrace, the 16 bytes at every register that points into
/// memory, which may be a value being read (found by a hostile review: a SIGSEGV sent
/// to `kc get` printed the value's first bytes on standard error). With their default
/// actions back, an undumpable process whose core limit is 0 dies without a word.
///
/// Needs no permission. The corresponding C function is `signal(SIG, SIG_DFL)`.
public func disableCrashReports() throws(Errno) {
    _ = try keyctlResult { system_disable_crash_reports() }.get()
}
