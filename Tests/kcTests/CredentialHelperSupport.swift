import Foundation
import KCTestSupport
import XCTest

/// A private folder for a credential helper test: `bin/` holds the helpers as the
/// release installs them (links to the built kc) and goes first on PATH, and `home/`
/// is HOME and XDG_CONFIG_HOME, so the clients never read or write the user's config.
/// Removed by ``remove()``.
struct HelperSandbox {
    let root: String
    var bin: String { root + "/bin" }
    var home: String { root + "/home" }

    init(_ label: String) throws {
        var template = Array("/tmp/kc-test-\(label)-\(getpid()).XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("cannot make a folder in /tmp") }
        root = String(cString: made)
        for folder in [bin, home, home + "/.config"] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        for helper in ["git-credential-kc", "docker-credential-kc"] {
            try FileManager.default.createSymbolicLink(atPath: bin + "/" + helper, withDestinationPath: builtKC)
        }
    }

    /// The environment for a client: PATH with `bin` first, HOME in the sandbox, and
    /// nothing from the caller's git or container configuration.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["HOME"] = home
        environment["XDG_CONFIG_HOME"] = home + "/.config"
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["GIT_TERMINAL_PROMPT"] = "0"
        for name in ["GIT_ASKPASS", "SSH_ASKPASS", "GIT_DIR", "GIT_WORK_TREE", "REGISTRY_AUTH_FILE", "DOCKER_CONFIG", "CONTAINERS_CONF"] {
            environment[name] = nil
        }
        return environment
    }

    /// Runs a helper by its installed name, as its client would.
    func helper(_ name: String, _ arguments: [String], input: String) throws -> CommandResult {
        try runCommand(bin + "/" + name, arguments, input: Array(input.utf8), environment: environment)
    }

    func write(_ text: String, to path: String, executable: Bool = false) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        if executable { try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path) }
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }
}

/// A process the test started and must stop (a server), with what it printed.
final class BackgroundProcess {
    let process = Process()
    let logPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String], logPath: String) throws {
        self.logPath = logPath
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        try process.run()
        try log.close()
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now (the kernel picks it).
func freeLocalPort() throws -> Int {
    let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socketDescriptor >= 0 else { throw XCTSkip("cannot open a socket here") }
    defer { close(socketDescriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socketDescriptor, $0, length) == 0 && getsockname(socketDescriptor, $0, &length) == 0
        }
    }
    guard bound else { throw XCTSkip("cannot bind a socket on 127.0.0.1 here") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits until something accepts connections on 127.0.0.1:`port`.
func waitForListener(port: Int, seconds: Double = 20) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(socketDescriptor)
        if connected { return true }
        usleep(100_000)
    }
    return false
}
