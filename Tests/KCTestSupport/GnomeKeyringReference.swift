import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// gnome-keyring-daemon (42, Debian's gnome-keyring) running headless on a session bus of
/// its own, unlocked with a password piped in, its keyrings in a folder of the test's:
/// the reference Secret Service the conformance tests compare kc-secretd with. `stop()`
/// (also at deinit) ends the daemon, the bus and the folder.
public final class GnomeKeyringReference {
    nonisolated(unsafe) private static var counter = 0
    public static let executable = "/usr/bin/gnome-keyring-daemon"

    public let bus: SessionBus
    public let home: String
    public let pid: pid_t
    private var stopped = false

    /// Starts it; XCTSkip where gnome-keyring is missing or does not start headless here.
    public init() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw XCTSkip("no \(Self.executable) (Debian's gnome-keyring): no reference Secret Service to compare with")
        }
        bus = try SessionBus(environment: environmentWithoutVault(), serviceExec: nil)
        Self.counter += 1
        home = SecretServiceClients.folder + "/gnome-keyring-\(Self.counter)"
        for folder in ["", "/data", "/run", "/config", "/cache"] {
            try FileManager.default.createDirectory(atPath: home + folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // Its output goes to files (the daemonized child would hold a pipe open for ever),
        // and the shell is waited for with waitpid: Foundation's Process waits for ever on
        // a child whose own child daemonized.
        var environment = bus.environment
        for (name, value) in ["HOME": home, "XDG_DATA_HOME": home + "/data", "XDG_RUNTIME_DIR": home + "/run",
                              "XDG_CONFIG_HOME": home + "/config", "XDG_CACHE_HOME": home + "/cache"] { environment[name] = value }
        let status = Self.runWaitingWithWaitpid("/bin/sh", ["-c", "printf %s kc-test-password | \(Self.executable) --unlock --daemonize --components=secrets >'\(home)/env' 2>'\(home)/log'"],
                                                environment: environment)
        var owner: pid_t?
        for _ in 0..<100 {
            owner = bus.owner()
            if owner != nil { break }
            usleep(50_000)
        }
        guard status == 0, let owner else {
            let log = (try? String(contentsOfFile: home + "/log", encoding: .utf8)) ?? ""
            bus.stop()
            try? FileManager.default.removeItem(atPath: home)
            throw XCTSkip("gnome-keyring-daemon did not start headless here (exit \(status)): \(log)")
        }
        pid = owner
        // It makes the login keyring a moment after it owns the name.
        var ready = false
        for _ in 0..<100 {
            let label = try? bus.run("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets/aliases/default",
                                                            "org.freedesktop.DBus.Properties.Get", "string:org.freedesktop.Secret.Collection", "string:Label"])
            if label?.status == 0 { ready = true; break }
            usleep(50_000)
        }
        guard ready else {
            stop()
            throw XCTSkip("gnome-keyring-daemon started but its default collection did not appear within 5 s")
        }
    }

    deinit { stop() }

    /// Runs a program to its end (at most 30 s, then killed) and returns its exit status
    /// (-1 if it could not start or was killed).
    static func runWaitingWithWaitpid(_ executable: String, _ arguments: [String], environment: [String: String]) -> Int32 {
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, executable, nil, nil, argv, envp) == 0 else { return -1 }
        var status: Int32 = 0
        for _ in 0..<3000 {
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid { return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1 }
            if waited < 0 { return -1 }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        _ = waitpid(pid, &status, 0)
        return -1
    }

    public func stop() {
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGTERM)
        var waited = 0
        while SessionBus.isRunning(pid), waited < 300 {
            usleep(10_000)
            waited += 1
        }
        if SessionBus.isRunning(pid) { kill(pid, SIGKILL) }
        bus.stop()
        try? FileManager.default.removeItem(atPath: home)
    }
}
