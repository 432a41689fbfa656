import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A store and a delete of an item, through any door, leave the uid's key quota where it
/// was (issue 35): removing an item never removes its service, and nothing else stays
/// behind (a deadline record, a keyring, a link). The uid's thread and process keyrings,
/// which live as long as their threads, are left out of the count.
final class QuotaPerDoorTests: MountingTestCase {
    private func assertCyclesKeepTheQuota(_ door: String, file: StaticString = #filePath, line: UInt = #line,
                                          cycle: (Int) throws -> Void) throws {
        try cycle(0)  // the service's keyring is made by the first store, and stays
        let before = try XCTUnwrap(TestQuota.settledChargeOutsideScratchKeyrings(), "/proc/key-users names this uid")
        for round in 1...10 { try cycle(round) }
        XCTAssertEqual(TestQuota.settledChargeOutsideScratchKeyrings(), before, "10 stores and deletes through \(door)", file: file, line: line)
    }

    func testStoreAndDeleteCyclesThroughTheCommandLineTheLibraryAndTheMountGiveTheQuotaBack() throws {
        let service = uniqueService()
        try assertCyclesKeepTheQuota("kc set and kc rm") { round in
            XCTAssertEqual(try kc("set", service, "token", input: Array("value \(round)".utf8)).status, 0)
            XCTAssertEqual(try kc("rm", service, "token").status, 0)
        }
        try assertCyclesKeepTheQuota("kc set --timeout and kc rm") { round in
            XCTAssertEqual(try kc("set", "--timeout", "1h", service, "timed", input: Array("value \(round)".utf8)).status, 0)
            XCTAssertEqual(try kc("rm", service, "timed").status, 0)
        }
        let keychain = try Keychain(service: service)
        try assertCyclesKeepTheQuota("Keychain.set and remove") { round in
            try keychain.set("value \(round)", forKey: "library")
            XCTAssertTrue(try keychain.remove("library"))
        }
        let mount = try mount()
        try assertCyclesKeepTheQuota("a write and rm in the mount") { round in
            XCTAssertEqual(try runShell("printf 'value \(round)' > '\(mount.file(service, "mounted"))' && rm '\(mount.file(service, "mounted"))'").status, 0)
        }
        XCTAssertTrue(try keychain.serviceExists(), "the emptied service stays until it is removed on purpose")
        try keychain.removeAll()
    }
}
