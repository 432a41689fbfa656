import Foundation
import KCTestSupport
import XCTest

/// What `kc mount` and `kc umount` refuse to do: stack a second daemon, unmount a
/// filesystem that is not kc's or not the caller's, follow a link planted at the
/// mount point, or hang behind a stopped daemon.
final class MountAttackTests: MountingTestCase {
    func testMountingWhereKcIsAlreadyMountedIsRefusedAndKeepsOneMount() throws {
        let mount = try mount()
        defer { forceUnmount(mount.path) }
        let again = try kc("mount", mount.path)
        XCTAssertEqual(again.status, 2, "\(again)")
        XCTAssertTrue(again.standardError.hasPrefix("kc: \(mount.path) is already a kc mount"), again.standardError)
        XCTAssertTrue(again.standardError.hasSuffix("; unmount it first: kc umount \(mount.path)\n"), again.standardError)
        XCTAssertEqual(again.standardError.filter { $0 == "\n" }.count, 1, again.standardError)
        XCTAssertEqual(kcMounts(at: mount.path), 1)
    }

    func testAMountPointWithASpaceIsRecognisedAndUnmounted() throws {
        try MountFixture.requireFUSE()
        let path = try MountFixture.makeDirectory() + " with space"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        defer { forceUnmount(path); try? FileManager.default.removeItem(atPath: path) }
        XCTAssertEqual(try kc("mount", path).status, 0)
        XCTAssertEqual(try kc("mount", path).status, 2, "a second mount at the same path is refused")
        XCTAssertEqual(kcMounts(at: path), 1)
        let unmount = try kc("umount", path + "/")
        XCTAssertEqual(unmount.status, 0, "\(unmount)")
        XCTAssertEqual(kcMounts(at: path), 0)
    }

