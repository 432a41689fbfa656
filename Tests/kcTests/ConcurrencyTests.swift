import Foundation
import KCTestSupport
import XCTest

/// Many processes creating the same new service at once must lose nothing: a plain
/// `add_key` of the service keyring would displace an earlier one with its items.
final class ConcurrencyTests: KeyringTestCase {
    func testConcurrentFirstWritersToANewServiceLoseNothing() throws {
        let writers = 8
        for round in 0..<15 {
            for access in ["when-unlocked", "after-first-unlock"] {
                let service = uniqueService("race\(round)\(access)")
                let script = (0..<writers).map { index in
                    "printf 'value\(index)' | \"$KC\" set --access \(access) '\(service)' item\(index) &"
                }.joined(separator: "\n") + "\nwait"
                let result = try runCommand("/bin/sh", ["-c", script], environment: ["KC": builtKC, "PATH": "/usr/bin:/bin"])
                XCTAssertEqual(result.status, 0, "\(result)")
                let listed = try kc("ls", service).output.split(separator: "\n").map(String.init)
                XCTAssertEqual(listed, (0..<writers).map { "item\($0)" }, "round \(round) at \(access)")
                for index in 0..<writers {
                    XCTAssertEqual(try kc("get", service, "item\(index)").output, "value\(index)")
                }
                let anchor = access == "when-unlocked" ? "@s" : "@u"
                let rings = try keyctl("rlist", anchor).output.split(whereSeparator: \.isWhitespace).filter { serial in
                    (try? keyctl("rdescribe", String(serial)).output.hasSuffix(";kc:\(service)\n")) == true
                }
                XCTAssertEqual(rings.count, 1, "one service keyring in \(anchor)")
                // 30 services of 9 keys would outgrow an ordinary user's quota of 200.
                removeServiceKeyrings(service)
            }
        }
    }

}
