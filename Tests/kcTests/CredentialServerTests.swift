import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `kc credential-server`, a systemd `LoadCredential=ID:SOCKET` source, driven by a
/// client that connects exactly as systemd does: its socket bound to the abstract
/// address `\0<hex random>/unit/<unit>/<id>`, then read to end of file.
final class CredentialServerTests: KeyringTestCase {
    private var server: Process?
    private var serverLog: Pipe?
    private var directory: String!
    private var socketPath: String { directory + "/credentials.sock" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = "/tmp/kc-credentials-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    }

    override func tearDownWithError() throws {
        stopServer()
        try? FileManager.default.removeItem(atPath: directory)
        try super.tearDownWithError()
    }

    /// Starts the built `kc credential-server --socket DIR/credentials.sock ARGS` and
    /// waits for its socket.
    private func startServer(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtKC)
        process.arguments = ["credential-server", "--socket", socketPath] + arguments
        let log = Pipe()
        process.standardError = log
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        server = process
        serverLog = log
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: socketPath) { usleep(25_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: socketPath), "the server listens")
    }

    /// SIGTERM, then what the server wrote to standard error.
    @discardableResult
    private func stopServer() -> (status: Int32, log: String)? {
        guard let server, let serverLog else { return nil }
        self.server = nil
        if server.isRunning { kill(server.processIdentifier, SIGTERM) }
        server.waitUntilExit()
        let log = String(decoding: serverLog.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (server.terminationStatus, log)
    }

    /// A client as systemd's: bound to `\0<random>/unit/<unit>/<id>` (or `bindName`
    /// as given; nil: not bound at all), connected, reading to end of file.
    private func fetch(unit: String = "foo.service", id: String = "token", bindName: [UInt8]?? = .none) throws -> [UInt8] {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(descriptor) }
        let name: [UInt8]?
        switch bindName {
        case .none: name = [0] + Array("\(String(UInt64.random(in: 0...UInt64.max), radix: 16))/unit/\(unit)/\(id)".utf8)
        case .some(let given): name = given
        }
        if let name {
            var local = try XCTUnwrap(UnixSocketAddress(rawPath: name, terminated: false))
            XCTAssertEqual(local.withSockaddr { bind(descriptor, $0, $1) }, 0, String(cString: strerror(errno)))
        }
        var remote = try XCTUnwrap(UnixSocketAddress(socketPath))
        XCTAssertEqual(remote.withSockaddr { connect(descriptor, $0, $1) }, 0, String(cString: strerror(errno)))
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            received += buffer[..<count]
        }
        return received
    }

    func testAUnitGetsTheExactBytesOfItsCredentialOverSystemdsProtocol() throws {
        let service = uniqueService()
        let binary: [UInt8] = [0, 1, 2, 10, 13, 255, 254] + Array("tail\n".utf8)
        try Keychain(service: service).set(binary, forKey: "token")
        try Keychain(service: service).set("hunter2", forKey: "db.password")
        try startServer(["--service", service])
        XCTAssertEqual(try fetch(id: "token"), binary)
        XCTAssertEqual(try fetch(unit: "web@1.service", id: "db.password"), Array("hunter2".utf8))
        var info = stat()
        XCTAssertEqual(lstat(socketPath, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600, "only the owner (and root) may connect")
        let stopped = try XCTUnwrap(stopServer())
        XCTAssertEqual(stopped.status, 0, stopped.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath), "SIGTERM removes the socket")
        XCTAssertTrue(stopped.log.contains("served credential token for foo.service"), stopped.log)
        XCTAssertFalse(stopped.log.contains("hunter2"), "no value in the log")
    }

    func testAUnitWithItsOwnServiceReadsFromIt() throws {
        let shared = uniqueService(), own = uniqueService()
        try Keychain(service: shared).set("shared-value", forKey: "token")
        try Keychain(service: own).set("own-value", forKey: "token")
        try startServer(["--service", shared, "--unit-service", "web.service=\(own)"])
        XCTAssertEqual(try fetch(unit: "web.service"), Array("own-value".utf8))
        XCTAssertEqual(try fetch(unit: "other.service"), Array("shared-value".utf8))
    }

    func testClientsWithoutSystemdsAddressGetNothingAndTheServerKeepsServing() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v4lue", forKey: "token")
        try startServer(["--service", service])
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let badNames: [[UInt8]?] = [
            nil,  // not bound: the kernel gives it no address
            [0] + Array("\(random)/unit/foo.service".utf8),  // no ID
            [0] + Array("\(random)/unit/foo.service/token/extra".utf8),
            [0] + Array("xyz/unit/foo.service/token".utf8),  // random is not hex
            [0] + Array("\(random)/user/foo.service/token".utf8),
            [0] + Array("\(random)/unit/foo/token".utf8),  // not a unit name
            [0] + Array("\(random)/unit/foo.service/..".utf8),
            [0] + Array("\(random)/unit/foo.service/tok".utf8) + [0] + Array("en".utf8),
        ]
        for name in badNames {
            XCTAssertEqual(try fetch(bindName: .some(name)), [], "\(name.map { String(decoding: $0, as: UTF8.self) } ?? "unbound")")
        }
        XCTAssertEqual(try fetch(), Array("v4lue".utf8), "still serving")
        let stopped = try XCTUnwrap(stopServer())
        let refusals = stopped.log.split(separator: "\n").filter { $0.contains("is not systemd's") }
        XCTAssertEqual(refusals.count, badNames.count, stopped.log)
        XCTAssertTrue(refusals.allSatisfy { $0.hasPrefix("kc: credential-server: refused pid ") }, stopped.log)
    }

    func testAnUnknownCredentialGetsNothing() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        try startServer(["--service", service])
        XCTAssertEqual(try fetch(id: "missing"), [])
        XCTAssertEqual(try fetch(id: "token"), Array("v".utf8), "still serving")
        let stopped = try XCTUnwrap(stopServer())
        XCTAssertTrue(stopped.log.contains("refused credential missing for foo.service"), stopped.log)
        XCTAssertTrue(stopped.log.contains("no item missing in service \(service)"), stopped.log)
    }

    func testAnotherUidGetsNothingEvenWhenItCanConnect() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root, to run a client as the test user kc-test") }
        guard programExists("python3") else { throw XCTSkip("python3 is not installed") }
        let service = uniqueService()
        try Keychain(service: service).set("not-for-you", forKey: "token")
        try startServer(["--service", service])
        // The socket is 0600; open it up so that the server's own check is what refuses.
        chmod(directory, 0o755)
        chmod(socketPath, 0o666)
        let client = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(b"\\0" + os.urandom(8).hex().encode() + b"/unit/foo.service/token")
            s.connect(sys.argv[1])
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            print("received", len(data))
            """
        let result = try runCommand("/usr/sbin/runuser", ["-u", UnprivilegedUser.name, "--", "/usr/bin/python3", "-c", client, socketPath])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.output, "received 0\n")
        XCTAssertEqual(try fetch(), Array("not-for-you".utf8), "root is still served")
        let uid = try runCommand("/usr/bin/id", ["-u", UnprivilegedUser.name]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        let stopped = try XCTUnwrap(stopServer())
        XCTAssertTrue(stopped.log.contains("uid \(uid): only uid \(getuid() == 0 ? "0 is" : "0 and uid \(getuid()) are") served; nothing sent"), stopped.log)
    }

    func testPeersThatNeverReadDoNotHoldUpOthers() throws {
        let service = uniqueService()
        try Keychain(service: service).set("quick", forKey: "token")
        try startServer(["--service", service])
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<5 {
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var remote = try XCTUnwrap(UnixSocketAddress(socketPath))
            XCTAssertEqual(remote.withSockaddr { connect(descriptor, $0, $1) }, 0)
            idle.append(descriptor)
        }
        let started = Date()
        XCTAssertEqual(try fetch(), Array("quick".utf8))
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
    }

    func testASocketPassedBySystemdSocketActivationIsServedAndLeftInPlace() throws {
        guard programExists("python3") else { throw XCTSkip("python3 is not installed") }
        let service = uniqueService()
        try Keychain(service: service).set("activated", forKey: "token")
        // As systemd does for a .socket unit: the listening socket as descriptor 3,
        // LISTEN_PID naming the process that execs kc, LISTEN_FDS=1.
        let launcher = """
            import os, socket, sys
            path, kc, service = sys.argv[1:4]
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(16)
            if s.fileno() != 3:
                os.dup2(s.fileno(), 3)
            os.set_inheritable(3, True)
            os.environ["LISTEN_PID"] = str(os.getpid())
            os.environ["LISTEN_FDS"] = "1"
            os.execv(kc, [kc, "credential-server", "--service", service])
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", launcher, socketPath, builtKC, service]
        let log = Pipe()
        process.standardError = log
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        server = process
        serverLog = log
        var answer: [UInt8] = []
        for _ in 0..<100 {
            if FileManager.default.fileExists(atPath: socketPath) {
                answer = try fetch()
                if !answer.isEmpty { break }
            }
            usleep(50_000)
        }
        XCTAssertEqual(answer, Array("activated".utf8))
        let stopped = try XCTUnwrap(stopServer())
        XCTAssertEqual(stopped.status, 0, stopped.log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: socketPath), "systemd's socket is systemd's to remove")
    }

    /// Runs `kc credential-server` expecting it to refuse: its status and standard
    /// error, or a failure (and a kill) if it is still serving after 10 s.
    /// Starts a server that must refuse to start: exit 2 and a first line beginning
    /// with `message`.
    private func assertServerRefuses(_ arguments: [String], socket: String? = nil, saying message: String,
                                     file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try refusedServer(arguments, socket: socket)
        XCTAssertEqual(result.status, 2, result.standardError, file: file, line: line)
        XCTAssertTrue(result.standardError.hasPrefix(message), result.standardError, file: file, line: line)
    }

    private func refusedServer(_ arguments: [String], socket: String? = nil) throws -> (status: Int32, standardError: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtKC)
        process.arguments = ["credential-server", "--socket", socket ?? socketPath] + arguments
        let log = Pipe()
        process.standardError = log
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<400 where process.isRunning { usleep(25_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
            XCTFail("the server listened in a directory others can change")
        }
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: log.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    func testASocketDirectoryOthersCanWriteIsRefused() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        // Anyone could rename the socket away and listen in its place, and the units
        // would load the impostor's values.
        chmod(directory, 0o777)
        try assertServerRefuses(["--service", service], saying: "kc: \(directory!) is writable by its group or by others")
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath))
    }

    func testASocketInASharedStickyDirectoryIsRefused() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        // In /tmp another user may bind the socket's name while no server holds it
        // (before a start, after a stop or a reboot), and systemd would read their values.
        let socket = "/tmp/kc-test-credentials-\(getpid()).sock"
        try assertServerRefuses(["--service", service], socket: socket,
                                saying: "kc: /tmp is shared (writable by others, sticky): another user may bind the socket's name first")
        XCTAssertFalse(FileManager.default.fileExists(atPath: socket), "nothing is left behind")
    }

    func testASocketUnderADirectoryOthersCanWriteIsRefused() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        // kc would make `sub` 0700, but whoever may write its parent may rename it away
        // and put a directory of their own in its place.
        chmod(directory, 0o777)
        try assertServerRefuses(["--service", service], socket: directory + "/sub/credentials.sock",
                                saying: "kc: \(directory!) is writable by its group or by others")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/sub"), "nothing is left behind")
        // A link to a safe place, from a place others can change, is no safer.
        let safe = directory + "-safe"
        try FileManager.default.createDirectory(atPath: safe, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: safe) }
        try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: safe)
        try assertServerRefuses(["--service", service], socket: directory + "/link/credentials.sock",
                                saying: "kc: \(directory!) is writable by its group or by others")
        XCTAssertFalse(FileManager.default.fileExists(atPath: safe + "/credentials.sock"))
    }

    func testASocketDirectoryOfAnotherUserIsRefused() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root, to give the directory to the test user kc-test") }
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        let uid = try XCTUnwrap(UInt32(try runCommand("/usr/bin/id", ["-u", UnprivilegedUser.name]).output.trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertEqual(chown(directory, uid, gid_t(bitPattern: -1)), 0)
        chmod(directory, 0o755)
        try assertServerRefuses(["--service", service], saying: "kc: \(directory!) belongs to uid \(uid)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath))
    }

    func testSIGTERMLeavesASocketThatIsNotTheOneItBound() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        try startServer(["--service", service])
        // Its socket was removed by hand, and another server now listens at the path.
        XCTAssertEqual(rename(socketPath, directory + "/moved.sock"), 0)
        let other = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(other) }
        var address = try XCTUnwrap(UnixSocketAddress(socketPath))
        XCTAssertEqual(address.withSockaddr { bind(other, $0, $1) }, 0, String(cString: strerror(errno)))
        let stopped = try XCTUnwrap(stopServer())
        XCTAssertEqual(stopped.status, 0, stopped.log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: socketPath), "the other server's socket is not this one's to remove")
    }

    func testAServerNeedsAServiceToServe() throws {
        let result = try kc("credential-server", "--socket", socketPath)
        XCTAssertEqual(result.status, 64)
        XCTAssertTrue(result.standardError.hasPrefix("kc: name the service to serve: --service S"), result.standardError)
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath))
    }
}
