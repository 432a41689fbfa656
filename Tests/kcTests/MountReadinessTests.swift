import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `kc mount --foreground` under a `Type=notify` unit: READY=1 reaches `$NOTIFY_SOCKET`
/// once the mount answers, as systemd expects before it starts the unit's dependents.
final class MountReadinessTests: KeyringTestCase {
    func testForegroundMountSendsReadyToAnAbstractNotifySocketOnceTheMountAnswers() throws {
        try checkReadiness(address: DatagramReceiver.uniqueAddress(abstract: true))
    }

    func testForegroundMountSendsReadyToAPathNotifySocketOnceTheMountAnswers() throws {
        try checkReadiness(address: DatagramReceiver.uniqueAddress(abstract: false))
    }

    private func checkReadiness(address: String) throws {
        try MountFixture.requireFUSE()
        let directory = try MountFixture.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let notifications = try DatagramReceiver(address: address)
        defer { notifications.close() }

        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: builtKC)
        daemon.arguments = ["mount", "--foreground", directory]
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = address
        daemon.environment = environment
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        defer {
            if daemon.isRunning {
                _ = try? kc("umount", directory)
                daemon.waitUntilExit()
            }
        }

        let ready = notifications.receive(within: 10)
        // The moment READY=1 arrives, the mount point is the FUSE mount and answers.
        let filesystemType = try runCommand("/usr/bin/stat", ["-f", "-c", "%t", directory])
        XCTAssertEqual(ready.map { String(decoding: $0, as: UTF8.self) }, "READY=1")
        XCTAssertEqual(filesystemType.output, "65735546\n", "FUSE_SUPER_MAGIC: the mount, not the empty directory (\(filesystemType))")
        XCTAssertTrue(isMounted(directory))
        XCTAssertNil(notifications.receive(within: 0.2), "READY=1 is sent once")

        XCTAssertEqual(try kc("umount", directory).status, 0)
        daemon.waitUntilExit()
        XCTAssertEqual(daemon.terminationStatus, 0)
        XCTAssertEqual(notifications.receive(within: 2).map { String(decoding: $0, as: UTF8.self) }, "STOPPING=1")
    }

    func testBackgroundMountDoesNotNotifyTheServiceManager() throws {
        try MountFixture.requireFUSE()
        let notifications = try DatagramReceiver(address: DatagramReceiver.uniqueAddress(abstract: true))
        defer { notifications.close() }
        let directory = try MountFixture.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notifications.address
        let result = try runCommand(builtKC, ["mount", directory], environment: environment)
        XCTAssertEqual(result.status, 0, "\(result)")
        defer { _ = try? kc("umount", directory) }
        // `kc mount` (background) returns when ready; under Type=notify only the
        // foreground form is the unit's main process.
        XCTAssertNil(notifications.receive(within: 0.5))
    }
}
