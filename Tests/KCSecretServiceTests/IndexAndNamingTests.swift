@testable import KCSecretService
import Foundation
import Keyrings
import XCTest

/// The pure parts of kc-secretd, in-process: the index's file format, object paths,
/// and how attributes name a kc item.
final class IndexAndNamingTests: XCTestCase {
    private func sampleIndex() -> SecretIndex {
        var index = SecretIndex()
        index.collections["login"] = CollectionRecord(name: "login", label: "Login", created: 1, modified: 2, isCustom: false)
        index.collections["work"] = CollectionRecord(name: "work", label: "Wörk ✓", created: 3, modified: 4, isCustom: true)
        index.aliases["default"] = "login"
        let odd = ItemID(service: KeyName(bytes: [0xff, 0x00, 0x41]), name: "ü")
        index.items[odd] = ItemRecord(id: odd, collection: "work", attributes: ["a": "1", "xdg:schema": "x.y", "ключ": "значение"],
                                      label: "", contentType: "data/null", created: 5, modified: 6, isEmptyValue: true)
        let plain = ItemID(service: "com.example", name: "alice")
        index.items[plain] = ItemRecord(id: plain, collection: "login", attributes: [:], label: "L", contentType: "text/plain",
                                        created: UInt64.max, modified: 0, isEmptyValue: false)
        index.ownedServices = ["com.example", KeyName(bytes: [0xff, 0x00, 0x41])]
        return index
    }

    func testTheIndexReadsBackWhatItWrote() {
        let index = sampleIndex()
        XCTAssertEqual(SecretIndex(decoding: index.encoded()), index)
        XCTAssertEqual(SecretIndex(decoding: SecretIndex().encoded()), SecretIndex())
    }

    /// An index a kc-secretd before version 2 wrote (no owned services) is read whole.
    func testAVersionOneIndexIsReadWithNoOwnedServices() {
        var index = sampleIndex()
        let current = index.encoded()
        let ownedSection = 4 + index.ownedServices.reduce(0) { $0 + 4 + $1.byteCount }
        let first = Array("kc-secret-service-index 1\n".utf8) + current[SecretIndex.magic.count..<(current.count - ownedSection)]
        index.ownedServices = []
        XCTAssertEqual(SecretIndex(decoding: first), index)
    }

    func testADamagedIndexIsRefusedNotMisread() {
        let bytes = sampleIndex().encoded()
        // Every truncation, and anything after the end, is refused.
        for length in 0..<bytes.count {
            XCTAssertNil(SecretIndex(decoding: Array(bytes[..<length])), "cut at \(length)")
        }
        XCTAssertNil(SecretIndex(decoding: bytes + [0]))
        // A count larger than the file cannot make it allocate or read past the end.
        var huge = Array(SecretIndex.magic)
        huge += [0xff, 0xff, 0xff, 0x7f]
        XCTAssertNil(SecretIndex(decoding: huge))
        XCTAssertNil(SecretIndex(decoding: Array("kc-secret-service-index 3\n".utf8) + bytes.dropFirst(SecretIndex.magic.count)))
    }

