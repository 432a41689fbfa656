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
