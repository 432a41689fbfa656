import Foundation
import KCTestSupport
import XCTest

/// `kc doctor`'s advice for /dev/fuse tells a device closed to the user (its mode or ACL:
/// grant it) from a missing one (load the module). These change /dev/fuse's ACL for a
/// moment and restore it however the test ends; run them under /tmp/kc-test.lock, as
/// every test that uses /dev/fuse is.
final class DoctorTests: KeyringTestCase {
    /// The /dev/fuse entry of `kc doctor --json` run by `run`, as (status, detail).
    private func fuseCheck(_ result: CommandResult) throws -> (status: String, detail: String) {
        let json = try JSONSerialization.jsonObject(with: Data(result.standardOutput)) as? [String: Any]
        let checks = try XCTUnwrap(json?["checks"] as? [[String: Any]], "\(result)")
        let fuse = try XCTUnwrap(checks.first { $0["name"] as? String == "/dev/fuse" }, "\(result)")
        return (fuse["status"] as? String ?? "", fuse["detail"] as? String ?? "")
    }

    func testAFUSEDeviceClosedToTheUserSaysHowToOpenItNotToLoadTheModule() throws {
        guard LocalUser.available else { throw XCTSkip("needs root to make the test users") }
        guard FileManager.default.fileExists(atPath: "/dev/fuse") else { throw XCTSkip("no /dev/fuse here") }
        guard programExists("setfacl"), programExists("getfacl") else { throw XCTSkip("setfacl and getfacl (acl) are needed") }
        let user = LocalUser.carol.rawValue
        // Save the mode and ACL as they are; put them back however the test ends.
        let saved = try runCommand("/usr/bin/getfacl", ["--absolute-names", "/dev/fuse"])
        XCTAssertEqual(saved.status, 0, "\(saved)")
        let backup = NSTemporaryDirectory() + "kc-test-\(getpid())-fuse.acl"
        try Data(saved.standardOutput).write(to: URL(fileURLWithPath: backup))
        defer {
            let restored = try? runCommand("/usr/bin/setfacl", ["--restore=\(backup)"])
            XCTAssertEqual(restored?.status, 0, "restoring /dev/fuse's ACL: \(String(describing: restored))")
            try? FileManager.default.removeItem(atPath: backup)
        }

        // A named entry with no rights closes the device to this user, whatever others get.
        XCTAssertEqual(try runCommand("/usr/bin/setfacl", ["-m", "u:\(user):---", "/dev/fuse"]).status, 0)
        let closed = try fuseCheck(LocalUser.carol.run("\"$KC\" doctor --json"))
        XCTAssertEqual(closed.status, "warn")
        XCTAssertTrue(closed.detail.hasPrefix("present but not open to you (Permission denied by its mode or ACL; mode 0"), closed.detail)
        XCTAssertTrue(closed.detail.contains("grant it with 'sudo setfacl -m u:\(user):rw /dev/fuse'"), closed.detail)
        XCTAssertFalse(closed.detail.contains("modprobe"), "a device that is there needs no module: \(closed.detail)")

        // The advice works.
        XCTAssertEqual(try runCommand("/usr/bin/setfacl", ["-m", "u:\(user):rw", "/dev/fuse"]).status, 0)
        let granted = try fuseCheck(LocalUser.carol.run("\"$KC\" doctor --json"))
        XCTAssertEqual(granted.status, "ok", granted.detail)
        XCTAssertEqual(granted.detail, "present and openable")
    }

    func testAMissingFUSEDeviceSaysToLoadTheModule() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root for a private mount namespace") }
        // In a mount namespace of its own, /dev is an empty tmpfs: no /dev/fuse.
        let script = "mount -t tmpfs kc-test-dev /dev && exec '\(builtKC)' doctor --json"
        let result = try runCommand("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c", script])
        guard !result.standardOutput.isEmpty else { throw XCTSkip("cannot make a private mount namespace here: \(result)") }
        let missing = try fuseCheck(result)
        XCTAssertEqual(missing.status, "warn")
        XCTAssertEqual(missing.detail,
                       "missing, so 'kc mount' cannot work: load the fuse module with 'sudo modprobe fuse' (in a container, pass --device /dev/fuse)")
    }
}
