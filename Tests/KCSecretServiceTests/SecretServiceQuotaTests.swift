import Foundation
import KCTestSupport
import XCTest

/// A store and a Delete over D-Bus leave the uid's key quota where it was (issue 35:
/// each pair used to leave one more key behind).
final class SecretServiceQuotaTests: KeyringTestCase {
    func testStoreAndClearCyclesOverDBusGiveTheQuotaBack() throws {
        try SecretServiceClients.requireSecretTool()
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        func cycle(_ round: Int) throws {
            XCTAssertEqual(try bus.secretTool("store", "--label", "t", "service", service, "username", "u", input: "value \(round)").status, 0)
            XCTAssertEqual(try bus.secretTool("clear", "service", service, "username", "u").status, 0)
        }
        try cycle(0)  // the service's keyring is made by the first store, and stays
        let before = try XCTUnwrap(TestQuota.settledChargeOutsideScratchKeyrings())
        for round in 1...10 { try cycle(round) }
        XCTAssertEqual(TestQuota.settledChargeOutsideScratchKeyrings(), before, "10 stores and clears through secret-tool")
        XCTAssertEqual(try bus.kc("rm", "--yes", service).status, 0)
    }
}