    func testObjectPathsNameEveryServiceAndItemByteExactly() {
        let names: [[UInt8]] = [Array("com.example".utf8), Array("a_b__c".utf8), [0xff, 0x00, 0x5f, 0x5f], Array(0...255).map(UInt8.init),
                                Array("_".utf8), Array("z".utf8)]
        for service in names {
            for item in names {
                let id = ItemID(service: KeyName(bytes: service), name: KeyName(bytes: item))
                let path = SecretPath.item(id, in: "login")
                XCTAssertTrue(path.utf8.allSatisfy { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "_") || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) },
                              "\(path) is not a valid object path")
                XCTAssertEqual(SecretPath.parse(path), .item(collection: "login", alias: false, id))
            }
        }
        XCTAssertEqual(SecretPath.parse("/org/freedesktop/secrets/aliases/default"), .collection(name: "default", alias: true))
        XCTAssertNil(SecretPath.parse("/org/freedesktop/secrets/collection/login/nounderscore"))
        XCTAssertNil(SecretPath.parse("/org/freedesktop/secrets/collection/login/a__b_zz"))
        XCTAssertNil(SecretPath.parse("/org/freedesktop/secrets/collection/login/a__b/c"))
        XCTAssertNil(SecretPath.parse("/org/freedesktop/secretsx"))
    }

    func testAttributesNameItemsAPersonRecognises() {
        // python keyring, secret-tool with service/username
        XCTAssertEqual(ItemNaming.proposed(attributes: ["service": "com.example", "username": "alice", "application": "Python keyring library"], label: "x"),
                       ItemID(service: "com.example", name: "alice"))
        // git-credential-libsecret (libsecret's network schema)
        XCTAssertEqual(ItemNaming.proposed(attributes: ["xdg:schema": "org.gnome.keyring.NetworkPassword", "protocol": "https", "server": "git.example.com", "user": "bob"], label: "Git: https://git.example.com/"),
                       ItemID(service: "https:git.example.com", name: "bob"))
        XCTAssertEqual(ItemNaming.proposed(attributes: ["protocol": "https", "server": "h", "port": "8443", "object": "team/repo.git", "user": "ci/bot"], label: ""),
                       ItemID(service: "https:h:8443%2Fteam%2Frepo.git", name: "ci%2Fbot"))
        // Chromium: the schema and the label
        XCTAssertEqual(ItemNaming.proposed(attributes: ["xdg:schema": "chrome_libsecret_password_schema", "origin_url": "https://a.example/"], label: "https://a.example/"),
                       ItemID(service: "chrome_libsecret_password_schema", name: "https:%2F%2Fa.example%2F"))
        // Nothing usable: fallbacks, never an invalid name
        XCTAssertEqual(ItemNaming.proposed(attributes: [:], label: ""), ItemID(service: "secret-service", name: "secret"))
        XCTAssertEqual(ItemNaming.proposed(attributes: ["service": ".", "username": ".."], label: ""), ItemID(service: "%2E", name: "%2E%2E"))
        let long = String(repeating: "é", count: 200)
        let named = ItemNaming.proposed(attributes: ["service": long, "username": "u"], label: "")
        XCTAssertLessThanOrEqual(named.service.byteCount, 255)
        XCTAssertNotNil(named.service.text, "cut inside a UTF-8 sequence")
        XCTAssertEqual(ItemNaming.numbered("alice", 2), KeyName("alice (2)"))
        XCTAssertLessThanOrEqual(ItemNaming.numbered(KeyName(String(repeating: "a", count: 255)), 12).byteCount, 255)
    }

    /// The index without a vault, in-process: read back by the same boot, not by another;
    /// a change that would take it past its bound is refused before anything else runs
    /// (the kernel change alongside it included), and the saved file stays as it was.
    func testTheBootsIndexFileIsReadBackByItsBootOnlyAndStaysWithinItsBound() throws {
        let folder = "/tmp/kc-test-index-file-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = BootIndexFile(folder: folder + "/kc", boot: "boot-a")
        let saved = sampleIndex()
        _ = try file.update(alongside: { _ in }) { _ in saved }
        XCTAssertEqual(try file.read(), saved)
        XCTAssertNil(try BootIndexFile(folder: folder + "/kc", boot: "boot-b").read(), "another boot's file is not read")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file.location))

        var huge = saved
        let id = ItemID(service: "com.example", name: "huge")
        huge.items[id] = ItemRecord(id: id, collection: "login", attributes: ["blob": String(repeating: "z", count: SecretLimits.indexBytes)],
                                    label: "", contentType: "text/plain", created: 0, modified: 0, isEmptyValue: false)
        var ranAlongside = false
        do {
            _ = try file.update(alongside: { _ in ranAlongside = true }) { _ in huge }
            XCTFail("an index past the bound was saved")
        } catch {
            guard case .refused(let refusal) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(refusal.name, "org.freedesktop.DBus.Error.LimitsExceeded", refusal.message)
        }
        XCTAssertFalse(ranAlongside, "nothing else changed")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file.location)), bytes, "the saved index stays")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder + "/kc").sorted(),
                       ["secret-service-index", "secret-service-index.lock"], "no staged copy is left")
    }

    /// Names an index holds go into the introspection XML escaped: an alias an older
    /// kc-secretd saved unchecked cannot add nodes of its own.
    func testNamesAreEscapedInTheIntrospectionXML() {
        XCTAssertEqual(SecretService.xmlEscaped("x\"/><node name=\"evil"), "x&quot;/&gt;&lt;node name=&quot;evil")
        XCTAssertEqual(SecretService.xmlEscaped("a&b'c\u{1}"), "a&amp;b&apos;c?")
        XCTAssertEqual(SecretService.xmlEscaped("login"), "login")
    }
}
