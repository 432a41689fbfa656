import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Empty values at every door (issue 37's byte-exact secrets, "empty ones included", and
/// issue 39's `touch ~/kc/S/new`): the kernel refuses an empty `user` key, so kc holds an
/// empty value as one NUL byte in a key marked empty (Sources/Keyrings/ItemValue.swift).
/// A value of one NUL byte must stay that value, whatever the key held before.
final class EmptyValueTests: VaultTestCase {
    private func value(_ service: String, _ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> [UInt8]? {
        let got = try kc("get", service, name)
        guard got.status == 0 else {
            XCTAssertEqual(got.status, 1, "\(got)", file: file, line: line)
            return nil
        }
        return got.standardOutput
    }

    private func set(_ service: String, _ name: String, _ bytes: [UInt8], _ options: [String] = [],
                     file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try kc(["set"] + options + [service, name], input: bytes)
        XCTAssertEqual(result.status, 0, "\(result)", file: file, line: line)
    }

    /// Every change between the empty value, one NUL byte and other bytes reads back
    /// exactly, through `kc get` (the front, where it is installed), the library and
    /// `kc ls --long`. The order covers an update in place after the empty value (which
    /// leaves the key's mark behind) followed by one NUL byte.
    func testTheEmptyValueAndOneNulByteEachReadBackExactly() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        let sequence: [[UInt8]] = [[], [0], [], Array("abc".utf8), [0], [0], [], [], [0, 0], [], Array("x".utf8), [0]]
        for (step, bytes) in sequence.enumerated() {
            try set(service, "k", bytes)
            XCTAssertEqual(try value(service, "k"), bytes, "step \(step)")
            XCTAssertEqual(try keychain.data(forKey: "k"), bytes, "step \(step): the library")
            XCTAssertEqual(try keychain.item("k")?.size, bytes.count, "step \(step): the size")
            let long = try kc("ls", "--long", service).output
            XCTAssertTrue(long.hasPrefix("k\twhen-unlocked\t\(bytes.count)\t"), "step \(step): \(long)")
        }
        // What keyctl sees: the one NUL byte, and a mark that grants no other uid anything.
        try set(service, "k", [])
        let serial = try XCTUnwrap(keychain.item("k")?.serial)
        let described = try serial.describe()
        XCTAssertTrue(ItemValue.isMarkedEmpty(described.permissions))
        XCTAssertEqual(described.permissions.subtracting(ItemValue.emptyMark), .ownerOnly)
        XCTAssertEqual(try keyctl("pipe", String(serial.rawValue)).standardOutput, [0])
        // A key `keyctl` adds keeps its default mask (possessors: everything): its one
        // NUL byte is that byte, not the empty value.
        let ring = try XCTUnwrap(keyctlSearch("@s", "keyring", "kc:" + service))
        XCTAssertEqual(try keyctl("padd", "user", "by-keyctl", ring, input: [0]).status, 0)
        XCTAssertEqual(try value(service, "by-keyctl"), [0])
        XCTAssertEqual(try keychain.item("by-keyctl")?.size, 1)
        XCTAssertEqual(try kc("rm", service, "k").status, 0)
        XCTAssertEqual(try kc("rm", service, "by-keyctl").status, 0)
        XCTAssertEqual(try kc("ls", service).output, "", "removed like any item")
        _ = try keychain.removeAll()
    }

    /// An empty item with a deadline keeps it; a new value keeps it too, and the item
    /// expires as any other.
    func testAnEmptyItemKeepsItsDeadline() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try set(service, "k", [], ["--timeout", "1h"])
        let deadline = try XCTUnwrap(keychain.deadline(forKey: "k"))
        XCTAssertEqual(try value(service, "k"), [])
        try set(service, "k", [0])
        XCTAssertEqual(try keychain.deadline(forKey: "k"), deadline, "a new value keeps the deadline")
        try set(service, "k", [])
        XCTAssertEqual(try keychain.deadline(forKey: "k"), deadline)
        XCTAssertEqual(try value(service, "k"), [])
        try set(service, "short", [], ["--timeout", "1s"])
        Thread.sleep(forTimeInterval: 2.2)
        XCTAssertNil(try value(service, "short"), "expired as any item")
        _ = try keychain.removeAll()
    }

    /// The mount: `touch` and `: >` make empty items, as on a local filesystem; `ls -l`
    /// says 0 bytes; a file created empty and then written holds what was written.
    func testTouchAndTruncatingRedirectsMakeEmptyItemsInTheMount() throws {
        try MountFixture.requireFUSE()
        let mount = try MountFixture()
        defer { mount.unmount() }
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        XCTAssertEqual(mkdir(mount.file(service), 0o700), 0)
        let touched = try runCommand("/usr/bin/touch", [mount.file(service, "new")])
        XCTAssertEqual(touched.status, 0, "\(touched)")
        XCTAssertEqual(try keychain.data(forKey: "new"), [], "touch made an empty item")
        XCTAssertEqual(try value(service, "new"), [])
        var info = stat()
        XCTAssertEqual(stat(mount.file(service, "new"), &info), 0)
        XCTAssertEqual(info.st_size, 0)

        try keychain.set("secret", forKey: "old")
        let emptied = try runShell(": > '\(mount.file(service, "old"))'")
        XCTAssertEqual(emptied.status, 0, "\(emptied)")
        XCTAssertEqual(try keychain.data(forKey: "old"), [], "a truncating redirect empties the item")
        XCTAssertEqual(try runCommand("/bin/cat", [mount.file(service, "old")]).standardOutput, [])

        // An editor's save: create empty, then write.
        let script = "exec 3> '\(mount.file(service, "saved"))'; printf 'line\\n' >&3; exec 3>&-"
        XCTAssertEqual(try runShell(script).status, 0)
        XCTAssertEqual(try keychain.string(forKey: "saved"), "line\n")
        XCTAssertEqual(try runCommand("/bin/cat", [mount.file(service, "new")]).standardOutput, [])
        _ = try keychain.removeAll()
    }

    /// An opener that empties a file and closes it while a child it started still holds
    /// the descriptor: the empty value is stored at the opener's close (a later value
    /// stored meanwhile is not overwritten by the child's last close), also when the
    /// opener has `/dev/null` open, whose inode number an item's may share.
    func testAnEmptyingCloseStoresAtTheOpenersCloseWhateverElseItHasOpen() throws {
        try MountFixture.requireFUSE()
        let mount = try MountFixture()
        defer { mount.unmount() }
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        for name in ["k", "l", "m", "n"] { try keychain.set("old", forKey: name) }
        for name in ["k", "l", "m", "n"] {
            let file = mount.file(service, name)
            let script = """
                exec 3> '\(file)'; (sleep 1.5; exit 0) & exec 3>&-
                printf 'after=%s\\n' "$(cat '\(file)')"
                printf new | '\(builtKC)' set '\(service)' '\(name)'; wait
                """
            let result = try runCommand("/bin/bash", ["-c", script], input: [], environment: ["PATH": "/usr/bin:/bin"])
            XCTAssertEqual(result.output, "after=\n", "\(name): emptied at the opener's close: \(result)")
            XCTAssertEqual(try keychain.string(forKey: name), "new", "\(name): the child's last close stores nothing over it")
            let withDevNull = try runShell("exec 3> '\(file)' < /dev/null; exec 3>&-; cat '\(file)' | wc -c")
            XCTAssertEqual(withDevNull.output.trimmingCharacters(in: .whitespacesAndNewlines), "0", "\(name): \(withDevNull)")
        }
        _ = try keychain.removeAll()
    }

    /// With a vault, an empty item is saved and comes back after a reboot and unlock, and
    /// `kc export` and `kc import` carry it.
    func testAnEmptyItemSurvivesARebootWithAVaultAndAnExport() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "empty", [UInt8](), options: ["--access", "always"]).status, 0)
        XCTAssertEqual(try vault.set(service, "nul", [0], options: ["--access", "always"]).status, 0)
        XCTAssertEqual(vault.itemFiles().sorted(), ["always/\(service)/empty", "always/\(service)/nul"])
        let report = try rebootAndUnlock(vault)
        XCTAssertEqual(report?.loaded, ["always": 2])
        XCTAssertEqual(try vault.get(service, "empty").standardOutput, [])
        XCTAssertEqual(try vault.get(service, "nul").standardOutput, [0])

        let exported = try vault.kc("export", "--service", service, "--format", "json")
        XCTAssertEqual(exported.status, 0, "\(exported)")
        XCTAssertEqual(try vault.remove(service, "empty").status, 0)
        XCTAssertEqual(try vault.remove(service, "nul").status, 0)
        let imported = try vault.kc(["import", "--format", "json"], input: exported.standardOutput)
        XCTAssertEqual(imported.status, 0, "\(imported)")
        XCTAssertEqual(try vault.get(service, "empty").standardOutput, [])
        XCTAssertEqual(try vault.get(service, "nul").standardOutput, [0])
        XCTAssertEqual(try vault.remove(service, "empty").status, 0)
        XCTAssertEqual(try vault.remove(service, "nul").status, 0)
    }
}
