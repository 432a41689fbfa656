@testable import KernelKeychain
import Foundation
import Keyrings
import KCTestSupport
import XCTest

/// The owner's side of access groups in this process: what sharing does to the keys,
/// and the errors for groups and owners that cannot be used. (The member's side needs
/// other users: kcTests/SharingTests.)
final class SharingLibraryTests: KeyringTestCase {
    /// A group this process carries: its effective gid's.
    private var ownGroup: AccessGroup { AccessGroup(gid: getegid()) }

    func testSharingSetsTheGroupAndGroupRightsOnTheServiceAndEveryItem() throws {
        let keychain = try Keychain(service: uniqueService(), accessibility: .afterFirstUnlock)
        try keychain.set("one", forKey: "first")
        XCTAssertNil(try keychain.sharing(), "a new service is private")

        try keychain.share(with: ownGroup.name)
        XCTAssertEqual(try keychain.sharing(), Sharing(group: ownGroup, isGroupWritable: false))
        try keychain.set("two", forKey: "added-later")
        try keychain.accessibility(.always).set("three", forKey: "other-level")
        for item in try keychain.items() {
            let info = try item.serial.describe()
            XCTAssertEqual(info.permissions.rawValue, 0x003f_0300, "\(item.name): group view and read only")
            XCTAssertEqual(info.gid, ownGroup.gid)
            XCTAssertEqual(item.sharing?.group, ownGroup)
        }
        XCTAssertEqual(try keychain.items().count, 3)

        try keychain.share(with: ownGroup.name, writable: true)
        XCTAssertEqual(try keychain.items().map { try $0.serial.describe().permissions.rawValue }, [0x003f_0700, 0x003f_0700, 0x003f_0700])

        try keychain.unshare()
        XCTAssertNil(try keychain.sharing())
        XCTAssertEqual(try keychain.items().map { try $0.serial.describe().permissions }, [.ownerOnly, .ownerOnly, .ownerOnly])
        XCTAssertEqual(try keychain.string(forKey: "first"), "one", "unsharing keeps the values")
    }

    /// Threads writing items while the service is shared and unshared over and over:
    /// afterwards every item carries exactly its keyring's sharing (none may stay
    /// readable by the group after the last unshare, none private after the last share).
    func testItemsFollowTheirServiceWhenSharingRacesWithWrites() throws {
        for finalShared in [false, true] {
            let keychain = try Keychain(service: uniqueService(), accessibility: .afterFirstUnlock)
            try keychain.set("seed", forKey: "seed")
            let stop = StopFlag()
            let writers = DispatchGroup()
            for writer in 0..<4 {
                DispatchQueue.global().async(group: writers) {
                    var round = 0
                    while !stop.isSet {
                        // Two levels, so a keyring can be made (and join) mid-race.
                        let level: Accessibility = round % 3 == 0 ? .always : .afterFirstUnlock
                        try? keychain.accessibility(level).set("x", forKey: "w\(writer)-\(round % 40)")
                        round += 1
                    }
                }
            }
            for _ in 0..<300 {
                try keychain.share(with: ownGroup.name)
                try keychain.unshare()
            }
            if finalShared { try keychain.share(with: ownGroup.name) }
            stop.set()
            writers.wait()

            let expected: UInt32 = finalShared ? 0x003f_0300 : 0x003f_0000
            let wrong = try keychain.items().filter { try $0.serial.describe().permissions.rawValue != expected }
            XCTAssertEqual(wrong.map(\.name), [], "items not as their keyring after the final \(finalShared ? "share" : "unshare")")
            for ring in try ServiceKeyring.rings(of: try XCTUnwrap(keychain.serviceName)) {
                XCTAssertEqual(try ring.serial.describe().permissions.rawValue, expected, "the \(ring.accessibility.name) keyring")
            }
        }
    }

    func testAnAccessGroupKeychainSharesOnWriteAndReadsItsOwnService() throws {
        let service = uniqueService()
        let grouped = try Keychain(service: service, accessibility: .afterFirstUnlock, accessGroup: ownGroup.name, groupWritable: true)
        try grouped.set("value", forKey: "token")
        XCTAssertEqual(try grouped.string(forKey: "token"), "value", "the caller's own service wins")
        XCTAssertEqual(try Keychain(service: service).sharing(), Sharing(group: ownGroup, isGroupWritable: true))
        XCTAssertEqual(try grouped.items().first?.accessibility, .afterFirstUnlock, "an own item's level is known")
    }

