import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Findings of the hostile review of kc's front (docs/FRONT.md), held as regressions:
/// each runs the front and the full kc on the same argv, environment and limits, as
/// FrontTests does, and asserts the same exit status, output and keychain state.
final class FrontAttackTests: KeyringTestCase {
    /// A folder where no vault is, so the front serves what it serves.
    private var noVault = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        noVault = FileManager.default.temporaryDirectory.appendingPathComponent("kc-front-attack-\(getpid())-no-vault").path
    }

    private var environment: [String: String] {
        ProcessInfo.processInfo.environment.filter { $0.key != "KC_AUDIT" && $0.key != "SECRET_ID" }
            .merging(["XDG_DATA_HOME": noVault]) { $1 }
    }

    /// Runs `program` with `arguments` after bash's `limits` (`ulimit ...;`).
    private func run(_ program: String, _ arguments: [String], input: [UInt8], limits: String) throws -> CommandResult {
        try runCommand("/bin/bash", ["-c", "\(limits) exec \"$0\" \"$@\"", program] + arguments, input: input, environment: environment)
    }

    private func values(_ service: String) throws -> [String] {
        let keychain = try Keychain(service: service)
        return try keychain.allKeys().sorted().map { "\($0): \(try keychain.data(forKey: $0)?.count ?? 0) bytes" }
    }

    /// The front hands a set it read over with the bytes as standard input. In a memory
    /// file, RLIMIT_FSIZE limited them as it limits any file: with `ulimit -f` below the
    /// value's size the write raised SIGXFSZ and the front died (status 153 in a shell,
    /// nothing printed, nothing stored), where the full kc, which writes no file, stores
    /// the value. A pipe comes first now, and a memory file only with the limit lifted.
    func testAFileSizeLimitDoesNotKillAHandedOverSet() throws {
        let folder = URL(fileURLWithPath: builtFullKC).deletingLastPathComponent().path
        let front = folder + "/kc-front"
        guard FileManager.default.isExecutableFile(atPath: front), FileManager.default.isExecutableFile(atPath: folder + "/kc-full")
        else { throw XCTSkip("the front was not built (bash Tools/build-front.sh)") }
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let cases: [(limits: String, item: String, input: [UInt8])] = [
            ("ulimit -f 0;", "new", Array("a new item".utf8)),  // a new item: handed over
            ("ulimit -f 1;", "token", [UInt8](repeating: 0x61, count: page + 1)),  // over a page: handed over
        ]
        for (limits, item, input) in cases {
            let reset = {
                _ = try keychain.removeAll()
                try keychain.set("old", forKey: "token")
            }
            try reset()
            let byFront = try run(front, ["set", service, item], input: input, limits: limits)
            let frontState = try values(service)
            try reset()
            let byFull = try run(builtFullKC, ["set", service, item], input: input, limits: limits)
            let fullState = try values(service)
            XCTAssertEqual(byFront.status, byFull.status, "\(limits) kc set \(item): front \(byFront) vs full \(byFull)")
            XCTAssertEqual(byFront.standardError, byFull.standardError, "\(limits) kc set \(item)")
            XCTAssertEqual(frontState, fullState, "\(limits) kc set \(item): what was stored")
        }
        _ = try keychain.removeAll()
    }

    /// A crash signal while the full kc holds a value (here SIGSEGV while `kc get` waits
    /// to write it to a full pipe) runs the Swift runtime's backtracer, whose register
    /// dump prints 16 bytes of memory at each register that points somewhere: the
    /// value's own bytes, on standard error (a log, a CI transcript). The front, with no
    /// backtracer and no core, prints nothing. The full kc is what every handed-over
    /// command runs (a get with KC_AUDIT, the helpers, kc exec), so it must not either.
    func testACrashSignalPrintsNoValueBytes() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        // More than the 4096-byte pipe below holds, and within an ordinary user's quota
        // after the collector frees what earlier tests removed.
        TestQuota.waitForRoom(bytes: 8000)
        let value = Array("TOPSECRET-".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 5990)
        try keychain.set(value, forKey: "token")
        defer { _ = try? keychain.removeAll() }
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        _ = fcntl(ends[1], 1031 /* F_SETPIPE_SZ */, 4096)  // the value does not fit: kc waits in write(2)
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("kc-front-attack-\(getpid())-stderr").path
        FileManager.default.createFile(atPath: errors, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errors) }
        let errorHandle = try XCTUnwrap(FileHandle(forWritingAtPath: errors))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtFullKC)
        process.arguments = ["get", service, "token"]
        process.environment = environment
        process.standardOutput = FileHandle(fileDescriptor: ends[1], closeOnDealloc: false)
        process.standardError = errorHandle
        try process.run()
        close(ends[1])
        usleep(1_000_000)
        kill(process.processIdentifier, SIGSEGV)
        // After its backtrace the full kc may stay blocked in the write: end it.
        for _ in 0..<100 where process.isRunning { usleep(100_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        close(ends[0])
        try errorHandle.close()
        let printed = try String(decoding: Data(contentsOf: URL(fileURLWithPath: errors)), as: UTF8.self)
        XCTAssertFalse(printed.contains("TOPSECRET"), "the value's bytes on standard error:\n\(printed.split(separator: "\n").filter { $0.contains("TOPSECRET") }.joined(separator: "\n"))")
    }

    /// Inside a user namespace that does not map the caller's uid, every key's owner
    /// shows as the overflow uid, the caller's own too: an owner check passes for another
    /// user's keyring planted in a shared session. The full kc uses no keyring there and
    /// says why; the front hands such a command over.
    func testAnUnmappedUserNamespaceIsRefusedByBothPaths() throws {
        guard programExists("unshare") else { throw XCTSkip("unshare (util-linux) is not installed") }
        let folder = URL(fileURLWithPath: builtFullKC).deletingLastPathComponent().path
        guard FileManager.default.isExecutableFile(atPath: folder + "/kc-front") else { throw XCTSkip("the front was not built") }
        let service = uniqueService()
        try Keychain(service: service).set("mine", forKey: "token")
        defer { _ = try? Keychain(service: service).removeAll() }
        let probe = try runCommand("/usr/bin/env", ["unshare", "-U", "/bin/true"], environment: environment)
        guard probe.status == 0 else { throw XCTSkip("unprivileged user namespaces are not allowed here: \(probe.standardError)") }
        for arguments in [["get", service, "token"], ["ls", service], ["rm", service, "token"]] {
            let front = try runCommand("/usr/bin/env", ["unshare", "-U", folder + "/kc-front"] + arguments, environment: environment)
            let full = try runCommand("/usr/bin/env", ["unshare", "-U", builtFullKC] + arguments, environment: environment)
            XCTAssertEqual(front.status, 2, "\(arguments): \(front)")
            XCTAssertEqual(front.status, full.status, "\(arguments)")
            XCTAssertEqual(front.standardOutput, full.standardOutput, "\(arguments)")
            XCTAssertEqual(front.standardError, full.standardError, "\(arguments)")
            XCTAssertTrue(front.standardError.contains("does not map your uid"), "\(arguments): \(front)")
        }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "mine", "nothing changed")
    }

    /// The full kc's hidden step for the front (`---remove-service-if-empty SERVICE`)
    /// takes only a name `kc rm` takes, and refuses others as `kc rm` does.
    func testTheHiddenRemovalTakesOnlyAServiceName() throws {
        for name in ["", "a/b", "..", String(repeating: "s", count: 300)] {
            let result = try runCommand(builtFullKC, ["---remove-service-if-empty", name], environment: environment)
            XCTAssertEqual(result.status, 64, "'\(name)': \(result)")
            XCTAssertTrue(result.standardError.hasPrefix("kc: "), "'\(name)': \(result)")
        }
    }
}
