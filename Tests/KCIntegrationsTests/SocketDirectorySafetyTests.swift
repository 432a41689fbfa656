import Foundation
import KCIntegrations
import XCTest

/// Where `kc credential-server` may put its socket: only in a directory whose entries
/// no other user can change, up to `/` (CredentialServerTests run the server itself).
final class SocketDirectorySafetyTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = "/tmp/kc-socket-safety-\(getpid())-\(UUID().uuidString.prefix(8))"
        XCTAssertEqual(mkdir(directory, 0o700), 0)
        chmod(directory, 0o700)
    }

    override func tearDownWithError() throws {
        chmod(directory, 0o700)
        try? FileManager.default.removeItem(atPath: directory)
        try super.tearDownWithError()
    }

    func testAPrivateDirectoryUnderASafePathIsSafe() {
        XCTAssertNil(SocketDirectorySafety.problem(with: directory))
        XCTAssertNil(SocketDirectorySafety.unsafeDirectory(holding: directory), "/tmp is sticky, / is root's")
        XCTAssertNil(SocketDirectorySafety.problem(with: "/tmp"), "a sticky directory others may write")
    }

    func testADirectoryOthersCanWriteIsUnsafe() {
        chmod(directory, 0o777)
        XCTAssertEqual(SocketDirectorySafety.problem(with: directory), "is writable by its group or by others")
        chmod(directory, 0o770)
        XCTAssertEqual(SocketDirectorySafety.problem(with: directory), "is writable by its group or by others")
        chmod(directory, 0o1777)
        XCTAssertNil(SocketDirectorySafety.problem(with: directory), "unless it is sticky, above the socket's own")
    }

    func testASharedStickyDirectoryCannotHoldTheSocketItself() {
        let shared = "is shared (writable by others, sticky): another user may bind the socket's name first"
        XCTAssertEqual(SocketDirectorySafety.problem(with: "/tmp", holdsSocket: true), shared)
        XCTAssertEqual(SocketDirectorySafety.unsafeDirectory(holding: "/tmp")?.problem, shared)
        chmod(directory, 0o1777)
        XCTAssertEqual(SocketDirectorySafety.unsafeDirectory(holding: directory)?.directory, directory)
        chmod(directory, 0o700)
        XCTAssertNil(SocketDirectorySafety.unsafeDirectory(holding: directory), "a private directory under /tmp is fine")
    }

    func testASafeDirectoryUnderAnUnsafeOneIsUnsafe() {
        let sub = directory + "/sub"
        XCTAssertEqual(mkdir(sub, 0o700), 0)
        chmod(directory, 0o777)
        let found = SocketDirectorySafety.unsafeDirectory(holding: sub)
        XCTAssertEqual(found?.directory, directory)
        XCTAssertEqual(found?.problem, "is writable by its group or by others")
    }

    func testALinkFromAPlaceOthersCanChangeIsNoSafer() throws {
        let safe = directory + "-safe"
        XCTAssertEqual(mkdir(safe, 0o700), 0)
        defer { rmdir(safe) }
        try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: safe)
        XCTAssertNil(SocketDirectorySafety.unsafeDirectory(holding: directory + "/link"))
        chmod(directory, 0o777)
        XCTAssertEqual(SocketDirectorySafety.unsafeDirectory(holding: directory + "/link")?.directory, directory)
        // And the other way: a safe-looking path that resolves into an unsafe directory.
        chmod(directory, 0o700)
        chmod(safe, 0o777)
        let found = SocketDirectorySafety.unsafeDirectory(holding: directory + "/link")
        XCTAssertEqual(found?.directory, directory + "/link", "stat follows the link")
        XCTAssertEqual(found?.problem, "is writable by its group or by others")
    }

    func testADirectoryOfAnotherUserIsUnsafe() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root, to give the directory to another uid") }
        XCTAssertEqual(chown(directory, 65534, gid_t(bitPattern: -1)), 0)
        XCTAssertEqual(SocketDirectorySafety.problem(with: directory), "belongs to uid 65534")
    }

    func testADirectoryThatCannotBeExaminedIsUnsafe() {
        XCTAssertEqual(SocketDirectorySafety.problem(with: directory + "/missing"), "cannot be examined (No such file or directory)")
    }
}
