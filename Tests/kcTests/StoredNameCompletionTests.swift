import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// Tab completes what is stored, as `pass show <Tab>` does: bash's own completion
/// function, from the script `kc --generate-completion-script bash` writes (the one
/// Tools/setup.sh installs), driven as bash drives it on a Tab.
final class StoredNameCompletionTests: KeyringTestCase {
    private var script = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard programExists("bash") else { throw XCTSkip("bash is not installed") }
        let generated = try kc("--generate-completion-script", "bash")
        XCTAssertEqual(generated.status, 0, "\(generated)")
        script = NSTemporaryDirectory() + "kc-completion-\(getpid()).bash"
        try Data(generated.standardOutput).write(to: URL(fileURLWithPath: script))
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: script)
        try super.tearDownWithError()
    }

    /// What bash offers for the command line `words` (the last one being completed,
    /// cursor at its end), one per element; and what was printed on standard error.
    private func complete(_ words: [String], environment: String = "") throws -> (offers: [String], errors: String) {
        let quoted = words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let result = try runCommand("/bin/bash", ["-c", """
            export \(environment) PATH='\((builtKC as NSString).deletingLastPathComponent)':/usr/bin:/bin
            source '\(script)'
            COMP_WORDS=(\(quoted)); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
            _kc kc "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """])
        XCTAssertEqual(result.status, 0, "\(result)")
        return (result.output.split(separator: "\n").map(String.init), result.standardError)
    }

    func testServicesAndThenItemsCompleteAfterEveryCommandThatNamesThem() throws {
        let tag = uniqueService()
        let first = "\(tag).app", second = "\(tag) with space"
        try kc("set", first, "token", input: Array("1".utf8))
        try kc("set", first, "user", input: Array("2".utf8))
        try kc("set", "--access", "after-first-unlock", second, "key", input: Array("3".utf8))
        servicesToRemove += [KeyName(first), KeyName(second)]

        for command in [["get"], ["set"], ["rm"], ["ls"], ["share"], ["exec", "--service"], ["get", "-q"], ["ls", "--long"]] {
            let offered = try complete(["kc"] + command + [tag])
            XCTAssertEqual(offered.offers.sorted(), [second, first].sorted(), "kc \(command.joined(separator: " ")) <Tab>")
            XCTAssertEqual(offered.errors, "")
        }
        for command in ["get", "set", "rm"] {
            let items = try complete(["kc", command, first, ""])
            XCTAssertEqual(items.offers, ["token", "user"], "kc \(command) SERVICE <Tab>")
            XCTAssertEqual(try complete(["kc", command, first, "u"]).offers, ["user"])
            XCTAssertEqual(try complete(["kc", command, second, ""]).offers, ["key"], "a name with a space is one word")
        }
        XCTAssertEqual(try complete(["kc", "get", "--quiet", first, "t"]).offers, ["token"])
    }

    /// Review finding: bash's script hands the names to `compgen -W`, which expands
    /// them: a stored name holding `$(…)` or a backtick ran as a command at a Tab.
    func testAStoredNameNeverRunsInTheShell() throws {
        let tag = uniqueService()
        let marker = NSTemporaryDirectory() + "kc-completion-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let hostile = ["\(tag)-$(touch \(marker))", "\(tag)-`touch \(marker)`", "\(tag)-${HOME}"]
        for name in hostile {
            try kc(["set", name, "item"], input: Array("1".utf8))
            servicesToRemove.append(KeyName(name))
        }
        XCTAssertEqual(try kc(["set", "\(tag)-plain", "$(touch kc-completion-marker)"], input: Array("1".utf8)).status, 0)
        servicesToRemove.append(KeyName("\(tag)-plain"))
        let services = try complete(["kc", "get", tag])
        XCTAssertEqual(services.offers, ["\(tag)-plain"], "names a shell would expand are not offered")
        XCTAssertEqual(try complete(["kc", "get", "\(tag)-plain", ""]).offers, [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "a stored name ran as a command")
    }

    func testNothingToCompleteIsQuiet() throws {
        let missing = try complete(["kc", "get", uniqueService(), ""])
        XCTAssertEqual(missing.offers, [])
        XCTAssertEqual(missing.errors, "", "no error printed into the command line")
        let none = try complete(["kc", "ls", "\(uniqueService())-none"])
        XCTAssertEqual(none.offers, [])
        XCTAssertEqual(none.errors, "")
    }

    func testALockedVaultCompletesWithoutErrors() throws {
        let vault = try VaultFixture()
        defer { vault.destroy() }
        try vault.create()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "kept", "1", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0)
        let environment = vault.environment.filter { $0.key != "PATH" }.map { "\($0.key)='\($0.value)'" }.sorted().joined(separator: " ")
        let offered = try complete(["kc", "get", service, ""], environment: environment)
        XCTAssertEqual(offered.errors, "")
        XCTAssertEqual(offered.offers, [], "a locked vault's items are not in the kernel to offer")
    }

    /// zsh and fish call the same `kc ---completion` entry for the same arguments.
    func testZshAndFishScriptsAskKcForStoredNames() throws {
        for shell in ["zsh", "fish"] {
            let generated = try kc("--generate-completion-script", shell)
            XCTAssertEqual(generated.status, 0)
            for call in ["---completion get -- positional@0", "---completion get -- positional@1", "---completion rm -- positional@1"] {
                XCTAssertTrue(generated.output.contains(call), "\(shell) calls kc \(call)")
            }
        }
        let service = uniqueService()
        try kc("set", service, "token", input: Array("1".utf8))
        let direct = try kc("---completion", "get", "--", "positional@1", "3", "0", "kc", "get", service, "")
        XCTAssertEqual(direct.status, 0, "\(direct)")
        XCTAssertEqual(direct.output, "token\n")
    }
}
