import Foundation
import KCTestSupport
import XCTest

/// `man kc` as installed by the README's first command: `Tools/manpage.sh` writes the
/// page (Tools/test.sh makes it before the tests run), and it must render with no
/// warning and lose no sentence of the help it is made from.
final class ManPageTests: XCTestCase {
    private var page: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/man/kc.1").path
    }

    func testTheManPageRendersWithoutWarningsAndKeepsEverySentence() throws {
        guard FileManager.default.fileExists(atPath: page) else {
            throw XCTSkip("no man page at \(page): Tools/test.sh makes it with Tools/manpage.sh before the tests")
        }
        guard programExists("man") else { throw XCTSkip("man is not installed (package man-db)") }
        let rendered = try runCommand("/usr/bin/env", ["man", "--warnings", "-l", page],
                                      environment: ["PATH": "/usr/bin:/bin", "MANWIDTH": "80", "LANG": "C.UTF-8"])
        XCTAssertEqual(rendered.status, 0, "\(rendered)")
        XCTAssertEqual(rendered.standardError, "", "man --warnings prints nothing")
        let text = rendered.output.replacingOccurrences(of: "\u{2010}\n", with: "")
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        // Help lines that begin with ' once made troff drop the rest of the page's text.
        XCTAssertTrue(text.contains("and delete succeeds anyway so 'podman secret rm' can clean up."), text)
        XCTAssertTrue(text.contains("'kc get --group GROUP SERVICE KEY', 'kc ls --shared'"), text)
        // Every subcommand is there, with its summary.
        let lines = rendered.output.split(separator: "\n")
        for command in ["set", "get", "rm", "ls", "share", "unshare", "mount", "umount", "exec", "podman-driver",
                        "export", "import", "doctor"] {
            let heading = "     \(command)"
            XCTAssertTrue(lines.contains { $0 == heading || $0.hasPrefix(heading + " ") }, "the page has kc \(command)")
        }
    }
}
