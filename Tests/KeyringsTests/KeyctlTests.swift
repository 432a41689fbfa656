import KCTestSupport
import Keyrings
import SystemPackage
import XCTest

final class KeyctlTests: KeyringTestCase {
    func testAddedKeyIsDescribedAndReadBack() throws {
        let ring = try KeySerial.add(type: "keyring", description: "kc-test-ring.\(getpid())", payload: nil, into: sessionKeyring)
        defer { try? ring.unlink(from: sessionKeyring) }
        let value: [UInt8] = [0, 1, 2, 255, 10]
        let key = try value.withUnsafeBytes { try KeySerial.add(type: "user", description: "a;b", payload: $0, into: ring) }
        try key.setPermissions(.ownerOnly)

        let info = try key.describe()
        XCTAssertEqual(info.type, "user")
        XCTAssertEqual(info.description, "a;b", "a description may contain ';'")
        XCTAssertEqual(info.uid, getuid())
        XCTAssertEqual(info.permissions, .ownerOnly)
        XCTAssertEqual(try key.read(), value)
        XCTAssertEqual(try key.payloadSize(), value.count)
        XCTAssertEqual(try ring.linkedKeys(), [key])
        XCTAssertEqual(try ring.search(type: "user", description: "a;b"), key)
        XCTAssertNil(try ring.search(type: "user", description: "absent"))
    }

    func testReadGrowsPastTheSizeHint() throws {
        // Well past the hint, and well within an ordinary user's whole quota (20,000
        // bytes), of which earlier tests' keys may hold some until they are collected.
        let big = (0..<6000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let key = try big.withUnsafeBytes { try KeySerial.add(type: "user", description: "kc-test-big.\(getpid())", payload: $0, into: sessionKeyring) }
        defer { try? key.unlink(from: sessionKeyring) }
        XCTAssertEqual(try key.read(sizeHint: 16), big)
    }

    func testExclusiveMoveRefusesToDisplace() throws {
        let description: KeyName = "kc-test-move.\(getpid())"
        let first = try KeySerial.add(type: "keyring", description: description, payload: nil, into: sessionKeyring)
        defer { try? first.unlink(from: sessionKeyring) }
        let second = try KeySerial.add(type: "keyring", description: description, payload: nil, into: SpecialKeyring.thread.serial)
        defer { try? second.unlink(from: SpecialKeyring.thread.serial) }
        XCTAssertThrowsError(try second.move(from: SpecialKeyring.thread.serial, to: sessionKeyring, exclusive: true)) { error in
            XCTAssertEqual((error as? KeyctlError)?.errno, .fileExists)
        }
        XCTAssertEqual(try sessionKeyring.search(type: "keyring", description: description), first)
    }

    func testDirectChildIsFoundBeforeANestedOne() throws {
        // ServiceKeyring relies on this kernel behaviour to tell a service keyring of
        // the session keyring from one of the user keyring nested in it.
        let description: KeyName = "kc-test-nest.\(getpid())"
        let outer = try KeySerial.add(type: "keyring", description: "kc-test-outer.\(getpid())", payload: nil, into: sessionKeyring)
        defer { try? outer.unlink(from: sessionKeyring) }
        let nested = try KeySerial.add(type: "keyring", description: description, payload: nil, into: outer)
        XCTAssertEqual(try sessionKeyring.search(type: "keyring", description: description), nested)
        let direct = try KeySerial.add(type: "keyring", description: description, payload: nil, into: sessionKeyring)
        defer { try? direct.unlink(from: sessionKeyring) }
        XCTAssertEqual(try sessionKeyring.search(type: "keyring", description: description), direct)
    }

    func testErrorsNameTheCall() throws {
        XCTAssertThrowsError(try KeySerial(rawValue: 1).describe()) { error in
            let keyctlError = error as? KeyctlError
            XCTAssertEqual(keyctlError?.call, "keyctl_describe")
            XCTAssertTrue(keyctlError?.description.hasPrefix("keyctl_describe: ") ?? false)
        }
    }

    func testDescriptionParsing() {
        XCTAssertEqual(KeyDescription(parsing: "user;1000;1000;3f3f0000;token")?.permissions, KeyPermissions(rawValue: 0x3f3f_0000))
        XCTAssertEqual(KeyDescription(parsing: "keyring;0;-1;3f3f0000;kc:x;y")?.gid, UInt32.max)
        XCTAssertEqual(KeyDescription(parsing: "keyring;0;-1;3f3f0000;kc:x;y")?.description, "kc:x;y")
        XCTAssertNil(KeyDescription(parsing: "user;1000;1000;3f3f0000"))
        XCTAssertNil(KeyDescription(parsing: ";1;1;0;x"))
        XCTAssertNil(KeyDescription(parsing: "user;x;1;0;x"))
    }

    func testPermissionClasses() {
        let mask = KeyPermissions.ownerOnly
        XCTAssertEqual(mask.rawValue, 0x003f_0000, "the owning uid only: possessor rights would follow a shared session")
        XCTAssertEqual(mask.possessorRights, [])
        XCTAssertEqual(mask.userRights, .all)
        XCTAssertEqual(mask.groupRights, [])
        XCTAssertEqual(mask.otherRights, [])
        XCTAssertEqual(mask.description, "003f0000")
        let old = KeyPermissions(rawValue: 0x3f3f_0000)
        XCTAssertEqual(old.possessorRights, .all)
        XCTAssertEqual(old.description, "3f3f0000")
    }
}