    func testUmountOfATmpfsIsRefusedAndTheTmpfsStaysWithItsFile() throws {
        guard getuid() == 0 else { throw XCTSkip("only root can mount a tmpfs to aim kc umount at") }
        let path = try MountFixture.makeDirectory()
        defer { forceUnmount(path); try? FileManager.default.removeItem(atPath: path) }
        XCTAssertEqual(try runCommand("/bin/mount", ["-t", "tmpfs", "tmpfs", path]).status, 0)
        XCTAssertTrue(FileManager.default.createFile(atPath: path + "/kept", contents: Data("still here".utf8)))

        let result = try kc("umount", path)
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, "kc: \(path) is a tmpfs mount, not a kc mount; kc umount unmounts only kc mounts\n")
        XCTAssertTrue(isMounted(path))
        XCTAssertEqual(try String(contentsOfFile: path + "/kept", encoding: .utf8), "still here")
    }

    func testUmountOfADirectoryThatIsNotMountedSaysSo() throws {
        let path = try MountFixture.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try kc("umount", path)
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, "kc: \(path) is not a mount point\n")
    }

    func testUmountOfASymbolicLinkIsRefusedEvenWhenItPointsAtYourMount() throws {
        let mount = try mount()
        let link = mount.path + "-link"
        XCTAssertEqual(symlink(mount.path, link), 0)
        defer { unlink(link) }
        let result = try kc("umount", link)
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, "kc: \(link) is a symbolic link; name the mount point itself\n")
        XCTAssertEqual(kcMounts(at: mount.path), 1)
    }

    func testMountOnASymbolicLinkIsRefused() throws {
        try MountFixture.requireFUSE()
        let target = try MountFixture.makeDirectory()
        let link = target + "-link"
        XCTAssertEqual(symlink(target, link), 0)
        defer { forceUnmount(target); unlink(link); try? FileManager.default.removeItem(atPath: target) }
        let result = try kc("mount", link)
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, "kc: \(link) is a symbolic link; name the mount point itself\n")
        XCTAssertEqual(kcMounts(at: target), 0)
    }

    func testUmountOfAnotherUsersKcMountIsRefusedEvenToRoot() throws {
        try MountFixture.requireFUSE()
        guard LocalUser.available, UnprivilegedUser.grantFUSEDevice(to: LocalUser.alice.rawValue) else {
            throw XCTSkip("needs root, the throwaway users and /dev/fuse usable by them")
        }
        let path = try MountFixture.makeDirectory(owner: LocalUser.alice.rawValue)
        defer { forceUnmount(path); try? FileManager.default.removeItem(atPath: path) }
        let mounted = try LocalUser.alice.run("\"$KC\" mount '\(path)'")
        guard mounted.status == 0 else { throw XCTSkip("alice cannot mount here: \(mounted)") }

        let result = try kc("umount", path)
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, "kc: \(path) is a kc mount of uid \(LocalUser.alice.uid), not yours; "
            + "kc umount unmounts only your own (root can force it: fusermount3 -u \(path))\n")
        XCTAssertEqual(kcMounts(at: path), 1)
        XCTAssertEqual(try LocalUser.alice.run("\"$KC\" umount '\(path)'").status, 0, "its owner still can")
        XCTAssertEqual(kcMounts(at: path), 0)
    }

    func testMountingOverANonEmptyDirectoryWarnsAndHidesItsFilesUntilUnmounted() throws {
        try MountFixture.requireFUSE()
        let path = try MountFixture.makeDirectory()
        defer { forceUnmount(path); try? FileManager.default.removeItem(atPath: path) }
        for name in ["a", "b"] { XCTAssertTrue(FileManager.default.createFile(atPath: path + "/" + name, contents: Data("x".utf8))) }

        let result = try kc("mount", path)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.standardError, "kc: warning: \(path) is not empty: its 2 entries stay hidden until kc umount \(path)\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/a"), "the mount hides them")
        XCTAssertEqual(try kc("umount", path).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "/a"), "and unmounting shows them again")
    }

    func testAStoppedDaemonIsReportedByKcMountAndKcDoctorWithinSeconds() throws {
        let mount = try mount()
        guard let daemon = daemonProcess(serving: mount.path) else { return XCTFail("no kc-mountd serves \(mount.path)") }
        XCTAssertEqual(kill(daemon, SIGSTOP), 0)
        defer { kill(daemon, SIGCONT) }
        let hint = "resume it with kill -CONT \(daemon), or detach the mount with fusermount3 -u -z \(mount.path)"

        let started = Date()
        let again = try runCommand("/usr/bin/timeout", ["10", builtKC, "mount", mount.path])
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertEqual(again.status, 2, "\(again)")
        XCTAssertEqual(again.standardError,
                       "kc: \(mount.path) does not answer: its daemon kc-mountd (pid \(daemon)) is stopped; \(hint)\n")

        let doctorStarted = Date()
        let doctor = try runCommand("/usr/bin/timeout", ["10", builtKC, "doctor"])
        XCTAssertLessThan(Date().timeIntervalSince(doctorStarted), 5)
        XCTAssertEqual(doctor.status, 2, "\(doctor)")
        XCTAssertTrue(doctor.output.split(separator: "\n").contains(
            "fail mount \(mount.path): does not answer: its daemon kc-mountd (pid \(daemon)) is stopped; \(hint)"), doctor.output)
    }

    func testDoctorSaysALiveMountAnswers() throws {
        let mount = try mount()
        guard let daemon = daemonProcess(serving: mount.path) else { return XCTFail("no kc-mountd serves \(mount.path)") }
        let doctor = try kc("doctor")
        XCTAssertTrue(doctor.output.split(separator: "\n").contains(
            "ok   mount \(mount.path): answers (kc-mountd pid \(daemon))"), doctor.output)
    }

    // MARK: - Helpers

    /// How many `fuse.kc` mounts /proc/self/mountinfo lists at `path`.
    private func kcMounts(at path: String) -> Int {
        let escaped = path.replacingOccurrences(of: "\\", with: "\\134").replacingOccurrences(of: " ", with: "\\040")
        let table = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return table.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ")
            guard fields.count > 4, fields[4] == Substring(escaped), let dash = fields.firstIndex(of: "-") else { return false }
            return fields.count > dash + 1 && fields[dash + 1] == "fuse.kc"
        }.count
    }
}
