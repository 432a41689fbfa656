import KCTestSupport
import KernelKeychain
import Keyrings
import KeychainFS
import SystemPackage
import XCTest

/// The filesystem's logic against the real kernel, without mounting.
final class FilesystemLogicTests: KeyringTestCase {
    private func filesystem(readOnly: Bool = false, service: KeyName? = nil) -> KeychainFilesystem {
        KeychainFilesystem(configuration: MountConfiguration(readOnly: readOnly, service: service, uid: getuid(), gid: getgid()))
    }

    private func assertErrno(_ expected: Errno, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual(Errno(reporting: error), expected, file: file, line: line)
        }
    }

    func testServicesAreDirectoriesAndItemsAreFiles() throws {
        let service = KeyName(uniqueService())
        try Keychain(service: service).set("abc", forKey: "token")
        let fs = filesystem()
        let directory = try fs.child(of: .root, named: service)
        XCTAssertEqual(directory, .service(service))
        XCTAssertTrue(try fs.entries(of: .root).map(\.name).contains(service))
        XCTAssertEqual(try fs.entries(of: directory).map(\.name), ["token"])
        let file = try fs.child(of: directory, named: "token")
        XCTAssertEqual(try fs.attributes(of: file), NodeAttributes(isDirectory: false, size: 3, permissions: 0o600, uid: getuid(), gid: getgid()))
        XCTAssertEqual(try fs.attributes(of: directory).permissions, 0o700)
        XCTAssertEqual(try fs.contents(of: file), Array("abc".utf8))
        assertErrno(.noSuchFileOrDirectory) { _ = try fs.attributes(of: .item(service: service, name: "absent")) }
        assertErrno(.noSuchFileOrDirectory) { _ = try fs.attributes(of: .service(service + ".absent")) }
        assertErrno(.notDirectory) { _ = try fs.child(of: file, named: "x") }
    }

    func testWritesKeepTheItemsLevelAndMapErrors() throws {
        let service = KeyName(uniqueService())
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("old", forKey: "token")
        let fs = filesystem()
        let file = Node.item(service: service, name: "token")
        try fs.commit(Array("new".utf8), to: file, newItem: nil)
        XCTAssertEqual(try Keychain(service: service).item("token")?.accessibility, .afterFirstUnlock)
        assertErrno(.fileTooLarge) { try fs.commit([UInt8](repeating: 1, count: 32768), to: file, newItem: nil) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "new", "failed writes harm nothing")
        try fs.commit([], to: file, newItem: nil)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "", "an empty file is an empty item")
        XCTAssertEqual(try Keychain(service: service).item("token")?.accessibility, .afterFirstUnlock)
    }

    func testServiceRootedAndReadOnlyMounts() throws {
        let service = KeyName(uniqueService())
        try Keychain(service: service).set("v", forKey: "k")
        let fs = filesystem(readOnly: true, service: service)
        XCTAssertEqual(try fs.entries(of: .root).map(\.name), ["k"])
        XCTAssertEqual(try fs.child(of: .root, named: "k"), .item(service: service, name: "k"))
        XCTAssertEqual(try fs.attributes(of: .item(service: service, name: "k")).permissions, 0o400)
        assertErrno(.readOnlyFileSystem) { try fs.commit([1], to: .item(service: service, name: "k"), newItem: nil) }
        assertErrno(.readOnlyFileSystem) { try fs.remove(.item(service: service, name: "k")) }
        assertErrno(.readOnlyFileSystem) { try fs.makeDirectory(.service(service + "x")) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "v")
    }

    func testDirectoriesAndRenames() throws {
        let service = KeyName(uniqueService()), other = KeyName(uniqueService())
        let fs = filesystem()
        try fs.makeDirectory(.service(service))
        assertErrno(.fileExists) { try fs.makeDirectory(.service(service)) }
        XCTAssertEqual(try fs.entries(of: .service(service)).count, 0)
        try fs.commit(Array("v".utf8), to: .item(service: service, name: "a"), newItem: NewItemAttributes(accessibility: .whenUnlocked))
        assertErrno(.directoryNotEmpty) { try fs.removeDirectory(.service(service)) }
        try fs.rename(.item(service: service, name: "a"), to: .item(service: other, name: "b"))
        XCTAssertEqual(try Keychain(service: other).string(forKey: "b"), "v")
        XCTAssertNil(try Keychain(service: service).string(forKey: "a"))
        try fs.removeDirectory(.service(service))
        assertErrno(.noSuchFileOrDirectory) { _ = try fs.attributes(of: .service(service)) }
        // A service directory is renamed in the kernel: its items keep their keys.
        let serial = try Keychain(service: other).item("b")?.serial
        try fs.rename(.service(other), to: .service(service))
        XCTAssertEqual(try Keychain(service: service).item("b")?.serial, serial)
        XCTAssertFalse(try Keychain(service: other).serviceExists())
    }

    func testExtendedAttributesShowAndChangeTheLevel() throws {
        let service = KeyName(uniqueService())
        try Keychain(service: service).set("v", forKey: "k")
        let fs = filesystem()
        let file = Node.item(service: service, name: "k")
        XCTAssertEqual(try fs.extendedAttribute("user.kc.access", of: file), "when-unlocked")
        XCTAssertEqual(try fs.extendedAttribute("user.kc.this-device-only", of: file), "0")
        XCTAssertEqual(try fs.extendedAttribute("user.kc.timeout", of: file), "0")
        try fs.setExtendedAttribute("user.kc.access", to: "always", of: file)
        try fs.setExtendedAttribute("user.kc.this-device-only", to: "1\n", of: file)
        try fs.setExtendedAttribute("user.kc.timeout", to: "3600", of: file)
        let item = try XCTUnwrap(Keychain(service: service).item("k"))
        XCTAssertEqual(item.accessibility, .alwaysThisDeviceOnly)
        XCTAssertEqual(try fs.extendedAttribute("user.kc.serial", of: file), String(item.serial.rawValue))
        XCTAssertTrue((3000...3600).contains(Int(try fs.extendedAttribute("user.kc.timeout", of: file)) ?? 0))
        assertErrno(.invalidArgument) { try fs.setExtendedAttribute("user.kc.access", to: "sometimes", of: file) }
        assertErrno(.notPermitted) { try fs.setExtendedAttribute("user.kc.serial", to: "1", of: file) }
        assertErrno(.noData) { _ = try fs.extendedAttribute("user.other", of: file) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "v")
    }

    func testStatisticsReportTheKeyQuota() throws {
        let statistics = filesystem().statistics()
        let quota = try XCTUnwrap(KeyQuota.current())
        XCTAssertEqual(statistics.totalFiles, UInt64(quota.maxKeys))
        XCTAssertEqual(statistics.totalBytes, UInt64(quota.maxBytes))
        XCTAssertLessThanOrEqual(statistics.freeFiles, statistics.totalFiles)
    }
}
