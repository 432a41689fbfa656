import Foundation
import KCTestSupport
import Keyrings
import XCTest

/// A store and a Delete over D-Bus leave the uid's key quota where it was (issue 35:
/// each pair used to leave one more key behind; issue 37: each Delete left the service
/// kc-secretd had made for the item).
final class SecretServiceQuotaTests: KeyringTestCase {
    func testStoreAndClearCyclesOverDBusGiveTheQuotaBack() throws {
        try SecretServiceClients.requireSecretTool()
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        func cycle(_ round: Int) throws {
            XCTAssertEqual(try bus.secretTool("store", "--label", "t", "service", service, "username", "u", input: "value \(round)").status, 0)
            XCTAssertEqual(try bus.secretTool("clear", "service", service, "username", "u").status, 0)
        }
        try cycle(0)  // the daemon's own keys (its thread's keyring) are made by the first round
        let before = try XCTUnwrap(TestQuota.settledChargeOutsideScratchKeyrings())
        for round in 1...10 { try cycle(round) }
        XCTAssertEqual(TestQuota.settledChargeOutsideScratchKeyrings(), before, "10 stores and clears through secret-tool")
        _ = try bus.kc("rm", "--yes", service)
    }

    /// Each item in a service of its own (a browser's per-site items, git's per-host
    /// ones): the service kc-secretd made for the item goes with its Delete, so 200
    /// create-and-delete rounds leave the key count (/proc/key-users) where it started.
    func testTwoHundredCreateAndDeleteRoundsLeaveTheKeyCountWhereItStarted() throws {
        try SecretServiceClients.requirePython()
        let bus = try startSecretServiceBus()
        let base = uniqueService()
        let services = (0...200).map { "\(base).\($0)" }
        servicesToRemove += services.map { KeyName($0) }
        let round = """
            c = Client()
            s = c.open('plain')
            for service in sys.argv[1:]:
                item = c.create(s, {'service': service, 'username': 'u'}, b'value')
                c.delete(item)
            emit(left=len(c.search({'username': 'u', 'service': sys.argv[1]})[0]))
            """
        XCTAssertEqual(try bus.python(round, arguments: [services[0]])["left"], 0)
        let before = try XCTUnwrap(TestQuota.settledChargeOutsideScratchKeyrings())
        XCTAssertEqual(try bus.python(round, arguments: Array(services[1...]))["left"], 0)
        let after = try XCTUnwrap(TestQuota.settledChargeOutsideScratchKeyrings())
        XCTAssertEqual(after.keys, before.keys, "200 items, each in a service of its own, created and deleted over D-Bus: \(before) before, \(after) after")
        let left = services.filter { (try? bus.kc("ls", $0))?.status == 0 }
        XCTAssertEqual(left, [], "no emptied service is left")
    }

    /// A service kc-secretd made for an item is removed with it only while it holds
    /// nothing else: an item another door stored there meanwhile keeps it; and a
    /// service it did not make stays, emptied, as at every door.
    func testADeleteRemovesOnlyAServiceKCSecretdMadeAndOnlyWhenNothingElseIsInIt() throws {
        try SecretServiceClients.requireSecretTool()
        let bus = try startSecretServiceBus()
        let made = uniqueService(), existing = uniqueService()
        XCTAssertEqual(try bus.secretTool("store", "--label", "t", "service", made, "username", "u", input: "v").status, 0)
        XCTAssertEqual(try bus.kc("set", made, "other", input: Array("by kc".utf8)).status, 0)
        XCTAssertEqual(try bus.secretTool("clear", "service", made, "username", "u").status, 0)
        XCTAssertEqual(try bus.kc("get", made, "other").output, "by kc", "the item another door stored stays, with its service")

        XCTAssertEqual(try bus.kc("set", existing, "first", input: Array("by kc".utf8)).status, 0)
        XCTAssertEqual(try bus.secretTool("store", "--label", "t", "service", existing, "username", "u", input: "v").status, 0)
        XCTAssertEqual(try bus.kc("rm", existing, "first").status, 0)
        XCTAssertEqual(try bus.secretTool("clear", "service", existing, "username", "u").status, 0)
        let listed = try bus.kc("ls", existing)
        XCTAssertEqual(listed.status, 0, "a service kc-secretd did not make stays, emptied: \(listed)")
        XCTAssertEqual(listed.output, "")
    }
}
