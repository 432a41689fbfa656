import KCTestSupport
import KernelKeychain
import XCTest

/// Every bad name, value and timeout is a clear error before any kernel call, and
/// leaves what was stored alone.
final class BadInputTests: KeyringTestCase {
    static let badNames: [(String, String)] = [
        ("", "is empty"),
        (".", "cannot be '.'"),
        ("..", "cannot be '..'"),
        ("a/b", "contains '/'"),
        ("a\u{0}b", "contains a NUL byte"),
        (String(repeating: "x", count: 256), "is 256 bytes long; the limit is 255"),
        (String(repeating: "é", count: 128), "is 256 bytes long; the limit is 255"),
    ]

    func testBadItemNamesAreRejectedAndHarmNothing() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("kept", forKey: "existing")
        for (name, problem) in Self.badNames {
            XCTAssertThrowsError(try keychain.set("x", forKey: name)) { error in
                guard case .invalidName(.item, let found)? = error as? KeychainError else { return XCTFail("\(error)") }
                XCTAssertEqual("\(found)", problem)
                XCTAssertTrue("\(error)".contains("use 1-255 bytes"), "\(error)")
            }
            XCTAssertThrowsError(try keychain.string(forKey: name))
            XCTAssertThrowsError(try keychain.remove(name))
        }
        XCTAssertEqual(try keychain.allKeys(), ["existing"])
        XCTAssertEqual(try keychain.string(forKey: "existing"), "kept")
        XCTAssertNoThrow(try keychain.set("ok", forKey: String(repeating: "y", count: 255)), "255 bytes is allowed")
    }

    func testBadServiceNamesAreRejected() {
        for (name, problem) in Self.badNames {
            XCTAssertThrowsError(try Keychain(service: name)) { error in
                guard case .invalidName(.service, let found)? = error as? KeychainError else { return XCTFail("\(error)") }
                XCTAssertEqual("\(found)", problem)
            }
        }
    }

    func testOversizeValuesAreRejectedNotTruncated() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("original", forKey: "token")
        XCTAssertThrowsError(try keychain.set([UInt8](repeating: 1, count: 32768), forKey: "token")) { error in
            XCTAssertEqual(error as? KeychainError, .valueTooLarge(size: 32768))
            XCTAssertTrue("\(error)".contains("32767"))
        }
        XCTAssertEqual(try keychain.string(forKey: "token"), "original")
    }

    func testBadTimeoutsAreRejected() throws {
        let service = uniqueService()
        XCTAssertThrowsError(try Keychain(service: service, timeout: .zero))
        XCTAssertThrowsError(try Keychain(service: service, timeout: .seconds(-5)))
        XCTAssertThrowsError(try Keychain(service: service, timeout: .seconds(Int64(UInt32.max) + 1)))
        XCTAssertEqual(try Keychain(service: service, timeout: .milliseconds(1)).timeout, .milliseconds(1),
                       "a sub-second timeout rounds up to one second in the kernel")
    }

    func testQuotaErrorExplainsUsageAndTheSysctl() {
        let usage = KeyQuota(uid: 3_999_999, keys: 200, maxKeys: 200, bytes: 1234, maxBytes: 20000)
        let error = KeychainError.quotaExceeded(.init(.diskQuotaExceeded, call: "add_key"), usage: usage)
        XCTAssertEqual("\(error)", "key quota exceeded (add_key: Disk quota exceeded): uid 3999999 uses 200/200 keys and 1234/20000 bytes; remove unused items, or raise the limits: sudo sysctl -w kernel.keys.maxkeys=2000 kernel.keys.maxbytes=200000")
    }

    /// Whose quota is full is named: the uid and, where it has one, the user's name (a
    /// member's write into a shared item is charged to its owner).
    func testQuotaErrorNamesTheUser() {
        let usage = KeyQuota(uid: 0, keys: 1, maxKeys: 1, bytes: 1, maxBytes: 1)
        let error = KeychainError.quotaExceeded(.init(.diskQuotaExceeded, call: "keyctl_update"), usage: usage)
        XCTAssertTrue("\(error)".hasPrefix("key quota exceeded (keyctl_update: Disk quota exceeded): uid 0 (root) uses 1/1 keys"), "\(error)")
    }
}
