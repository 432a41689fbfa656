import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// `Keychain.replaceAllItems(with:until:)` and `allValues()`: a service's whole set of
/// items replaced in one step, and read as one set (what kc-agent's mirrors rely on).
final class ReplaceAllItemsTests: KeyringTestCase {
    private func items(_ pairs: [(String, String)]) -> [(key: KeyName, value: [UInt8])] {
        pairs.map { (key: KeyName($0.0), value: Array($0.1.utf8)) }
    }

    private func contents(_ keychain: Keychain) throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try keychain.allValues().map { ($0.key.description, String(decoding: $0.value, as: UTF8.self)) })
    }

    func testTheNewSetIsExactlyWhatIsLeftAtEveryLevel() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("old", forKey: "a")
        try keychain.set("gone", forKey: "b")
        try keychain.accessibility(.always).set("elsewhere", forKey: "c")
        try keychain.replaceAllItems(with: items([("a", "new"), ("d", ""), ("e", "\u{0}")]))
        XCTAssertEqual(try contents(keychain), ["a": "new", "d": "", "e": "\u{0}"])
        XCTAssertEqual(try keychain.items().map(\.accessibility), [.whenUnlocked, .whenUnlocked, .whenUnlocked])
        XCTAssertEqual(try kcList(service), ["a", "d", "e"])
    }

    func testADeadlineGoesToEveryItemAndAnEmptySetRemovesTheService() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service).accessibility(.afterFirstUnlock)
        let deadline = Deadline.fromNow(seconds: 120)
        try keychain.replaceAllItems(with: items([("certificate", "C"), ("private_key", "K")]), until: deadline)
        XCTAssertEqual(try keychain.deadline(forKey: "certificate"), deadline)
        XCTAssertEqual(try keychain.deadline(forKey: "private_key"), deadline)
        try keychain.replaceAllItems(with: items([("certificate", "C2")]))
        XCTAssertNil(try keychain.deadline(forKey: "certificate"), "the new set's own deadline: none")
        try keychain.replaceAllItems(with: [])
        XCTAssertFalse(try keychain.serviceExists())
    }

    func testABadItemChangesNothing() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("kept", forKey: "a")
        XCTAssertThrowsError(try keychain.replaceAllItems(with: items([("a", "x"), ("b/c", "y")]))) { error in
            XCTAssertEqual((error as? KeychainError)?.concern, .input)
        }
        XCTAssertThrowsError(try keychain.replaceAllItems(with: [(key: "a", value: [UInt8](repeating: 1, count: 32768))]))
        XCTAssertThrowsError(try keychain.replaceAllItems(with: items([("a", "1"), ("a", "2")])))
        XCTAssertEqual(try contents(keychain), ["a": "kept"])
    }

    /// Replaced 300 times while another thread reads: every read is one whole set.
    func testAReaderNeverSeesTwoSetsMixed() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        let keys = (0..<5).map { "k\($0)" }
        try keychain.replaceAllItems(with: items(keys.map { ($0, "v0") }))
        let done = ReplaceFlag()
        let failures = ReplaceFailures()
        let writer = Thread {
            for version in 1...300 {
                // An ordinary user's 20,000 bytes hold the old set and the new one, but
                // the kernel frees a replaced keyring's keys a moment later (its garbage
                // collector): replacing 300 times in a tenth of a second can find the
                // quota full of keys not yet freed. Such a write is made again.
                for attempt in 1...200 {
                    do {
                        try keychain.replaceAllItems(with: keys.map { (key: KeyName($0), value: Array("v\(version)".utf8)) })
                        break
                    } catch {
                        guard case .quotaExceeded? = error as? KeychainError, attempt < 200 else { failures.add("v\(version): \(error)"); break }
                        usleep(5_000)
                    }
                }
            }
            done.set()
        }
        writer.start()
        var reads = 0, mixed = 0, missing = 0, seen = Swift.Set<String>()
        while !done.isSet {
            let values = try keychain.allValues()
            reads += 1
            let distinct = Swift.Set(values.map { String(decoding: $0.value, as: UTF8.self) })
            if values.count != keys.count || distinct.count != 1 { mixed += 1 }
            if try keychain.string(forKey: "k2") == nil { missing += 1 }
            seen.formUnion(distinct)
        }
        XCTAssertEqual(failures.all, [], "every replacement was made")
        XCTAssertEqual(mixed, 0, "of \(reads) reads")
        XCTAssertEqual(missing, 0, "an item read while its set was replaced was never missing")
        XCTAssertGreaterThan(seen.count, 2, "the reads overlapped the writes")
        XCTAssertEqual(try contents(keychain)["k4"], "v300")
    }

    private func kcList(_ service: String) throws -> [String] {
        try Keychain(service: service).allKeys()
    }
}

private final class ReplaceFailures: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: [String] = []
    func add(_ failure: String) { lock.withLock { failures.append(failure) } }
    var all: [String] { lock.withLock { failures } }
}

private final class ReplaceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
