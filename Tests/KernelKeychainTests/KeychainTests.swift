import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

final class KeychainTests: KeyringTestCase {
    func testBytesRoundTripExactly() throws {
        let keychain = try Keychain(service: uniqueService())
        var values: [[UInt8]] = [
            Array("s3cret".utf8),
            [0, 0, 0],
            Array("line\n\n".utf8),
            [0xff, 0xfe, 0x00, 0x80, 0x0a],
            [0x41],
        ]
        let largest = (0..<KeychainError.maximumValueSize).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let largestFits = TestQuota.hasRoom(forValueOf: largest.count)
        if largestFits { values.insert(largest, at: 4) }
        for value in values {
            try keychain.set(value, forKey: "item")
            XCTAssertEqual(try keychain.data(forKey: "item"), value, "a value of \(value.count) bytes")
        }
        if !largestFits {
            // An ordinary user's whole quota is smaller than the largest value: the
            // kernel refuses it with a clear error, and the stored value is untouched.
            XCTAssertThrowsError(try keychain.set(largest, forKey: "item")) { error in
                guard case .quotaExceeded(_, let usage)? = error as? KeychainError else { return XCTFail("\(error)") }
                XCTAssertNotNil(usage, "the error says how much of the quota is used")
                XCTAssertTrue("\(error)".contains("sysctl -w kernel.keys.maxkeys="), "\(error)")
            }
            XCTAssertEqual(try keychain.data(forKey: "item"), [0x41], "the refused value harmed nothing")
        }
    }

    func testStringsSubscriptsAndMissingItems() throws {
        var keychain = try Keychain(service: uniqueService())
        XCTAssertNil(try keychain.string(forKey: "token"), "a missing item is nil, not an error")
        XCTAssertNil(keychain["token"])
        keychain["token"] = "héllo ✓"
        XCTAssertEqual(keychain["token"], "héllo ✓")
        XCTAssertEqual(keychain[bytes: "token"], Array("héllo ✓".utf8))
        keychain["token"] = nil
        XCTAssertNil(keychain["token"])
        XCTAssertFalse(try keychain.contains("token"))
    }

    func testInvalidUTF8IsADecodingErrorButReadsAsBytes() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set([0xff, 0xfe], forKey: "blob")
        XCTAssertThrowsError(try keychain.string(forKey: "blob")) { error in
            guard case .decodingFailed = error as? KeychainError else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(try keychain.data(forKey: "blob"), [0xff, 0xfe])
    }

    func testCodableValuesAreStoredAsJSON() throws {
        struct Credentials: Codable, Equatable { var user: String; var port: Int }
        let keychain = try Keychain(service: uniqueService())
        let credentials = Credentials(user: "deploy", port: 5432)
        try keychain.set(json: credentials, forKey: "db")
        XCTAssertEqual(try keychain.json(Credentials.self, forKey: "db"), credentials)
        let stored = try XCTUnwrap(keychain.string(forKey: "db"))
        XCTAssertTrue(stored.contains("\"user\":\"deploy\""), stored)
        XCTAssertNil(try keychain.json(Credentials.self, forKey: "absent"))
        try keychain.set("not json", forKey: "db")
        XCTAssertThrowsError(try keychain.json(Credentials.self, forKey: "db")) { error in
            guard case .decodingFailed = error as? KeychainError else { return XCTFail("\(error)") }
        }
    }

    func testListingRemovingAndRemovingAll() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("1", forKey: "b")
        try keychain.set("2", forKey: "a")
        try keychain.accessibility(.afterFirstUnlock).set("3", forKey: "c")
        XCTAssertEqual(try keychain.allKeys(), ["a", "b", "c"])
        XCTAssertTrue(try Keychain.services().contains(KeyName(service)))
        XCTAssertTrue(try keychain.remove("a"))
        XCTAssertFalse(try keychain.remove("a"), "removing a missing item reports false")
        XCTAssertEqual(try keychain.allKeys(), ["b", "c"])
        try keychain.removeAll()
        XCTAssertEqual(try keychain.allKeys(), [])
        XCTAssertFalse(try Keychain.services().contains(KeyName(service)))
    }

    func testConstantTimeMatch() throws {
        let keychain = try Keychain(service: uniqueService())
        try keychain.set("correct horse", forKey: "pin")
        XCTAssertTrue(try keychain.matches("correct horse", forKey: "pin"))
        XCTAssertFalse(try keychain.matches("correct hors", forKey: "pin"))
        XCTAssertFalse(try keychain.matches("correct horsf", forKey: "pin"))
        XCTAssertFalse(try keychain.matches("", forKey: "pin"))
        XCTAssertFalse(try keychain.matches("x", forKey: "missing"))
    }

    func testAnyServiceReadsFromWhicheverServiceHoldsTheItem() throws {
        let keychain = try Keychain(service: uniqueService())
        let key = "wildcard-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        try keychain.set("found", forKey: key)
        XCTAssertEqual(try Keychain.anyService.string(forKey: key), "found")
        XCTAssertThrowsError(try Keychain.anyService.set("x", forKey: key)) { error in
            XCTAssertEqual(error as? KeychainError, .serviceRequired)
        }
    }

    func testDefaultKeychainUsesKCService() throws {
        let service = uniqueService()
        setenv("KC_SERVICE", service, 1)
        defer { unsetenv("KC_SERVICE") }
        XCTAssertEqual(try Keychain.default.service, service)
    }

    func testTimeoutExpiresTheItem() throws {
        let keychain = try Keychain(service: uniqueService(), timeout: .seconds(1))
        try keychain.set("brief", forKey: "otp")
        XCTAssertEqual(try keychain.string(forKey: "otp"), "brief")
        let item = try XCTUnwrap(keychain.items().first)
        XCTAssertNotNil(item.secondsLeft, "the kernel reports an expiry")
        Thread.sleep(forTimeInterval: 2.2)
        XCTAssertNil(try keychain.string(forKey: "otp"), "an expired item reads as absent")
        XCTAssertEqual(try keychain.allKeys(), [], "and is not listed")
    }

    func testSettingWithoutTimeoutKeepsTheItemsDeadline() throws {
        let service = uniqueService()
        try Keychain(service: service, timeout: .seconds(1)).set("v1", forKey: "k")
        try Keychain(service: service).set("v2", forKey: "k")
        Thread.sleep(forTimeInterval: 2.2)
        XCTAssertNil(try Keychain(service: service).string(forKey: "k"), "the new value expired with the item")
    }

    func testSettingUntilNilClearsAnEarlierDeadline() throws {
        let service = uniqueService()
        try Keychain(service: service, timeout: .seconds(1)).set("v1", forKey: "k")
        try Keychain(service: service).set(Array("v2".utf8), forKey: "k", until: nil)
        Thread.sleep(forTimeInterval: 2.2)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k"), "v2")
    }

    func testConcurrentThreadsShareOneKeychain() throws {
        let keychain = try Keychain(service: uniqueService())
        // New threads inherit the test's session keyring (a pool made earlier might not).
        let done = DispatchSemaphore(value: 0)
        for index in 0..<16 {
            Thread {
                try? keychain.set("value \(index)", forKey: "item\(index)")
                done.signal()
            }.start()
        }
        for _ in 0..<16 { done.wait() }
        XCTAssertEqual(try keychain.allKeys().count, 16)
        for index in 0..<16 { XCTAssertEqual(try keychain.string(forKey: "item\(index)"), "value \(index)") }
    }
}
