import Foundation
import KCTestSupport
import XCTest

/// `man kc` as installed by the README's first command: `Tools/manpage.sh` writes the
/// page (Tools/test.sh makes it before the tests run) from the argument parser and the
/// hand-written docs/kc.1.extra. It must render with no warning, lose no sentence of the
/// help it is made from, and read as a Unix user expects a man page to read.
final class ManPageTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    private var page: String { Self.repository.appendingPathComponent(".build/man/kc.1").path }

    /// The page as `man` shows it on an 80-column terminal, and what `man --warnings` said.
    private func rendered() throws -> CommandResult {
        guard FileManager.default.fileExists(atPath: page) else {
            throw XCTSkip("no man page at \(page): Tools/test.sh makes it with Tools/manpage.sh before the tests")
        }
        guard programExists("man") else { throw XCTSkip("man is not installed (package man-db)") }
        return try runCommand("/usr/bin/env", ["man", "--warnings", "-l", page],
                              environment: ["PATH": "/usr/bin:/bin", "MANWIDTH": "80", "LANG": "C.UTF-8"])
    }

    /// kc-agent's page (hand-written, docs/kc-agent.1): no warning, and every setting of
    /// the configuration it documents is one the agent reads.
    func testKcAgentsPageRendersWithoutWarningsAndNamesEverySetting() throws {
        guard programExists("man") else { throw XCTSkip("man is not installed (package man-db)") }
        let path = Self.repository.appendingPathComponent("docs/kc-agent.1").path
        let rendered = try runCommand("/usr/bin/env", ["man", "--warnings", "-l", path],
                                      environment: ["PATH": "/usr/bin:/bin", "MANWIDTH": "80", "LANG": "C.UTF-8"])
        XCTAssertEqual(rendered.status, 0, "\(rendered)")
        XCTAssertEqual(rendered.standardError, "", "man --warnings prints nothing")
        let source = try String(contentsOfFile: Self.repository.appendingPathComponent("Sources/KCAgent/AgentConfiguration.swift").path, encoding: .utf8)
        for setting in ["address", "addresses", "ca_file", "client_certificate", "client_key", "allow_plain_http", "auth",
                        "poll_interval", "kv", "leases", "secret", "mount", "service", "access", "path", "method", "data"] {
            XCTAssertTrue(rendered.output.contains(setting), "the page documents \(setting)")
            XCTAssertTrue(source.contains("\"\(setting)\""), "the agent reads \(setting)")
        }
    }

    func testTheManPageRendersWithoutWarningsAndKeepsEverySentence() throws {
        let rendered = try rendered()
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

    func testTheManPageHasTheSectionsOfAUnixManPageInTheirOrderAndNothingBeforeThem() throws {
        let lines = try rendered().output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // The header line, then NAME: no stray line (the plugin's comment once showed as ".").
        let content = lines.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        XCTAssertTrue(content.first?.hasPrefix("KC(1)") == true && content.first?.hasSuffix("KC(1)") == true,
                      "the page starts with its header: \(content.prefix(3))")
        XCTAssertEqual(content.dropFirst().first, "NAME", "nothing between the header and NAME: \(content.prefix(3))")
        // Section headings are the lines in capitals at the left margin (the header and
        // footer lines are in mixed case).
        let headings = lines.filter { $0.first?.isUppercase == true && $0 == $0.uppercased() }
        XCTAssertEqual(headings,
                       ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "ENVIRONMENT", "FILES", "EXIT STATUS",
                        "EXAMPLES", "SEE ALSO"])
        // NAME reads as NAME lines do: a lower-case phrase without a full stop.
        XCTAssertEqual(section("NAME", of: lines).first, "     kc — a keychain for Linux, stored in the kernel's keyrings")
        // SYNOPSIS: one line for each command, options before operands.
        let synopsis = section("SYNOPSIS", of: lines)
        for command in ["set", "get", "rm", "ls", "share", "unshare", "mount", "umount", "exec", "podman-driver",
                        "credential-server", "export", "import", "vault init", "vault status", "vault passwd",
                        "vault host-init", "vault boot", "unlock", "lock", "doctor"] {
            XCTAssertTrue(synopsis.contains { $0 == "     kc \(command)" || $0.hasPrefix("     kc \(command) ") },
                          "SYNOPSIS has kc \(command): \(synopsis)")
        }
        XCTAssertTrue(synopsis.contains { $0.hasPrefix("     kc get [--group group] [--from user] [--quiet] service key") },
                      "\(synopsis)")
        // EXIT STATUS: kc's own contract, not the plugin's "0 on success, and >0 if an error occurs".
        let exitStatus = section("EXIT STATUS", of: lines)
        for status in ["0", "1", "2", "64"] {
            XCTAssertTrue(exitStatus.contains { $0.hasPrefix("     \(status) ") }, "EXIT STATUS says what \(status) means")
        }
        XCTAssertFalse(lines.joined(separator: " ").contains("if an error occurs"))
        // Each command's --version and --help are said once, at the top.
        XCTAssertEqual(lines.filter { $0.trimmingCharacters(in: .whitespaces) == "--version" }.count, 1)
    }

    /// Every variable that kc, its daemons, its library and the python keyring backend
    /// read is documented; and ENVIRONMENT names none that nothing reads any more.
    func testTheManPageNamesEveryEnvironmentVariableTheSourcesRead() throws {
        let documented = try environmentSectionVariables()
        let (read, unnamed) = try variablesReadBySources()
        // The scan itself works: these are read today by kc get, the vault and kc exec.
        for known in ["KC_AUDIT", "KC_SERVICE", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"] {
            XCTAssertNotNil(read[known], "the scan of the sources finds \(known)")
        }
        XCTAssertEqual(unnamed, [], "environment reads whose name is not a string literal cannot be checked against the man page; name the variable in the call")
        for (variable, place) in read.sorted(by: { $0.key < $1.key }) where !documented.contains(variable) {
            XCTFail("\(place) reads $\(variable), which ENVIRONMENT in docs/kc.1.extra does not name")
        }
        for variable in documented.sorted() where read[variable] == nil {
            XCTFail("ENVIRONMENT in docs/kc.1.extra names $\(variable), which no source reads any more")
        }
    }

    /// The rendered lines of one section, without its heading.
    private func section(_ title: String, of lines: [String]) -> [String] {
        guard let start = lines.firstIndex(of: title) else { return [] }
        let rest = lines[(start + 1)...]
        let end = rest.firstIndex { $0.first.map { !$0.isWhitespace } ?? false } ?? rest.endIndex
        return Array(rest[..<end]).filter { !$0.isEmpty }
    }

    /// The names on the `.It Ev` lines of the page's ENVIRONMENT section.
    private func environmentSectionVariables() throws -> Set<String> {
        guard FileManager.default.fileExists(atPath: page) else {
            throw XCTSkip("no man page at \(page): Tools/test.sh makes it with Tools/manpage.sh before the tests")
        }
        let source = try String(contentsOfFile: page, encoding: .utf8).split(separator: "\n").map(String.init)
        guard let start = source.firstIndex(of: ".Sh ENVIRONMENT") else {
            XCTFail("the page has no ENVIRONMENT section")
            return []
        }
        var names = Set<String>()
        for line in source[(start + 1)...] {
            if line.hasPrefix(".Sh ") { break }
            guard line.hasPrefix(".It Ev ") else { continue }
            for word in line.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "," }) where word != "Ev" {
                names.insert(String(word))
            }
        }
        return names
    }

    /// The variables the sources read by name (`getenv("X")`, `secure_getenv("X")`,
    /// `ProcessInfo.processInfo.environment["X"]`, python's `os.environ.get("X")`,
    /// `os.environ["X"]` and `os.getenv("X")`), each with the first file:line that reads
    /// it; and the file:line of every such read whose name is not a literal.
    private func variablesReadBySources() throws -> (read: [String: String], unnamed: [String]) {
        let name = #"["']([A-Za-z_][A-Za-z0-9_]*)["']"#
        let named = try [
            #"\b(?:secure_)?getenv\(\s*"# + name,
            #"\bProcessInfo\.processInfo\.environment\[\s*"# + name,
            #"\bos\.environ\.get\(\s*"# + name,
            #"\bos\.environ\[\s*"# + name,
            #"\bos\.getenv\(\s*"# + name,
        ].map { try NSRegularExpression(pattern: $0) }
        let anyRead = try NSRegularExpression(pattern:
            #"\b(?:secure_)?getenv\(|\bProcessInfo\.processInfo\.environment\b|\bos\.environ\.get\(|\bos\.environ\[|\bos\.getenv\("#)
        var read: [String: String] = [:]
        var unnamed: [String] = []
        let extensions: Set<String> = ["swift", "c", "h", "py"]
        for folder in ["Sources", "PAM", "Integrations"] {
            let root = Self.repository.appendingPathComponent(folder)
            guard let files = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { continue }
            for case let file as URL in files where extensions.contains(file.pathExtension) {
                let text = String(decoding: try Data(contentsOf: file), as: UTF8.self)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let line = String(line)
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    if trimmed.hasPrefix("//") || trimmed.hasPrefix("#") || trimmed.hasPrefix("*") { continue }
                    let range = NSRange(line.startIndex..., in: line)
                    let place = "\(folder)/\(file.path.dropFirst(root.path.count + 1)):\(number + 1)"
                    var found = 0
                    for pattern in named {
                        for match in pattern.matches(in: line, range: range) {
                            guard let variable = Range(match.range(at: 1), in: line).map({ String(line[$0]) }) else { continue }
                            if read[variable] == nil { read[variable] = place }
                            found += 1
                        }
                    }
                    if anyRead.numberOfMatches(in: line, range: range) > found { unnamed.append(place) }
                }
            }
        }
        return (read, unnamed)
    }
}
