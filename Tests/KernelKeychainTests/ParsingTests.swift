@testable import KernelKeychain
import Keyrings
import XCTest

final class ParsingTests: XCTestCase {
    func testTimeoutsParseAsPeopleWriteThem() {
        XCTAssertEqual(parseTimeout("90"), .seconds(90))
        XCTAssertEqual(parseTimeout("90s"), .seconds(90))
        XCTAssertEqual(parseTimeout("15m"), .seconds(900))
        XCTAssertEqual(parseTimeout("2h"), .seconds(7200))
        XCTAssertEqual(parseTimeout("7d"), .seconds(604800))
        XCTAssertEqual(parseTimeout("1w"), .seconds(604800))
        XCTAssertEqual(parseTimeout("1h30m"), .seconds(5400))
        XCTAssertEqual(parseTimeout("4294967295"), .seconds(4294967295))
    }

    func testBadTimeoutsAreNil() {
        for text in ["", "0", "0s", "-5", "5x", "m", "1h30", "1.5h", " 5", "5 ", "4294967296", "99999999999999999999s", "1y"] {
            XCTAssertNil(parseTimeout(text), "'\(text)'")
        }
    }

    func testKeyUsersLineOfTheUid() {
        let text = """
                0:    12 11/11 4/1000000 49/25000000
             1000:     5 5/5 3/200 30/20000
            """
        XCTAssertEqual(KeyQuota.parse(keyUsers: text, uid: 1000),
                       KeyQuota(uid: 1000, keys: 3, maxKeys: 200, bytes: 30, maxBytes: 20000))
        XCTAssertEqual(KeyQuota.parse(keyUsers: text, uid: 0)?.maxKeys, 1000000)
    }

    func testProcKeysExpiries() {
        let text = """
            1a2b3c4d I--Q---     1 perm 3f3f0000     0     0 user      token: 5
            0000000f I--Q---     1 59m 3f3f0000     0     0 user      otp: 6
            00000010 I--Q---     1 45s 3f3f0000     0     0 user      x y: 6
            00000011 I--Q---     1 2d 3f3f0000     0     0 keyring   kc:svc: 1
            00000012 I--Q---     1 expd 3f3f0000     0     0 user      old: 1
            """
        var expiries: [KeySerial: ProcKeysEntry.Expiry] = [:]
        for entry in ProcKeysEntry.parse(text) { expiries[entry.serial] = entry.expiry }
        XCTAssertEqual(expiries[KeySerial(rawValue: 0x1a2b3c4d)], .never)
        XCTAssertEqual(expiries[KeySerial(rawValue: 15)], .within(seconds: 59 * 60, unit: 60))
        XCTAssertEqual(expiries[KeySerial(rawValue: 16)], .within(seconds: 45, unit: 1))
        XCTAssertEqual(expiries[KeySerial(rawValue: 17)], .within(seconds: 2 * 86400, unit: 86400))
        XCTAssertEqual(expiries[KeySerial(rawValue: 18)], .expired)
        let ring = ProcKeysEntry.parse(text).first { $0.serial == KeySerial(rawValue: 17) }
        XCTAssertEqual(ring?.type, "keyring")
        XCTAssertEqual(ring?.descriptionPrefix, "kc:svc")
        XCTAssertEqual(ProcKeysEntry.parse(text).first?.descriptionPrefix, "token")
    }

    func testAccessibilityNamesAndLevels() {
        XCTAssertEqual(Accessibility.whenUnlocked.name, "when-unlocked")
        XCTAssertEqual(Accessibility.alwaysThisDeviceOnly.name, "always+this-device-only")
        for accessibility in Accessibility.allCases {
            XCTAssertEqual(Accessibility(level: accessibility.level, thisDeviceOnly: accessibility.isThisDeviceOnly), accessibility)
        }
    }
}
