import KernelKeychain
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The caller's `kc-mountd` serving a mount, found in /proc by its last argument (`kc
/// mount` passes the resolved mount point, as mountinfo shows it). Read only to tell
/// the user how to recover a mount that does not answer; kc never signals it.
struct MountDaemonProcess {
    var pid: pid_t
    /// `T (stopped)` or `t (tracing stop)` in /proc/PID/status: it answers nothing until
    /// resumed.
    var isStopped: Bool

    static func serving(_ mountPoint: String) -> MountDaemonProcess? {
        guard let processes = opendir("/proc") else { return nil }
        defer { closedir(processes) }
        while let entry = readdir(processes) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = pid_t(name),
                  readProcBytes("/proc/\(pid)/comm") == Array("kc-mountd\n".utf8),
                  let command = readProcBytes("/proc/\(pid)/cmdline"),
                  command.split(separator: 0).last?.elementsEqual(mountPoint.utf8) == true,
                  let status = readProcBytes("/proc/\(pid)/status") else { continue }
            let lines = String(decoding: status, as: UTF8.self).split(separator: "\n")
            func field(_ name: String) -> Substring? {
                lines.first { $0.hasPrefix(name + ":") }?.dropFirst(name.count + 1).drop { $0 == " " || $0 == "\t" }
            }
            let state = field("State")?.first
            // Another uid's process with the same name and argument is not our daemon.
            guard state != "Z", field("Uid")?.split(separator: "\t").first == Substring(String(getuid())) else { continue }
            return MountDaemonProcess(pid: pid, isStopped: state == "T" || state == "t")
        }
        return nil
    }
}

/// What `kc mount` and `kc doctor` say of a kc mount whose daemon did not answer in
/// time, with the way out: resume a stopped daemon, or detach the mount.
func unansweredMountDetail(_ mountPoint: String) -> String {
    let detach = "detach the mount with fusermount3 -u -z \(mountPoint)"
    guard let daemon = MountDaemonProcess.serving(mountPoint) else {
        return "does not answer within \(MountPoint.answerTimeout) s; \(detach)"
    }
    if daemon.isStopped {
        return "does not answer: its daemon kc-mountd (pid \(daemon.pid)) is stopped; resume it with kill -CONT \(daemon.pid), or \(detach)"
    }
    return "does not answer within \(MountPoint.answerTimeout) s (kc-mountd pid \(daemon.pid)); \(detach)"
}
