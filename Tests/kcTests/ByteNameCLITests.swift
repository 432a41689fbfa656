import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// Names are bytes through every door: argv, standard output, `--json`, export and
/// import, and the mount. The shell passes `$'a\xffb'` as the bytes 61 ff 62.
final class ByteNameCLITests: MountingTestCase {
    private let withFF = KeyName(bytes: [0x61, 0xff, 0x62])
    private let withFE = KeyName(bytes: [0x61, 0xfe, 0x62])

    /// Runs a bash script in which `kc` is the built kc.
    private func bash(_ script: String, input: [UInt8] = []) throws -> CommandResult {
        try runCommand("/bin/bash", ["-c", "kc() { '\(builtKC)' \"$@\"; }\n" + script], input: input)
    }

    func testSetGetListAndRemoveKeepNamesThatAreNotUTF8() throws {
        let service = uniqueService()
        XCTAssertEqual(try bash("kc set \(service) $'a\\xffb'", input: Array("first".utf8)).status, 0)
        XCTAssertEqual(try bash("kc set \(service) $'a\\xfeb'", input: Array("second".utf8)).status, 0)
        XCTAssertEqual(try bash("kc get \(service) $'a\\xffb'").output, "first", "the second name did not overwrite the first")
        XCTAssertEqual(try bash("kc get \(service) $'a\\xfeb'").output, "second")
        XCTAssertEqual(try kc("ls", service).standardOutput, withFE.bytes + [0x0a] + withFF.bytes + [0x0a], "ls prints the exact bytes")
        let long = try kc("ls", "-l", service).standardOutput
        XCTAssertTrue(long.starts(with: Array("a\\xfeb\twhen-unlocked\t6\t-\t".utf8)), "--long, a table for people, escapes as messages do: \(long)")

        let missing = try bash("kc get \(service) $'a\\xfdb'")
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.standardError, "kc: no item 'a\\xfdb' in service '\(service)'; list the items with 'kc ls \(service)'\n")

        XCTAssertEqual(try bash("kc rm \(service) $'a\\xffb'").status, 0)
        XCTAssertEqual(try Keychain(service: service).allKeyNames(), [withFE], "rm removed that name only")
    }

    func testJSONListingCarriesTheExactBytesInBase64() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: withFF)
        try Keychain(service: service).set("w", forKey: "plain")
        let listing = try kc("ls", "--json", service)
        XCTAssertEqual(listing.status, 0, "\(listing)")
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(listing.standardOutput)) as? [String: Any])
        let items = try XCTUnwrap(object["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["name"] as? String }, ["a\u{FFFD}b", "plain"])
        XCTAssertEqual(items.map { $0["nameBase64"] as? String }, ["Yf9i", nil], "only the name that needs it")
        XCTAssertEqual(Data(base64Encoded: try XCTUnwrap(items[0]["nameBase64"] as? String)).map(Array.init), withFF.bytes)

        let odd = uniqueServiceName(endingWith: [0xff])
        try Keychain(service: odd).set("v", forKey: "k")
        let services = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try kc("ls", "--json").standardOutput)) as? [String: Any])
        let names = try XCTUnwrap(services["services"] as? [String])
        let exact = try XCTUnwrap(services["servicesBase64"] as? [Any])
        let index = try XCTUnwrap(names.firstIndex(of: String(decoding: odd.bytes, as: UTF8.self)))
        XCTAssertEqual((exact[index] as? String).flatMap { Data(base64Encoded: $0) }.map(Array.init), odd.bytes)
        XCTAssertTrue(exact[names.firstIndex(of: service)!] is NSNull, "null for a name that is UTF-8")
    }

    func testServiceAndItemThatLookAlikeToTheParserAreTakenInArgvOrder() throws {
        // Both repair to "<prefix>\u{FFFD}": the service is the first argument, the item the second.
        let service = uniqueServiceName(endingWith: [0xff])
        let prefix = String(decoding: service.bytes.dropLast(), as: UTF8.self)
        let key = KeyName(bytes: service.bytes.dropLast() + [0xfe])
        XCTAssertEqual(try bash("kc set $'\(prefix)\\xff' $'\(prefix)\\xfe'", input: [0x31]).status, 0)
        XCTAssertEqual(try Keychain(service: service).data(forKey: key), [0x31])
        XCTAssertEqual(try bash("kc get $'\(prefix)\\xff' $'\(prefix)\\xfe'").output, "1")
    }

    func testAnItemKeyctlAddedWithANameThatIsNotUTF8IsReadAndRemovedByKc() throws {
        let service = uniqueService()
        try Keychain(service: service).set("x", forKey: "seed")
        let ring = try XCTUnwrap(keyctlSearch("@s", "keyring", "kc:\(service)"))
        XCTAssertEqual(try bash("printf 'made by keyctl' | keyctl padd user $'a\\xffb' \(ring)").status, 0)
        XCTAssertEqual(try bash("kc get \(service) $'a\\xffb'").output, "made by keyctl")
        XCTAssertEqual(try bash("kc rm \(service) $'a\\xffb'").status, 0)
        XCTAssertNotEqual(try bash("keyctl search \(ring) user $'a\\xffb'").status, 0, "gone from the kernel")
    }

    func testExportAndImportThroughTheCLIKeepNamesThatAreNotUTF8() throws {
        let service = uniqueServiceName(endingWith: [0xfe])
        let prefix = String(decoding: service.bytes.dropLast(), as: UTF8.self)
        try Keychain(service: service).set("v", forKey: withFF)
        let exported = try bash("kc export --service $'\(prefix)\\xfe' | cat")
        XCTAssertEqual(exported.status, 0, "\(exported)")
        try Keychain(service: service).removeAll()
        let imported = try kc(["import"], input: exported.standardOutput)
        XCTAssertEqual(imported.status, 0, "\(imported)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: withFF), "v")
        XCTAssertEqual(try Keychain(service: service).allKeyNames(), [withFF])
    }

    func testTheMountServesNamesThatAreNotUTF8() throws {
        let mount = try mount()
        let service = uniqueService()
        try Keychain(service: service).set("from kc", forKey: withFE)
        let directory = mount.file(service)
        XCTAssertEqual(try bash("cat '\(directory)'/$'a\\xfeb'").output, "from kc")
        let written = try bash("printf 'through the mount' > '\(directory)'/$'a\\xffb'")
        XCTAssertEqual(written.status, 0, "\(written)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: withFF), "through the mount")
        XCTAssertEqual(try Keychain(service: service).string(forKey: withFE), "from kc", "one name did not touch the other")
        let listing = try bash("cd '\(directory)' && printf '%s\\n' *").standardOutput
        XCTAssertEqual(listing, withFE.bytes + [0x0a] + withFF.bytes + [0x0a], "readdir gives the exact bytes")
        XCTAssertEqual(try bash("rm '\(directory)'/$'a\\xffb'").status, 0)
        XCTAssertEqual(try Keychain(service: service).allKeyNames(), [withFE])
    }
}
