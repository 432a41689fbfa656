import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// The FUSE view, mounted by the built `kc` and used with ordinary tools and syscalls.
final class MountTests: KeyringTestCase {
    private var mount: MountFixture!

    override func setUpWithError() throws {
        try super.setUpWithError()
        mount = try MountFixture()
    }

    override func tearDownWithError() throws {
        mount?.unmount()
        try super.tearDownWithError()
    }

    private func sh(_ script: String) throws -> CommandResult {
        try runCommand("/bin/bash", ["-c", "set -e; cd '\(mount.path)'; \(script)"])
    }

    func testCatReadsTheExactValueAndLsShowsSizeModeAndOwner() throws {
        let service = uniqueService()
        let value: [UInt8] = [0, 1, 2, 10, 255] + Array("tail\n".utf8)
        try Keychain(service: service).set(value, forKey: "token")
        XCTAssertEqual(try runCommand("/bin/cat", [mount.file(service, "token")]).standardOutput, value)
        let attributes = try FileManager.default.attributesOfItem(atPath: mount.file(service, "token"))
        XCTAssertEqual(attributes[.size] as? Int, value.count)
        XCTAssertEqual(attributes[.posixPermissions] as? Int, 0o600)
        XCTAssertEqual(attributes[.ownerAccountID] as? Int, Int(getuid()))
        let directory = try FileManager.default.attributesOfItem(atPath: mount.file(service))
        XCTAssertEqual(directory[.posixPermissions] as? Int, 0o700)
        XCTAssertEqual(directory[.type] as? FileAttributeType, .typeDirectory)
        let listing = try sh("ls -l '\(service)'").output
        XCTAssertTrue(listing.contains("-rw------- 1 "), listing)
        XCTAssertEqual(try sh("stat -c '%s %a %U' '\(service)/token'").output, "\(value.count) 600 \(NSUserName())\n")
    }

