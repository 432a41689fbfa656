import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// `kc exec` hands the command exact bytes: values, arguments and the inherited
/// environment are not text to kc, and nothing is rewritten to U+FFFD.
final class ExecBytesTests: KeyringTestCase {
    /// Bytes that are not UTF-8: a lone continuation byte, 0xff/0xfe, a cut-off sequence.
    private let notUTF8: [UInt8] = [0x61, 0xff, 0xfe, 0x80, 0x62, 0xc3]

    /// `env -0` output as its `NAME=value` entries.
    private func entries(_ output: [UInt8]) -> [[UInt8]] {
        output.split(separator: 0).map(Array.init)
    }

    private func entries(named name: String, in output: [UInt8]) -> [[UInt8]] {
        let prefix = Array((name + "=").utf8)
        return entries(output).filter { $0.starts(with: prefix) }
    }

    /// `printf` octal escapes for the shell, so a script can make bytes Swift strings cannot hold.
    private func octal(_ bytes: [UInt8]) -> String {
        bytes.map { "\\" + String($0, radix: 8) }.joined()
    }

    func testAValueThatIsNotUTF8ReachesTheEnvironmentExactly() throws {
        let service = uniqueService()
        try Keychain(service: service).set([0xff, 0xfe], forKey: "blob")
        try Keychain(service: service).set(notUTF8, forKey: "mixed")
        let result = try kc("exec", "--service", service, "--env", "--", "/usr/bin/env", "-0")
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(entries(named: "BLOB", in: result.standardOutput), [Array("BLOB=".utf8) + [0xff, 0xfe]])
        XCTAssertEqual(entries(named: "MIXED", in: result.standardOutput), [Array("MIXED=".utf8) + notUTF8])
    }

    func testAnArgumentThatIsNotUTF8ReachesTheCommandExactly() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        for separator in ["-- ", ""] {
            let result = try runShell("""
                '\(builtKC)' exec --service '\(service)' --env \(separator)/usr/bin/printf '%s|%s' "$(printf '\(octal(notUTF8))')" "$(printf '\\377')"
                """)
            XCTAssertEqual(result.status, 0, "\(separator): \(result)")
            XCTAssertEqual(result.standardOutput, notUTF8 + Array("|".utf8) + [0xff], "with\(separator.isEmpty ? "out" : "") --")
        }
    }

    func testAnInheritedVariableThatIsNotUTF8PassesThroughExactly() throws {
        let service = uniqueService()
        try Keychain(service: service).set("item", forKey: "blob")
        let result = try runShell("""
            KC_TEST_RAW="$(printf '\(octal(notUTF8))')" BLOB=inherited /usr/bin/env "$(printf '\\377')KC_TEST_NAME=$(printf '\\376')" \
              '\(builtKC)' exec --service '\(service)' --env -- /usr/bin/env -0
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(entries(named: "KC_TEST_RAW", in: result.standardOutput), [Array("KC_TEST_RAW=".utf8) + notUTF8])
        XCTAssertEqual(entries(result.standardOutput).filter { $0.first == 0xff },
                       [[0xff] + Array("KC_TEST_NAME=".utf8) + [0xfe]], "a name that is not UTF-8 passes through too")
        XCTAssertEqual(entries(named: "BLOB", in: result.standardOutput), [Array("BLOB=item".utf8)],
                       "an item replaces an inherited variable of its name")
    }

    func testFilesHoldTheExactBytes() throws {
        let service = uniqueService()
        let value: [UInt8] = [0xff, 0xfe, 0x00, 0x0a] + notUTF8
        try Keychain(service: service).set(value, forKey: "blob")
        let result = try kc("exec", "--service", service, "--files", "--", "/bin/sh", "-c", #"cat "$CREDENTIALS_DIRECTORY/blob""#)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.standardOutput, value)
    }

    func testAValueWithNULIsRefusedWithOneLine() throws {
        let service = uniqueService()
        try Keychain(service: service).set([0xff, 0x00, 0xfe], forKey: "blob")
        let result = try kc("exec", "--service", service, "--env", "--", "/usr/bin/env", "-0")
        XCTAssertEqual(result.status, 2)
        XCTAssertEqual(result.standardOutput, [], "the command does not run")
        XCTAssertTrue(result.standardError.hasPrefix("kc: item 'blob' of '\(service)' contains a NUL byte"), result.standardError)
        XCTAssertEqual(result.standardError.filter { $0 == "\n" }.count, 1, "one line: \(result.standardError)")
    }
}
