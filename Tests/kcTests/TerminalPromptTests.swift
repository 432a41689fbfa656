import Foundation
import KCTestSupport
import XCTest

/// `kc set` on a terminal prompts twice without echo; the typed line is the value.
/// Driven through a real pseudo-terminal (python3's pty module).
final class TerminalPromptTests: KeyringTestCase {
    private func typeAtPrompt(_ service: String, _ first: String, _ second: String) throws -> CommandResult {
        let driver = """
            import os, pty, sys, time
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], [sys.argv[1], "set", sys.argv[2], "typed"])
            out = b""
            def wait_for(text):
                global out
                while text not in out:
                    chunk = os.read(fd, 1024)
                    if not chunk: raise SystemExit("kc closed the terminal: %r" % out)
                    out += chunk
            wait_for(b"Value for")
            os.write(fd, sys.argv[3].encode() + b"\\n")
            wait_for(b"Again")
            os.write(fd, sys.argv[4].encode() + b"\\n")
            try:
                while True:
                    chunk = os.read(fd, 1024)
                    if not chunk: break
                    out += chunk
            except OSError:
                pass
            _, status = os.waitpid(pid, 0)
            sys.stdout.write(out.decode(errors="replace"))
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        return try runCommand("/usr/bin/env", ["python3", "-c", driver, builtKC, service, first, second])
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
