import Foundation
import KCTestSupport
import XCTest

/// Bad input is refused before any keyring system call, watched with strace.
final class NoKernelCallTests: KeyringTestCase {
    func testBadInputMakesNoKeyringSystemCall() throws {
        guard programExists("strace") else { throw XCTSkip("strace is not installed") }
        let service = uniqueService()
        let cases: [([String], [UInt8])] = [
            (["set", service, "a/b"], [1]),
            (["set", service, ".."], [1]),
            (["set", "", "k"], [1]),
            (["set", "--timeout", "0", service, "k"], [1]),
            (["set", "--access", "never", service, "k"], [1]),
            (["set", service, "k"], [UInt8](repeating: 1, count: 40000)),
            (["get", service, String(repeating: "x", count: 256)], []),
            (["rm", service, "a\u{1}/"], []),
        ]
        for (arguments, input) in cases {
            let result = try runCommand("/usr/bin/env", ["strace", "-f", "-qq", "-e", "trace=add_key,keyctl,request_key", builtKC] + arguments, input: input)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.standardError.contains("kc: "), "\(arguments): \(result)")
            XCTAssertFalse(result.standardError.contains("add_key("), "\(arguments): \(result)")
            XCTAssertFalse(result.standardError.contains("keyctl("), "\(arguments): \(result)")
        }
    }
}
