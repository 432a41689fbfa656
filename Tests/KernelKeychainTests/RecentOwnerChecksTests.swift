@testable import KernelKeychain
import KCTestSupport
import Keyrings
import XCTest

/// A read skips the owner check's describe only for a keyring that passed it within
/// the last second, and never for another keyring found in its place.
final class RecentOwnerChecksTests: KeyringTestCase {
    func testACheckStandsForASecondAndAFailedCallDropsIt() throws {
        let checks = RecentOwnerChecks()
        let ring = KeySerial(rawValue: 123_456)
        XCTAssertFalse(checks.passed(ring))
        checks.record(ring)
        XCTAssertTrue(checks.passed(ring))
        XCTAssertFalse(checks.passed(KeySerial(rawValue: 123_457)), "another serial is described")
        checks.forget(ring)
        XCTAssertFalse(checks.passed(ring))
        checks.record(ring)
        usleep(1_100_000)
        XCTAssertFalse(checks.passed(ring), "a second later it is described again")
    }

    /// A service removed and made again within the second is a new keyring: its read
    /// is checked again, and reads keep working through it all.
    func testAReadAfterTheServiceIsMadeAgainChecksTheNewKeyring() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("one", forKey: "k")
        XCTAssertEqual(try keychain.string(forKey: "k"), "one")
        let first = try XCTUnwrap(keychain.items().first?.serial)
        try keychain.removeAll()
        XCTAssertNil(try keychain.string(forKey: "k"))
        try keychain.set("two", forKey: "k")
        XCTAssertNotEqual(try keychain.items().first?.serial, first)
        XCTAssertEqual(try keychain.string(forKey: "k"), "two")
    }
}
