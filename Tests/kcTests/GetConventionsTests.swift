import Foundation
import KCTestSupport
import XCTest

/// `kc get` as password commands and people use it: `-q` for a silent miss, and a
/// newline after the value on a terminal only.
final class GetConventionsTests: KeyringTestCase {
    /// Every spelling of a quiet `kc get`, each through the fast path or the parser.
    private let quietSpellings: [(arguments: (String, String) -> [String], fast: Bool)] = [
        ({ ["get", "-q", $0, $1] }, true),
        ({ ["get", "--quiet", $0, $1] }, true),
        ({ ["get", $0, $1, "-q"] }, true),
        ({ ["get", "-q", "--", $0, $1] }, true),
        ({ ["get", $0, "--quiet", $1] }, true),
        ({ ["get", "-q", "--from", "\(getuid())", $0, $1] }, true),
        ({ ["get", "-q", "-q", $0, $1] }, false),
        ({ ["get", "-q", "--from=\(getuid())", $0, $1] }, false),
    ]

    func testQuietGetPrintsNothingForAMissingItemAndExits1() throws {
        let service = uniqueService()
        try kc("set", service, "token", input: Array("v".utf8))
        for spelling in quietSpellings {
            let arguments = spelling.arguments(service, "missing")
            let result = try kc(arguments)
            XCTAssertEqual(result.status, 1, "\(arguments): \(result)")
            XCTAssertEqual(result.standardError, "", "\(arguments): nothing on standard error")
            XCTAssertEqual(result.standardOutput, [], "\(arguments)")
        }
        // A missing service is not found too.
        let absent = try kc("get", "-q", service + ".absent", "token")
        XCTAssertEqual(absent.status, 1, "\(absent)")
        XCTAssertEqual(absent.standardError, "")
    }

    func testQuietGetWritesTheValueExactly() throws {
        let service = uniqueService()
        let value: [UInt8] = Array("pass word\n".utf8) + [0, 255]
        try kc("set", service, "token", input: value)
        for spelling in quietSpellings {
            let arguments = spelling.arguments(service, "token")
            let result = try kc(arguments)
            XCTAssertEqual(result.status, 0, "\(arguments): \(result)")
            XCTAssertEqual(result.standardOutput, value, "\(arguments)")
        }
        // A name that starts with '-' after '--'.
        try kc("set", "--", service, "-dash", input: Array("d".utf8))
        XCTAssertEqual(try kc("get", "-q", "--", service, "-dash").output, "d")
        XCTAssertEqual(try kc("get", "--", service, "-dash", "-q").status, 64, "after '--', -q is a third name")
    }

    func testQuietGetStillReportsOtherFailures() throws {
        let service = uniqueService()
        let badName = try kc("get", "-q", service, "a/b")
        XCTAssertEqual(badName.status, 64, "\(badName)")
        XCTAssertTrue(badName.standardError.hasPrefix("kc: invalid item name"), "\(badName)")
        let unknownUser = try kc("get", "-q", "--from", "kc-no-such-user", service, "token")
        XCTAssertNotEqual(unknownUser.status, 0, "\(unknownUser)")
        XCTAssertNotEqual(unknownUser.status, 1, "an unknown user is not a missing item: \(unknownUser)")
        XCTAssertTrue(unknownUser.standardError.hasPrefix("kc: "), "\(unknownUser)")
        let valued = try kc("get", "--quiet=yes", service, "token")
        XCTAssertEqual(valued.status, 64, "\(valued)")
    }

    func testHelpShowsQuiet() throws {
        let help = try kc("get", "--help")
        XCTAssertTrue(help.output.contains("-q, --quiet"), help.output)
    }