    func testPrivateServicesAreUntouched() throws {
        let shared = try Keychain(service: uniqueService(), accessibility: .afterFirstUnlock)
        let untouched = try Keychain(service: uniqueService(), accessibility: .afterFirstUnlock)
        try untouched.set("private", forKey: "secret")
        try shared.set("x", forKey: "k")
        try shared.share(with: ownGroup.name)
        let info = try XCTUnwrap(try untouched.items().first).serial.describe()
        XCTAssertEqual(info.permissions, .ownerOnly)
        XCTAssertNil(try untouched.sharing())
    }

    func testGroupsAndOwnersThatCannotBeUsedAreClearErrors() throws {
        XCTAssertThrowsError(try Keychain(service: "s", accessGroup: "kc-no-such-group")) { error in
            XCTAssertEqual(error as? KeychainError, .unknownGroup("kc-no-such-group"))
            XCTAssertTrue("\(error)".contains("getent group kc-no-such-group"))
        }
        XCTAssertThrowsError(try Keychain(service: "s", owner: "kc-no-such-user")) { error in
            XCTAssertEqual(error as? KeychainError, .unknownUser("kc-no-such-user"))
        }
        XCTAssertThrowsError(try Keychain(service: uniqueService()).share(with: ownGroup.name)) { error in
            guard case .noSuchService? = error as? KeychainError else { return XCTFail("\(error)") }
        }
        // A group this process does not carry: the first in the database that is not ours.
        let mine = Set(Accounts.supplementaryGroups() + [getegid()])
        guard let foreign = (0..<UInt32(70000)).lazy.compactMap({ gid in mine.contains(gid) ? nil : Accounts.name(ofGroup: gid) }).first else {
            throw XCTSkip("no group outside this process's groups")
        }
        XCTAssertThrowsError(try Keychain(service: "s", accessGroup: foreign)) { error in
            guard case .notInGroup(let group, _)? = error as? KeychainError else { return XCTFail("\(error)") }
            XCTAssertEqual(group.name, foreign)
            XCTAssertTrue("\(error)".contains("usermod -aG \(foreign)"), "\(error)")
        }
    }

    func testNothingSharedIsNotFoundWithAnExplanation() throws {
        let keychain = try Keychain(service: uniqueService(), accessGroup: ownGroup.name)
        XCTAssertThrowsError(try keychain.string(forKey: "token")) { error in
            guard case .notShared? = error as? KeychainError else { return XCTFail("\(error)") }
            XCTAssertTrue("\(error)".contains("login session (when-unlocked), which has ended"))
        }
    }

    /// The static `kc` reads /etc/passwd and /etc/group itself; for local accounts it
    /// must agree with the C library, which this (dynamically linked) test process uses.
    func testTheStaticProgramsAccountFilesAgreeWithTheCLibrary() {
        let users = LocalDatabase.users(), groups = LocalDatabase.groups()
        XCTAssertTrue(users.contains { $0.name == "root" && $0.uid == 0 })
        XCTAssertTrue(groups.contains { $0.name == "root" && $0.gid == 0 })
        for user in users { XCTAssertEqual(Accounts.uid(ofUser: user.name), user.uid, user.name) }
        for group in groups {
            XCTAssertEqual(Accounts.gid(ofGroup: group.name), group.gid, group.name)
            XCTAssertEqual(Accounts.members(ofGroup: group.name), group.members, group.name)
        }
    }

    func testProcKeysLinesAreReadForServiceKeyringsOfOtherUsers() {
        let text = """
            0d0d536e I--Q---     9 perm 3f030000   995   994 keyring   _ses: 1
            2047e078 I--Q---     1 perm 3f3f0b00   999  1002 user      token: 6
            319b25dc I--Q---     1 perm 3f3f0b00   999  1002 keyring   kc:demo: 1
            319b25dd I--Q---     1 perm 3f3f0b00   999  1002 keyring   kc.local:demo: empty
            319b25de I--Q---     1 perm 3f3f0000   995   995 keyring   kc:mine: 1
            garbage line
            """
        let found = SharedServices.candidates(inProcKeys: text, excludingOwner: 995)
        XCTAssertEqual(found.map(\.serial.rawValue), [0x319b25dc, 0x319b25dd])
        XCTAssertEqual(found.map(\.owner), [999, 999])
    }
}

/// A flag the test's writer threads poll.
private final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
