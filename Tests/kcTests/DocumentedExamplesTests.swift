import Foundation
import KCTestSupport
import XCTest

/// The README's and docs/'s shell examples print what the docs show: each
/// block of `$ command` lines runs in a sandbox (throwaway accounts, fresh keyrings, a
/// home of its own, the built kc) and its output is compared with the docs, in the
/// notation of docs/EXAMPLES.md. `KC_DOC_EXAMPLES=README.md:189,docs/INTEGRATIONS.md:99`
/// runs only those blocks (and the blocks they continue).
final class DocumentedExamplesTests: KeyringTestCase {
    nonisolated(unsafe) private static var environment: ExampleEnvironment?

    override class func tearDown() {
        environment?.remove()
        environment = nil
        super.tearDown()
    }

    func testTheREADMEExamplesPrintWhatTheREADMEShows() throws {
        try runExamples(of: "README.md")
    }

    func testTheIntegrationsExamplesPrintWhatDocsIntegrationsShows() throws {
        try runExamples(of: "docs/INTEGRATIONS.md")
    }

    /// The topics the README points to (docs/CONTAINERS.md, docs/VAULT.md, ...): their
    /// examples run wherever they moved.
    func testTheTopicPagesExamplesPrintWhatTheyShow() throws {
        for file in DocumentedExamples.files where file != "README.md" && file != "docs/INTEGRATIONS.md" {
            try runExamples(of: file)
        }
    }

    // MARK: Helpers

    private func runExamples(of file: String) throws {
        guard getuid() == 0 else {
            throw XCTSkip("the examples run as throwaway accounts with keyrings of their own, which only root can make (CI's root run runs them)")
        }
        guard programExists("runuser"), programExists("keyctl"), programExists("useradd") else {
            throw XCTSkip("runuser, keyctl and useradd are needed to run the examples")
        }
        let (blocks, errors) = try DocumentedExamples.load()
        guard errors.isEmpty else { throw XCTSkip("the examples' markup has errors (testEveryExampleBlockRunsOrSaysWhyNot names them)") }
        var selected = blocks.filter { $0.file == file }
        if let only = ProcessInfo.processInfo.environment["KC_DOC_EXAMPLES"], !only.isEmpty {
            let names = Set(only.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            var keep = Set<String>()
            for (index, block) in selected.enumerated() where names.contains(block.name) {
                keep.insert(block.name)
                var back = index
                while back > 0, selected[back].continues || selected[back].notRunReason != nil {
                    back -= 1
                    keep.insert(selected[back].name)
                }
            }
            selected = selected.filter { keep.contains($0.name) }
            guard !selected.isEmpty else { throw XCTSkip("KC_DOC_EXAMPLES names no block of \(file)") }
        }
        if Self.environment == nil { Self.environment = try ExampleEnvironment() }
        let outcomes = ExampleRunner(environment: Self.environment!).run(selected)
        var ran = 0, marked = 0, failed = 0, skippedHere: [String] = []
        for outcome in outcomes {
            for failure in outcome.failures { XCTFail(failure) }
            failed += outcome.failures.count
            if let skipped = outcome.skipped {
                if skipped.hasPrefix("marked not run") { marked += 1 } else { skippedHere.append("\(outcome.block): \(skipped)") }
            } else {
                ran += 1
            }
        }
        print("\(file): \(ran) example blocks run, \(marked) marked not run, \(skippedHere.count) skipped here")
        for line in skippedHere { print("  skipped: \(line)") }
        // Where this machine lacks what a block needs, the test says so (it passed the rest).
        if failed == 0, !skippedHere.isEmpty {
            throw XCTSkip("\(ran) blocks ran and printed what \(file) shows; \(skippedHere.count) could not run here: \(skippedHere.joined(separator: "; "))")
        }
    }
}

/// The docs' markup and the files they name, read without running anything.
final class DocumentationTests: XCTestCase {
    func testEveryExampleBlockRunsOrSaysWhyNot() throws {
        let (blocks, errors) = try DocumentedExamples.load()
        for error in errors { XCTFail("\(error)") }
        XCTAssertGreaterThan(blocks.count, 40, "the docs' example blocks were not found")
        for file in DocumentedExamples.files {
            let inFile = blocks.filter { $0.file == file }
            let marked = inFile.filter { $0.notRunReason != nil }
            print("\(file): \(inFile.count) example blocks, \(inFile.count - marked.count) run, \(marked.count) marked not run:")
            for block in marked { print("  \(block.name): \(block.notRunReason ?? "")") }
        }
        for block in blocks where block.notRunReason == nil {
            XCTAssertFalse(block.steps.isEmpty, "\(block.name): no command")
            for step in block.steps where step.command.trimmingCharacters(in: .whitespaces).isEmpty {
                XCTFail("\(block.file):\(step.line): an empty command")
            }
        }
    }