    /// gdb stops at ArgumentParser's parseAsRoot if a spelling reaches the parser.
    func testQuietSpellingsSkipTheArgumentParser() throws {
        guard programExists("gdb") else { throw XCTSkip("gdb is needed to see whether the parser runs") }
        let symbol = "$s14ArgumentParser15ParsableCommandPAAE11parseAsRootyAaB_pSaySSGSgKFZ"
        guard try runShell("nm '\(builtKC)' | grep -qF '\(symbol)'").status == 0 else {
            throw XCTSkip("the built kc has no parseAsRoot symbol (stripped)")
        }
        let probe = try runCommand("/usr/bin/env", ["gdb", "-q", "-batch", "-ex", "run", "--args", builtKC, "--version"])
        guard probe.output.contains("exited normally") else {
            throw XCTSkip("gdb cannot run kc here (ptrace refused?): \(probe)")
        }
        let service = uniqueService()
        try kc("set", service, "token", input: Array("v".utf8))
        let plain: [(arguments: [String], fast: Bool)] = [(["get", service, "token"], true), (["get", "--", service, "token"], true)]
        for (arguments, fast) in plain + quietSpellings.map({ ($0.arguments(service, "token"), $0.fast) }) {
            let result = try runCommand("/usr/bin/env", ["gdb", "-q", "-batch", "-ex", "break \(symbol)", "-ex", "run",
                                                         "-ex", "info breakpoints", "--args", builtKC] + arguments)
            XCTAssertEqual(result.status, 0, "\(result)")
            let parsed = result.output.contains("breakpoint already hit")
            XCTAssertEqual(parsed, !fast, "kc \(arguments.joined(separator: " ")) \(fast ? "skips" : "reaches") the parser: \(result.output)")
        }
    }

    // MARK: The newline on a terminal

    /// What `kc get` writes to a pseudo-terminal, the terminal's CR LF for LF turned off.
    private func getOnTerminal(_ service: String, _ key: String) throws -> CommandResult {
        try PseudoTerminal.run(builtKC, ["get", service, key], translateNewlines: false)
    }

    func testGetAddsANewlineOnATerminalOnlyWhenTheValueLacksOne() throws {
        guard programExists("python3") else { throw XCTSkip("python3 is needed to drive a pseudo-terminal") }
        let service = uniqueService()
        try kc("set", service, "bare", input: Array("hunter2".utf8))
        try kc("set", service, "ended", input: Array("line\n".utf8))
        let bare = try getOnTerminal(service, "bare")
        XCTAssertEqual(bare.status, 0, "\(bare)")
        XCTAssertEqual(bare.output, "hunter2\n", "one newline so the prompt starts on its own line")
        let ended = try getOnTerminal(service, "ended")
        XCTAssertEqual(ended.output, "line\n", "no second newline")
    }

    func testGetAddsNothingForAPipeOrAFile() throws {
        let service = uniqueService()
        try kc("set", service, "bare", input: Array("hunter2".utf8))
        XCTAssertEqual(try kc("get", service, "bare").standardOutput, Array("hunter2".utf8), "a pipe")
        let file = try runShell("f=$(mktemp) && '\(builtKC)' get '\(service)' bare > \"$f\" && od -An -c \"$f\" && rm -f \"$f\"")
        XCTAssertEqual(file.status, 0, "\(file)")
        XCTAssertEqual(file.output.split(whereSeparator: \.isWhitespace), ["h", "u", "n", "t", "e", "r", "2"], "a file: \(file)")
    }
}

/// `kc get -q` is silent only about a missing item: a vault that holds the item but is
/// locked still says to unlock it (exit 1, as without -q).
final class QuietGetVaultTests: VaultTestCase {
    func testQuietGetStillSaysTheVaultIsLocked() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "v").status, 0)
        XCTAssertEqual(try vault.lock().status, 0)
        let result = try vault.kc("get", "-q", service, "token")
        XCTAssertEqual(result.status, 1, "\(result)")
        XCTAssertTrue(result.standardError.contains("the vault holds it but is locked; run 'kc unlock'"), "\(result)")
        let missing = try vault.kc("get", "-q", service, "other")
        XCTAssertEqual(missing.status, 1, "\(missing)")
        XCTAssertEqual(missing.standardError, "")
    }
}
