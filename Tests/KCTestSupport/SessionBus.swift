import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A real session bus of one test's own: `dbus-daemon` with a session configuration
/// whose only service folder offers the built `kc-secretd` for `org.freedesktop.secrets`,
/// so the first client call starts it by D-Bus activation, as on a user's machine. The
/// daemon (and so kc-secretd) inherits this process's session keyring and `environment`
/// (give a ``VaultFixture``'s to use its vault).
public final class SessionBus {
    nonisolated(unsafe) private static var counter = 0

    public let directory: String
    public let address: String
    public let daemonPID: pid_t
    /// The environment for clients: `environment` with `DBUS_SESSION_BUS_ADDRESS`.
    public private(set) var environment: [String: String]

    /// Skips the test (never fails it) where there is no `dbus-daemon`.
    public static func requireDaemon() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else {
            throw XCTSkip("no /usr/bin/dbus-daemon (Debian's dbus-daemon package): no session bus to test on")
        }
    }

    /// `serviceExec` is what activation runs (default: the built kc-secretd); nil offers
    /// no Secret Service, for a test that starts another provider itself.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment,
                serviceExec: String? = builtSecretd, arguments: [String] = [], allowEveryUser: Bool = false) throws {
        try Self.requireDaemon()
        var environment = environment
        // Without a vault kc-secretd keeps its index in $XDG_STATE_HOME/kc: a test's
        // daemon keeps it in this run's folder, never in the home of the user running the
        // tests (unless the test chose a folder of its own).
        let inherited = ProcessInfo.processInfo.environment["XDG_STATE_HOME"]
        if environment["XDG_STATE_HOME"] == nil || environment["XDG_STATE_HOME"] == inherited {
            environment["XDG_STATE_HOME"] = Self.testStateHome
        }
        Self.counter += 1
        directory = "/tmp/kc-test-bus-\(getpid())-\(Self.counter)"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory + "/services", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let configuration = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:dir=\(directory)</listen>
          <auth>EXTERNAL</auth>
          <servicedir>\(directory)/services</servicedir>
          <policy context="default">
            \(allowEveryUser ? "<allow user=\"*\"/>" : "")
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """
        try configuration.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        if let serviceExec {
            let exec = ([serviceExec] + arguments).joined(separator: " ")
            try "[D-BUS Service]\nName=org.freedesktop.secrets\nExec=\(exec)\n"
                .write(toFile: directory + "/services/org.freedesktop.secrets.service", atomically: true, encoding: .utf8)
        }
        // dbus-daemon stays this process's child (--nofork), so stop() reaps it: a
        // daemon that forks leaves a zombie Foundation's Process waits on for ever.
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw XCTSkip("no pipe: \(String(cString: strerror(errno)))") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addclose(&actions, ends[0])
        let arguments = ["/usr/bin/dbus-daemon", "--config-file=\(directory)/bus.conf", "--nofork", "--print-address=1"]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { (text: String) in strdup(text) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { (pair: (key: String, value: String)) in strdup("\(pair.key)=\(pair.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/dbus-daemon", &actions, nil, argv, envp)
        close(ends[1])
        defer { close(ends[0]) }
        guard spawned == 0 else { throw XCTSkip("dbus-daemon did not start: \(String(cString: strerror(spawned)))") }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(ends[0], &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        let lines = [String(decoding: line, as: UTF8.self), String(pid)]
        guard !lines[0].isEmpty else {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
            throw XCTSkip("dbus-daemon did not start (no address printed)")
        }
        address = lines[0]
        daemonPID = pid
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        // GLib clients (secret-tool) refuse non-ASCII arguments in the C locale, which a
        // login without LANG (su -) has.
        if environment["LC_ALL"] == nil { environment["LC_ALL"] = "C.UTF-8" }
        self.environment = environment
    }

    deinit { stop() }

    /// The folder the daemons of this test process keep their index in without a vault
    /// (`/tmp/kc-test-state-PID`, removed with the run's other folders).
    public static var testStateHome: String { "/tmp/kc-test-state-\(getpid())" }

    /// Runs a program as a client of this bus.
    @discardableResult
    public func run(_ executable: String, _ arguments: [String], input: [UInt8] = [], extraEnvironment: [String: String] = [:]) throws -> CommandResult {
        try runCommand(executable, arguments, input: input, environment: environment.merging(extraEnvironment) { $1 })
    }

    /// Runs a bash script as a client of this bus; `kc` and `kc-secretd` are the built ones.
    @discardableResult
    public func script(_ text: String, input: [UInt8] = []) throws -> CommandResult {
        let folder = URL(fileURLWithPath: builtKC).deletingLastPathComponent().path
        return try run("/bin/bash", ["-c", text], input: input, extraEnvironment: ["PATH": folder + ":" + (environment["PATH"] ?? "/usr/bin:/bin")])
    }

    /// The pid of the process that owns `name` on this bus, if any.
    public func owner(of name: String = "org.freedesktop.secrets") -> pid_t? {
        guard let result = try? run("/usr/bin/dbus-send", ["--session", "--print-reply=literal", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                           "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:" + name]),
              result.status == 0 else { return nil }
        return result.output.split(separator: " ").last.flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Whether `pid` runs (a zombie waiting for its parent to reap it does not).
    public static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: close)...].hasPrefix(" Z")
    }

    private var stopped = false

    /// Stops the bus; kc-secretd leaves when its bus goes away (killed if it has not
    /// within five seconds), so nothing outlives the test.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        let service = owner()
        kill(daemonPID, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<500 {
            if waitpid(daemonPID, &status, WNOHANG) != 0 { break }
            usleep(10_000)
        }
        if waitpid(daemonPID, &status, WNOHANG) == 0 {
            kill(daemonPID, SIGKILL)
            _ = waitpid(daemonPID, &status, 0)
        }
        for pid in (service.map { [$0] } ?? []) {
            var waited = 0
            while Self.isRunning(pid), waited < 500 {
                usleep(10_000)
                waited += 1
            }
            if Self.isRunning(pid) { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// The `kc-secretd` built next to this test bundle.
public var builtSecretd: String {
    URL(fileURLWithPath: builtKC).deletingLastPathComponent().appendingPathComponent("kc-secretd").path
}
