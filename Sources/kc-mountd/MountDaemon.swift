import ArgumentParser
import KernelKeychain
import KeychainFS
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

/// Serves one kc mount. Started by `kc mount`, which checks the mount point first and
/// waits on `--ready-fd` for "ready"; with no ready descriptor it serves in the
/// foreground (`kc mount --foreground` runs this program in its own place).
@main
struct MountDaemon: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kc-mountd",
        abstract: "The FUSE daemon behind 'kc mount'; run 'kc mount' instead."
    )

    @Argument var mountpoint: String
    @Flag var readOnly = false
    /// The service's name as hexadecimal bytes: a name need not be UTF-8, and an
    /// argument parsed as a `String` would lose such bytes.
    @Option var serviceHex: String?
    @Flag var allowOther = false
    @Flag var shared = false
    @Flag var audit = false
    @Option(name: .customLong("access")) var level: String = Accessibility.Level.whenUnlocked.rawValue
    @Option var readyFd: Int32?

    func run() throws {
        // A setuid daemon would serve one user's keys with another's privileges.
        guard getuid() == geteuid(), getgid() == getegid() else {
            report("kc: refusing to run setuid or setgid; run kc mount as the user whose keys it shows")
            throw ExitCode(2)
        }
        guard let level = Accessibility.Level(rawValue: level) else {
            report("kc: unknown access level '\(self.level)'")
            throw ExitCode(64)
        }
        // Under a service manager (`kc mount --foreground` in a Type=notify unit) the
        // daemon reports readiness itself; in the background `kc mount` returns instead.
        let serviceManager = readyFd == nil ? ServiceManagerNotifier.fromEnvironment() : nil
        unsetenv("NOTIFY_SOCKET")
        if let readyFd {
            // A daemon keeps nothing it inherited but its standard streams (until ready)
            // and the ready pipe: a caller waiting for a pipe or socket it passed to
            // `kc mount` to close must not wait for the daemon's lifetime.
            closefrom(readyFd + 1)
            _ = setsid()
        }
        var service: KeyName? = nil
        if let serviceHex {
            guard let bytes = hexBytes(serviceHex) else {
                report("kc: --service-hex '\(serviceHex)' is not hexadecimal")
                throw ExitCode(64)
            }
            service = KeyName(bytes: bytes)
        }
        let filesystem = KeychainFilesystem(configuration: MountConfiguration(
            readOnly: readOnly, service: service,
            newItemAccessibility: Accessibility(level: level, thisDeviceOnly: false),
            uid: getuid(), gid: getgid(), showsShared: shared, auditsReads: audit))
        let ready = readyFd
        do {
            defer { serviceManager?.notify("STOPPING=1") }
            try KeychainMount.serve(filesystem: filesystem, at: mountpoint, allowOther: allowOther) {
                // At the same moment the background form's `kc mount` is told to return.
                serviceManager?.notify("READY=1")
                guard let ready else { return }
                // Tell the waiting `kc mount`, then let go of its terminal.
                _ = "ready\n".withCString { write(ready, $0, 6) }
                close(ready)
                let null = open("/dev/null", O_RDWR)
                if null >= 0 {
                    for descriptor in Int32(0)...2 { dup2(null, descriptor) }
                    close(null)
                }
            }
        } catch {
            report("kc: \(error)")
            throw ExitCode(2)
        }
    }

    private func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    private func report(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
