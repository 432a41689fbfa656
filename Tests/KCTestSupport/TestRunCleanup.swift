import Foundation
import XCTest

/// What a test run made outside its keyrings is removed when the test bundle finishes,
/// so that a run leaves nothing behind (`Tools/test.sh` checks): the folders this
/// process made in /tmp (named with its pid), and rootless podman's pause process
/// (`catatonit -P`, which keeps podman's user namespace alive) if the run started it.
/// Registered by ``KeyringTestCase`` at the first test.
public final class TestRunCleanup: NSObject, XCTestObservation {
    nonisolated(unsafe) private static var registered = false
    nonisolated(unsafe) private static var pausePIDsBefore: Set<Int32> = []

    public static func register() {
        guard !registered else { return }
        registered = true
        pausePIDsBefore = podmanPausePIDs()
        XCTestObservationCenter.shared.addTestObserver(TestRunCleanup())
    }

    public func testBundleDidFinish(_ testBundle: Bundle) {
        Self.removeTemporaryFolders()
        if getuid() != 0 {
            for pid in Self.podmanPausePIDs().subtracting(Self.pausePIDsBefore) { kill(pid, SIGTERM) }
        }
    }

    /// `/tmp/kc-test-*-PID` folders are removed whole; mount points
    /// (`/tmp/kc-mount-PID-*`) only if empty and not mounted, so a mount left by a
    /// failed test is never descended into.
    private static func removeTemporaryFolders() {
        let pid = String(getpid())
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for name in names {
            let path = "/tmp/" + name
            if name.hasPrefix("kc-test-"), name.hasSuffix("-" + pid) {
                try? FileManager.default.removeItem(atPath: path)
            } else if name.hasPrefix("kc-mount-\(pid)-"), !isMounted(path) {
                rmdir(path)
            }
        }
    }

    /// The pids of this uid's `catatonit -P` processes.
    static func podmanPausePIDs() -> Set<Int32> {
        var found: Set<Int32> = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(name),
                  let attributes = try? FileManager.default.attributesOfItem(atPath: "/proc/" + name),
                  (attributes[.ownerAccountID] as? NSNumber)?.uint32Value == getuid(),
                  let commandLine = FileManager.default.contents(atPath: "/proc/\(name)/cmdline")
            else { continue }
            let arguments = commandLine.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if arguments.first.map({ $0.hasSuffix("catatonit") }) == true, arguments.dropFirst().first == "-P" {
                found.insert(pid)
            }
        }
        return found
    }
}
