import Foundation
import KCTestSupport
import XCTest

/// `secret-tool` (libsecret, so the DH transport) against kc-secretd started by D-Bus
/// activation: what it stores is the kc item `kc get` reads, and what `kc set` stores it
/// finds.
final class SecretToolTests: KeyringTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requireSecretTool()
    }

    func testStoreLookupSearchClearRoundTripThroughOneStore() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()

        let stored = try bus.secretTool("store", "--label", "Example API token", "service", service, "username", "alice", input: "tok3n")
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try bus.kc("get", service, "alice").output, "tok3n", "the secret is the kc item SERVICE/USERNAME")

        let found = try bus.secretTool("lookup", "service", service, "username", "alice")
        XCTAssertEqual(found.status, 0, "\(found)")
        XCTAssertEqual(found.output, "tok3n")

        let searched = try bus.secretTool("search", "--all", "--unlock", "service", service)
        XCTAssertEqual(searched.status, 0, "\(searched)")
        // secret-tool shows the last element of the item's path: service and item name, encoded.
        XCTAssertTrue(searched.output.hasPrefix("[/kc_2dtest_2e") && searched.output.contains("__alice]\n"), "the item's path: \(searched)")
        XCTAssertTrue(searched.listing.contains("label = Example API token"), searched.listing)
        XCTAssertTrue(searched.listing.contains("secret = tok3n"), searched.listing)
        XCTAssertTrue(searched.listing.contains("attribute.service = \(service)"), searched.listing)
        XCTAssertTrue(searched.listing.contains("attribute.username = alice"), searched.listing)
        XCTAssertEqual(searched.listing.components(separatedBy: "label = ").count - 1, 1, "one item: \(searched.listing)")

        let cleared = try bus.secretTool("clear", "service", service, "username", "alice")
        XCTAssertEqual(cleared.status, 0, "\(cleared)")
        XCTAssertEqual(try bus.kc("get", service, "alice").status, 1, "clear removes the kc item")
        let gone = try bus.secretTool("lookup", "service", service, "username", "alice")
        XCTAssertEqual(gone.status, 1, "lookup of a cleared item finds nothing: \(gone)")
        XCTAssertEqual(gone.output, "")
    }

    func testStoringAgainReplacesTheValueOfTheSameItem() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        XCTAssertEqual(try bus.secretTool("store", "--label", "first", "service", service, "username", "bob", input: "one").status, 0)
        XCTAssertEqual(try bus.secretTool("store", "--label", "second", "service", service, "username", "bob", input: "two").status, 0)
        XCTAssertEqual(try bus.secretTool("lookup", "service", service, "username", "bob").output, "two")
        XCTAssertEqual(try bus.kc("get", service, "bob").output, "two")
        XCTAssertEqual(try bus.kc("ls", service).output, "bob\n", "secret-tool store replaces: still one kc item")
        let searched = try bus.secretTool("search", "--all", "service", service)
        XCTAssertEqual(searched.listing.components(separatedBy: "label = ").count - 1, 1, "one item: \(searched.listing)")
        XCTAssertTrue(searched.listing.contains("label = second"), "the replacing store's label: \(searched.listing)")
    }

    func testAnItemStoredWithKCSetIsFoundBySecretTool() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        XCTAssertEqual(try bus.kc("set", service, "admin", input: Array("s3cret".utf8)).status, 0)

        let found = try bus.secretTool("lookup", "service", service, "username", "admin")
        XCTAssertEqual(found.status, 0, "\(found)")
        XCTAssertEqual(found.output, "s3cret")
        let searched = try bus.secretTool("search", "--all", "service", service)
        XCTAssertTrue(searched.listing.contains("attribute.username = admin"), searched.listing)
        XCTAssertTrue(searched.listing.contains("secret = s3cret"), searched.listing)

        // A replacing store under the same names gives that item its new value.
        XCTAssertEqual(try bus.secretTool("store", "--label", "admin", "service", service, "username", "admin", input: "n3w").status, 0)
        XCTAssertEqual(try bus.kc("get", service, "admin").output, "n3w")
        XCTAssertEqual(try bus.kc("ls", service).output, "admin\n")
    }

    func testBinaryAndNonASCIIValuesComeBackByteExact() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let value = "pässwörd ✓ \u{1F511}\ttab\nnewline"
        XCTAssertEqual(try bus.secretTool("store", "--label", "ünïcödé", "service", service, "username", "ß", input: value).status, 0)
        XCTAssertEqual(try bus.secretTool("lookup", "service", service, "username", "ß").output, value)
        XCTAssertEqual(try bus.kc("get", service, "ß").output, value)
    }
}

extension CommandResult {
    /// What `secret-tool search` shows of the items: their paths (standard output) and
    /// their labels, secrets and attributes (standard error).
    var listing: String { output + standardError }
}