    /// The pip command docs/INTEGRATIONS.md gives builds in the checkout; it must leave
    /// nothing there (setup.py sends setuptools' build/ and *.egg-info to a temporary folder).
    func testTheDocumentedPythonInstallLeavesNothingInTheCheckout() throws {
        guard (try? runCommand("/usr/bin/python3", ["-m", "pip", "--version"]))?.status == 0 else {
            throw XCTSkip("pip is not installed for /usr/bin/python3 (Debian's python3-pip)")
        }
        let checkout = DocumentedExamples.checkout
        let git = ["-C", checkout, "status", "--porcelain", "--ignored", "--untracked-files=all", "--", "Integrations/python"]
        guard let before = try? runCommand("/usr/bin/git", git), before.status == 0 else {
            throw XCTSkip("the checkout is not a git work tree (or git is missing)")
        }
        let target = "/tmp/kc-test-pipinstall-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: target) }
        let install = try ExampleEnvironment.runDocumentedPipCommand(target: target)
        XCTAssertEqual(install.status, 0, "\(install)")
        XCTAssertTrue(FileOps.exists(target + "/keyring_kc.py"), "the backend module was installed")
        let entryPoints = try FileManager.default.contentsOfDirectory(atPath: target)
            .filter { $0.hasSuffix(".dist-info") }
            .compactMap { try? String(contentsOfFile: target + "/" + $0 + "/entry_points.txt", encoding: .utf8) }
        XCTAssertTrue(entryPoints.contains { $0.contains("[keyring.backends]") && $0.contains("keyring_kc") },
                      "keyring finds the backend by its entry point: \(entryPoints)")
        let after = try runCommand("/usr/bin/git", git)
        XCTAssertEqual(after.output, before.output, "the install left files in the checkout (git status --ignored)")
    }

    /// Every file of the repository the README and docs/INTEGRATIONS.md name is in it (a
    /// script, a unit, a test), and every program they say setup.sh installs in
    /// /usr/local is one setup.sh installs.
    func testEveryFileTheDocsNameIsInTheRepository() throws {
        let checkout = DocumentedExamples.checkout
        let documents = DocumentedExamples.files + ["docs/EXAMPLES.md"]
        let setup = try String(contentsOfFile: checkout + "/Tools/setup.sh", encoding: .utf8)
        let testSources = try allText(under: checkout + "/Tests")
        let paths = try NSRegularExpression(pattern: #"(?<![\w./~-])(?:Tools|Integrations|PAM|Sources|Tests|docs|\.ci)/[\w.\-/]*[\w]"#)
        let installed = try NSRegularExpression(pattern: #"/usr/local/(?:bin|share|lib)/[\w.\-/]*[\w]"#)
        let units = try NSRegularExpression(pattern: #"(?<![\w$.-])[\w-][\w.-]*\.(?:service|timer|socket)\b(?!\()"#)
        let tests = try NSRegularExpression(pattern: #"\b[A-Z][A-Za-z]+Tests\b(?:\.(test\w+))?"#)
        for document in documents {
            let text = try String(contentsOfFile: checkout + "/" + document, encoding: .utf8)
            for path in matches(of: paths, in: text) where !FileOps.exists(checkout + "/" + path) {
                XCTFail("\(document) names \(path), which is not in the repository")
            }
            for path in matches(of: installed, in: text) {
                let name = URL(fileURLWithPath: path).lastPathComponent
                // The README builds git's libsecret helper with cc; `web` is an example unit's program.
                if !setup.contains(name), !["git-credential-libsecret", "web"].contains(name) {
                    XCTFail("\(document) names \(path), which Tools/setup.sh does not install")
                }
            }
            for unit in Set(matches(of: units, in: text)) {
                let shipped = FileOps.exists(checkout + "/Tools/systemd/" + unit) || FileOps.exists(checkout + "/Tools/secret-service/" + unit)
                // A unit the docs write out whole starts with a comment naming its path.
                let written = text.contains("/\(unit)\n[") || text.contains("/\(unit): ")
                let example = ["web.service", "db.service", "multi-user.target"].contains(unit)
                if !shipped, !written, !example {
                    XCTFail("\(document) names the unit \(unit), which is neither shipped in Tools/ nor written out in the docs")
                }
            }
            for name in Set(matches(of: tests, in: text)) {
                let parts = name.split(separator: ".")
                let isTarget = parts.count == 1 && FileOps.exists(checkout + "/Tests/" + parts[0])
                let known = isTarget || testSources.contains("class \(parts[0])") && (parts.count < 2 || testSources.contains("func \(parts[1])("))
                if !known { XCTFail("\(document) names the test \(name), which Tests/ does not have") }
            }
        }
    }

    // MARK: Helpers

    private func matches(of expression: NSRegularExpression, in text: String) -> [String] {
        expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range, in: text).map { String(text[$0]) }
        }
    }

    private func allText(under folder: String) throws -> String {
        var text = ""
        let enumerator = FileManager.default.enumerator(atPath: folder)
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix(".swift") { text += (try? String(contentsOfFile: folder + "/" + path, encoding: .utf8)) ?? "" }
        }
        return text
    }
}
