import Foundation
import KCIntegrations
import Keyrings
import XCTest

/// `kc exec --files`' directory, in-process, in a runtime directory of the test's own.
final class CredentialsDirectoryTests: XCTestCase {
    private var runtime: String!
    private var savedRuntime: String?

    override func setUpWithError() throws {
        try super.setUpWithError()
        savedRuntime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"]
        runtime = "/tmp/kc-credentials-directory-\(getpid())-\(UUID().uuidString.prefix(8))"
        XCTAssertEqual(mkdir(runtime, 0o700), 0)
        chmod(runtime, 0o700)
        setenv("XDG_RUNTIME_DIR", runtime, 1)
    }

    override func tearDownWithError() throws {
        if let savedRuntime { setenv("XDG_RUNTIME_DIR", savedRuntime, 1) } else { unsetenv("XDG_RUNTIME_DIR") }
        try? FileManager.default.removeItem(atPath: runtime)
        try super.tearDownWithError()
    }

    private func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : nil
    }

    private func entries() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: runtime)) ?? []
    }

    func testEachItemIsAReadOnlyFileInAPrivateDirectoryUntilRemoved() throws {
        let value: [UInt8] = [0, 1, 0xff] + Array("tail\n".utf8)
        let directory = try CredentialsDirectory.create(with: [
            PassedItem(service: "s", name: "token", value: value),
            PassedItem(service: "t", name: "cert.pem", value: Array("-----BEGIN-----\n".utf8)),
        ])
        XCTAssertTrue(directory.path.hasPrefix(runtime + "/kc-exec.\(getpid())."), directory.path)
        XCTAssertEqual(mode(directory.path), 0o500)
        XCTAssertEqual(mode(directory.path + "/token"), 0o400)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/token"))), value, "the exact bytes")
        XCTAssertEqual(try String(contentsOfFile: directory.path + "/cert.pem", encoding: .utf8), "-----BEGIN-----\n")
        directory.remove()
        XCTAssertEqual(entries(), [], "nothing is left")
    }

    func testTwoServicesWithAnItemOfOneNameAreRefusedAndLeaveNothing() {
        XCTAssertThrowsError(try CredentialsDirectory.create(with: [
            PassedItem(service: "a", name: "token", value: [1]), PassedItem(service: "b", name: "token", value: [2]),
        ])) { error in
            XCTAssertEqual((error as? CredentialsDirectory.Failure)?.message,
                           "services 'a' and 'b' both have an item 'token'; pass them in separate 'kc exec' runs, or use --env")
        }
        XCTAssertEqual(entries(), [])
    }

    func testARuntimeDirectoryOthersCanWriteIsNotUsed() throws {
        chmod(runtime, 0o777)
        let directory = try CredentialsDirectory.create(with: [PassedItem(service: "s", name: "token", value: [1])])
        defer { directory.remove() }
        XCTAssertTrue(directory.path.hasPrefix("/dev/shm/kc-exec."), "sticky /dev/shm instead: \(directory.path)")
    }

    func testADirectoryLeftByAKilledKcIsRemovedByTheNextOne() throws {
        var dead: pid_t = 99_999
        while kill(dead, 0) == 0 || errno != ESRCH { dead += 1 }
        let stale = runtime + "/kc-exec.\(dead).1"
        XCTAssertEqual(mkdir(stale, 0o700), 0)
        XCTAssertTrue(FileManager.default.createFile(atPath: stale + "/token", contents: Data("old".utf8)))
        chmod(stale, 0o500)
        let foreign = runtime + "/kc-exec.\(dead).2"
        XCTAssertEqual(mkdir(foreign, 0o755), 0)
        chmod(foreign, 0o755)

        let directory = try CredentialsDirectory.create(with: [PassedItem(service: "s", name: "token", value: [1])])
        directory.remove()

        XCTAssertFalse(FileManager.default.fileExists(atPath: stale), "mode 0500, a dead pid: kc's")
        XCTAssertTrue(FileManager.default.fileExists(atPath: foreign), "mode 0755 is not a mode kc gives")
    }
}
