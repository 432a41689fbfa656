import Foundation
import KCTestSupport
import XCTest

/// `kc set` on a terminal prompts twice without echo; the typed line is the value.
/// Driven through a real pseudo-terminal (python3's pty module).
final class TerminalPromptTests: KeyringTestCase {
    private func typeAtPrompt(_ service: String, _ first: String, _ second: String) throws -> CommandResult {
        try PseudoTerminal.run(builtKC, ["set", service, "typed"], answers: [("Value for", first), ("Again", second)])
    }

    func testPromptsTwiceWithoutEchoAndStoresTheLine() throws {
        guard programExists("python3") else { throw XCTSkip("python3 is needed to drive a pseudo-terminal") }
        let service = uniqueService()
        let result = try typeAtPrompt(service, "pa55 word", "pa55 word")
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertFalse(result.output.contains("pa55"), "the typed value is not echoed: \(result)")
        XCTAssertTrue(result.output.contains("Again to confirm"), "\(result)")
        XCTAssertEqual(try kc("get", service, "typed").output, "pa55 word", "the line, without its newline")
    }

    func testMismatchedEntriesStoreNothing() throws {
        guard programExists("python3") else { throw XCTSkip("python3 is needed to drive a pseudo-terminal") }
        let service = uniqueService()
        let result = try typeAtPrompt(service, "one", "two")
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertTrue(result.output.contains("kc: the two entries differ; nothing was stored"), "\(result)")
        XCTAssertEqual(try kc("get", service, "typed").status, 1)
    }
}