    func testShellRedirectionCpMvRmMkdirRmdir() throws {
        let service = uniqueService(), other = uniqueService()
        let result = try sh("""
            mkdir '\(service)'
            printf 'v1' > '\(service)/a'
            printf 'copied' > /tmp/kc-cp-src.$$; cp /tmp/kc-cp-src.$$ '\(service)/b'; rm /tmp/kc-cp-src.$$
            mv '\(service)/a' '\(service)/renamed'
            mkdir '\(other)'
            mv '\(service)/b' '\(other)/moved'
            ls '\(service)' '\(other)'
            rm '\(other)/moved'
            rmdir '\(other)'
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.string(forKey: "renamed"), "v1")
        XCTAssertNil(try keychain.string(forKey: "a"))
        XCTAssertNil(try Keychain(service: other).string(forKey: "moved"))
        XCTAssertFalse(try Keychain.services().contains(KeyName(other)))
        XCTAssertEqual(try sh("rmdir '\(service)' 2>&1 || true").output.contains("Directory not empty"), true)
    }

    func testChangesFromTheCLIShowAtOnce() throws {
        let service = uniqueService()
        for round in 0..<20 {
            let value = String(repeating: "x", count: round + 1) + "\(round)"
            try kc("set", service, "live", input: Array(value.utf8))
            XCTAssertEqual(try runCommand("/bin/cat", [mount.file(service, "live")]).output, value, "no stale value or size")
        }
        try kc("rm", service, "live")
        XCTAssertFalse(FileManager.default.fileExists(atPath: mount.file(service, "live")))
    }

    func testEditorsThatSaveThroughATempFileAndRename() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("user=alice\nport=1\n", forKey: "config")
        let result = try sh("sed -i 's/port=1/port=2/' '\(service)/config'")
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "config"), "user=alice\nport=2\n")
        XCTAssertEqual(try Keychain(service: service).item("config")?.accessibility, .afterFirstUnlock, "the level survives the editor")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["config"], "no temp file left behind")
    }

    func testExtendedAttributesAndDf() throws {
        guard programExists("getfattr") else { throw XCTSkip("getfattr is not installed (package attr)") }
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "k")
        let file = mount.file(service, "k")
        XCTAssertEqual(try runCommand("/usr/bin/getfattr", ["--only-values", "-n", "user.kc.access", file]).output, "when-unlocked")
        XCTAssertEqual(try runCommand("/usr/bin/setfattr", ["-n", "user.kc.access", "-v", "always", file]).status, 0)
        XCTAssertEqual(try runCommand("/usr/bin/setfattr", ["-n", "user.kc.timeout", "-v", "600", file]).status, 0)
        XCTAssertEqual(try Keychain(service: service).item("k")?.accessibility, .always)
        let left = Int(try runCommand("/usr/bin/getfattr", ["--only-values", "-n", "user.kc.timeout", file]).output) ?? 0
        XCTAssertTrue((540...600).contains(left), "\(left)")
        let denied = try runCommand("/usr/bin/setfattr", ["-n", "user.kc.serial", "-v", "1", file])
        XCTAssertNotEqual(denied.status, 0)
        let df = try runCommand("/bin/df", ["--output=itotal,target", mount.path]).output
        XCTAssertTrue(df.contains(String(KeyQuota.current()?.maxKeys ?? -1)), df)
    }

    func testErrorsAShellUserUnderstands() throws {
        let service = uniqueService()
        try Keychain(service: service).set("kept", forKey: "k")
        XCTAssertEqual(writeFile(mount.file(service, "k"), [UInt8](repeating: 1, count: 32768)), EFBIG)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "kept", "and nothing stored was harmed")
        XCTAssertEqual(writeFile(mount.file(service, "missing-dir", "x"), [1]), ENOENT)
        XCTAssertEqual(writeFile(mount.file(service, String(repeating: "n", count: 256)), [1]), ENAMETOOLONG)
        XCTAssertEqual(writeFile(mount.file("toplevel-file"), [1]), EPERM, "files live in services")
        XCTAssertEqual(writeFile(mount.file(service, "k"), Array("ok".utf8)), 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "ok")
    }

    func testConcurrentReadersSeeOnlyWholeValues() throws {
        let service = uniqueService()
        let a = String(repeating: "A", count: 3000), b = String(repeating: "B", count: 5000)
        try Keychain(service: service).set(a, forKey: "v")
        let file = mount.file(service, "v")
        let script = """
            for w in 1 2; do (for i in $(seq 40); do printf '%s' "$A" > '\(file)'; printf '%s' "$B" > '\(file)'; done) & done
            for r in 1 2 3; do (for i in $(seq 80); do v=$(cat '\(file)'); if [ "$v" != "$A" ] && [ "$v" != "$B" ]; then echo "TORN ${#v}"; fi; done) & done
            wait
            """
        let result = try runCommand("/bin/bash", ["-c", script], environment: ["A": a, "B": b, "PATH": "/usr/bin:/bin"])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertFalse(result.output.contains("TORN"), result.output)
        let final = try Keychain(service: service).string(forKey: "v")
        XCTAssertTrue(final == a || final == b)
    }
}

/// Mount options and the daemon's lifecycle.
final class MountLifecycleTests: KeyringTestCase {
    func testReadOnlyServiceMount() throws {
        let service = uniqueService()
        try Keychain(service: service).set("secret", forKey: "db")
        let mount = try MountFixture(options: ["--read-only", "--service", service])
        defer { mount.unmount() }
        XCTAssertEqual(try String(contentsOfFile: mount.file("db"), encoding: .utf8), "secret")
        XCTAssertEqual(writeFile(mount.file("db"), [1]), EROFS)
        XCTAssertEqual(writeFile(mount.file("new"), [1]), EROFS)
        XCTAssertEqual(unlink(mount.file("db")) == 0 ? 0 : errno, EROFS)
        let attributes = try FileManager.default.attributesOfItem(atPath: mount.file("db"))
        XCTAssertEqual(attributes[.posixPermissions] as? Int, 0o400)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "db"), "secret")
    }

    func testKillingTheDaemonLosesNothingAndTheNextMountRecovers() throws {
        try MountFixture.requireFUSE()
        let service = uniqueService()
        let path = try MountFixture.makeDirectory()
        defer { _ = try? kc("umount", path); try? FileManager.default.removeItem(atPath: path) }
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: builtKC)
        daemon.arguments = ["mount", "--foreground", path]
        try daemon.run()
        for _ in 0..<200 where !isMounted(path) { usleep(25_000) }
        XCTAssertTrue(isMounted(path))
        try FileManager.default.createDirectory(atPath: path + "/" + service, withIntermediateDirectories: false)
        for index in 0..<10 { XCTAssertEqual(writeFile("\(path)/\(service)/item\(index)", Array("value\(index)".utf8)), 0) }

        kill(daemon.processIdentifier, SIGKILL)
        daemon.waitUntilExit()
        var info = stat()
        XCTAssertEqual(stat(path, &info) == 0 ? 0 : errno, ENOTCONN, "the dead daemon's mount is stale")
        for index in 0..<10 { XCTAssertEqual(try Keychain(service: service).string(forKey: "item\(index)"), "value\(index)") }

        let again = try kc("mount", path)
        XCTAssertEqual(again.status, 0, "\(again)")
        XCTAssertTrue(again.standardError.contains("detaching"), again.standardError)
        XCTAssertEqual(try String(contentsOfFile: "\(path)/\(service)/item3", encoding: .utf8), "value3")
    }

    func testNewFilesTakeTheMountsAccessLevel() throws {
        let service = uniqueService()
        let mount = try MountFixture(options: ["--access", "after-first-unlock"])
        defer { mount.unmount() }
        XCTAssertEqual(mkdir(mount.file(service), 0o700), 0)
        XCTAssertEqual(writeFile(mount.file(service, "new"), Array("v".utf8)), 0)
        XCTAssertEqual(try Keychain(service: service).item("new")?.accessibility, .afterFirstUnlock)
    }

    func testTheDaemonRefusesToRunSetuid() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root to make a setuid copy") }
        // A copy owned by the test user with the setuid bit: run by root, its effective
        // uid differs from the real one.
        let copy = URL(fileURLWithPath: UnprivilegedUser.kcCopy).deletingLastPathComponent().path + "/kc-mountd-setuid"
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.copyItem(atPath: URL(fileURLWithPath: builtKC).deletingLastPathComponent().path + "/kc-mountd", toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        XCTAssertEqual(try runCommand("/bin/chown", [UnprivilegedUser.name, copy]).status, 0)
        XCTAssertEqual(chmod(copy, 0o4755), 0)
        let result = try runCommand(copy, ["/tmp"])
        XCTAssertEqual(result.status, 2)
        XCTAssertEqual(result.standardError, "kc: refusing to run setuid or setgid; run kc mount as the user whose keys it shows\n")
    }

    func testMountErrorsAreOneLine() throws {
        try MountFixture.requireFUSE()
        let result = try kc("mount", "/nonexistent/kc-mount-point")
        XCTAssertEqual(result.status, 2)
        XCTAssertEqual(result.standardError, "kc: /nonexistent/kc-mount-point is not a directory; create it first: mkdir -p /nonexistent/kc-mount-point\n")
    }

    func testOtherUsersAreRefused() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root to act as a second user") }
        let service = uniqueService()
        try Keychain(service: service).set("root-only", forKey: "k")
        let mount = try MountFixture()
        defer { mount.unmount() }
        let result = try UnprivilegedUser.run("cat '\(mount.file(service, "k"))' 2>&1; ls '\(mount.path)' 2>&1; echo done")
        XCTAssertFalse(result.output.contains("root-only"), "\(result)")
        XCTAssertTrue(result.output.contains("Permission denied"), "\(result)")
    }

    func testAnUnprivilegedUsersMount() throws {
        try MountFixture.requireFUSE()
        guard UnprivilegedUser.available else { throw XCTSkip("runs as the test user, which needs root to create") }
        guard UnprivilegedUser.grantFUSEDevice() else { throw XCTSkip("the test user cannot be given /dev/fuse here") }
        let path = try MountFixture.makeDirectory(owner: UnprivilegedUser.name)
        defer {
            if isMounted(path) { _ = try? UnprivilegedUser.run("\"$KC\" umount '\(path)'", freshSession: false) }
            try? FileManager.default.removeItem(atPath: path)
        }
        let result = try UnprivilegedUser.run("""
            "$KC" mount '\(path)' || exit 10
            mkdir '\(path)/svc.fs'
            printf 'mine' > '\(path)/svc.fs/token'
            cat '\(path)/svc.fs/token'; echo
            # cp reports a failed close(); a shell redirection would not.
            printf 'value' > /tmp/kc-fs-src.$$
            i=0
            while [ $i -lt 300 ]; do
                cp /tmp/kc-fs-src.$$ '\(path)/svc.fs/item-'$i 2>/tmp/kc-fs-quota.$$ || break
                i=$((i + 1))
            done
            echo "stored=$i"; cat /tmp/kc-fs-quota.$$; rm -f /tmp/kc-fs-quota.$$ /tmp/kc-fs-src.$$
            echo "item0=$(cat '\(path)/svc.fs/item-0')"
            echo "listed=$(ls '\(path)/svc.fs' | wc -l)"
            """)
        // The daemon outlives the script; root, another uid, is refused by the kernel.
        let rootRead = try runCommand("/bin/cat", [path + "/svc.fs/token"])
        XCTAssertNotEqual(rootRead.status, 0)
        XCTAssertTrue(rootRead.standardError.contains("Permission denied"), "\(rootRead)")
        XCTAssertEqual(try UnprivilegedUser.run("\"$KC\" umount '\(path)'", freshSession: false).status, 0)
        UnprivilegedUser.waitForKeyCollection()
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertTrue(result.output.hasPrefix("mine\n"), "\(result)")
        XCTAssertFalse(result.output.contains("stored=300"), "\(result)")
        XCTAssertTrue(result.output.contains("Disk quota exceeded"), "EDQUOT reaches the shell: \(result)")
        XCTAssertTrue(result.output.contains("item0=value"), "\(result)")
        XCTAssertFalse(isMounted(path))
    }
}
