import XCTest
import Age

/// The cost the vault lives with: unlocking decrypts ~200 small X25519 files.
final class AgePerformanceTests: XCTestCase {
    func testTwoHundredSmallFilesDecryptQuickly() throws {
        let identity = AgeX25519Identity.generate()
        let files = try (0..<200).map { index in
            try Age.encrypt((0..<100).map { UInt8(truncatingIfNeeded: $0 + index) }, to: [identity.recipient])
        }
        let clock = ContinuousClock()
        var plaintextBytes = 0
        let elapsed = try clock.measure {
            for file in files { plaintextBytes += try Age.decrypt(file, identities: [identity]).count }
        }
        XCTAssertEqual(plaintextBytes, 200 * 100)
        print("age: 200 X25519 decrypts of 100-byte files took \(elapsed)")
        // The vault's target is well under 100 ms; the bound is loose so that a debug
        // build (swift test's default) on a busy machine does not fail it.
        XCTAssertLessThan(elapsed, .seconds(1))
    }
}
