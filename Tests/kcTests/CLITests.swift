import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// The built `kc`, run as a process: exact bytes, exit codes and one-line errors.
final class CLITests: KeyringTestCase {
    /// Each `kc set` is a new process whose thread keyring does not reach the user
    /// keyring; an item it adds to an existing service there must still get kc's mask
    /// (the kernel gives a new key only "view" for its owner until kc sets it).
    func testItemsAddedToAnExistingServiceInTheUserKeyringGetTheOwnersMask() throws {
        let service = uniqueService()
        let result = try runCommand("/usr/bin/keyctl", ["session", "-", "/bin/sh", "-c", """
            printf one | "$KC" set --access after-first-unlock '\(service)' first
            printf two | "$KC" set --access after-first-unlock '\(service)' second
            ring=$(keyctl search @u keyring 'kc:\(service)')
            keyctl rdescribe $(keyctl search $ring user second)
            """], environment: ["KC": builtKC, "PATH": "/usr/bin:/bin"])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertTrue(result.output.hasPrefix("user;\(getuid());\(getgid());003f0000;second"), "\(result)")
    }

    func testOutputThatCannotBeWrittenIsAFailureNotASuccess() throws {
        let service = uniqueService()
        XCTAssertEqual(try kc(["set", service, "token"], input: Array("v".utf8)).status, 0)
        // A script must not take a cut-off listing for the whole: standard output closed,
        // or a full disk, is one line and exit 2, in the parsed and the plain spellings.
        let listings = [["ls"], ["ls", service], ["ls", "--long", service], ["ls", "--json"], ["ls", "--json", service],
                        ["doctor", "--json"]]
        for arguments in listings {
            let command = ([builtKC] + arguments).map { "'\($0)'" }.joined(separator: " ")
            for (redirect, reason) in [("> /dev/full", "No space left on device"), (">&-", "Bad file descriptor")] {
                let result = try runShell("\(command) \(redirect)")
                XCTAssertEqual(result.status, 2, "\(arguments) \(redirect): \(result)")
                XCTAssertEqual(result.standardError, "kc: cannot write to standard output: \(reason)\n", "\(arguments) \(redirect)")
            }
        }
        XCTAssertEqual(try kc("get", service, "token").output, "v", "nothing stored was harmed")
    }

    func testSetAndGetPassExactBytes() throws {
        let service = uniqueService()
        var values: [[UInt8]] = [Array("s3cret\n".utf8), [0, 1, 0, 255], Array("\n\n".utf8)]
        let largest = (0..<32767).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let largestFits = TestQuota.hasRoom(forValueOf: largest.count)
        if largestFits { values.append(largest) }
        for value in values {
            let set = try kc("set", service, "token", input: value)
            XCTAssertEqual(set.status, 0, "\(set)")
            XCTAssertEqual(set.standardOutput, [])
            let get = try kc("get", service, "token")
            XCTAssertEqual(get.status, 0, "\(get)")
            XCTAssertEqual(get.standardOutput, value, "\(value.count) bytes come back unchanged")
        }
        if !largestFits {
            // An ordinary user's whole quota (20,000 bytes) is smaller than the largest value.
            let set = try kc("set", service, "token", input: largest)
            XCTAssertEqual(set.status, 2, "\(set)")
            XCTAssertTrue(set.standardError.hasPrefix("kc: key quota exceeded"), set.standardError)
            XCTAssertTrue(set.standardError.contains("sudo sysctl -w kernel.keys.maxkeys="), set.standardError)
            XCTAssertEqual(try kc("get", service, "token").standardOutput, values.last, "the refused value harmed nothing")
        }
    }

    func testParsedAndFastGetAgree() throws {
        let service = uniqueService()
        try kc("set", service, "k", input: Array("v".utf8))
        XCTAssertEqual(try kc("get", "--", service, "k").output, "v", "the parsed path")
        XCTAssertEqual(try kc("get", service, "k").output, "v", "the unparsed fast path")
        XCTAssertEqual(try kc("get", service, "missing").status, 1)
        XCTAssertEqual(try kc("get", "--", service, "missing").status, 1)
        XCTAssertEqual(try kc("get", service, "a/b").status, 64)
        XCTAssertEqual(try kc("get", "--", service, "a/b").status, 64)
    }

    func testExitCodesAndOneLineErrors() throws {
        let service = uniqueService()
        try kc("set", service, "k", input: Array("v".utf8))
        let cases: [(args: [String], input: [UInt8], status: Int32, says: String)] = [
            (["get", service, "nope"], [], 1, "no item 'nope'"),
            (["rm", service, "nope"], [], 1, "no item 'nope'"),
            (["ls", service + ".absent"], [], 1, "no service"),
            (["set", service, "big"], [UInt8](repeating: 7, count: 32768), 2, "larger than 32767 bytes"),
            (["set", service, "a/b"], Array("v".utf8), 64, "contains '/'"),
            (["set", service, ".."], Array("v".utf8), 64, "cannot be '..'"),
            (["set", "", "k"], Array("v".utf8), 64, "invalid service name: it is empty"),
            (["set", String(repeating: "s", count: 256), "k"], Array("v".utf8), 64, "is 256 bytes long"),
            (["set", "--access", "sometimes", service, "k"], Array("v".utf8), 64, "'sometimes' is invalid for '--access"),
            (["set", "--timeout", "5x", service, "k"], Array("v".utf8), 64, "--timeout must be a positive duration"),
            (["set", "--timeout", "0", service, "k"], Array("v".utf8), 64, "not '0'"),
            (["get", service], [], 64, "kc: missing expected argument '<key>'; see 'kc help get'"),
            (["frobnicate"], [], 64, "kc: unknown command 'frobnicate'; see 'kc --help' for the commands"),
        ]
        for testCase in cases {
            let result = try kc(testCase.args, input: testCase.input)
            XCTAssertEqual(result.status, testCase.status, "\(testCase.args.prefix(3)): \(result)")
            XCTAssertTrue(result.standardError.hasPrefix("kc: "), "\(testCase.args.prefix(3)): \(result)")
            XCTAssertEqual(result.standardError.filter { $0 == "\n" }.count, 1, "one line: \(result)")
            XCTAssertTrue(result.standardError.contains(testCase.says), "\(testCase.args.prefix(3)): \(result)")
        }
        XCTAssertEqual(try kc("get", service, "k").output, "v", "nothing stored was harmed")
        XCTAssertEqual(try kc("ls", service).output, "k\n")
    }

    func testANegativeOrBadTimeoutIsRefusedAsOneAndNotAsAMissingValue() throws {
        let service = uniqueService()
        try kc("set", service, "k", input: Array("kept".utf8))
        let refusal = { (text: String) in
            "kc: --timeout must be a positive duration such as 90s, 15m, 2h, 7d or 1h30m (at most 136 years), or 'none'; not '\(text)'; see 'kc help set'\n"
        }
        let cases: [(arguments: [String], shown: String)] = [
            (["set", "--timeout", "-5", service, "k"], "-5"),
            (["set", "--timeout=-5", service, "k"], "-5"),
            (["set", service, "k", "--timeout", "-5"], "-5"),
            (["set", "--timeout", "-1h", "--access", "always", service, "k"], "-1h"),
            (["set", "--timeout", "--access", service, "k"], "--access"),
            (["set", "--timeout", "0", service, "k"], "0"),
            (["set", "--timeout", "5x", service, "k"], "5x"),
            (["set", "--timeout", "4294967296", service, "k"], "4294967296"),
        ]
        for (arguments, shown) in cases {
            let result = try kc(arguments, input: Array("new".utf8))
            XCTAssertEqual(result.status, 64, "\(arguments): \(result)")
            XCTAssertEqual(result.standardError, refusal(shown), "\(arguments)")
            XCTAssertEqual(try kc("get", service, "k").output, "kept", "\(arguments) stored nothing")
        }
        let missing = try kc(["set", service, "k", "--timeout"], input: Array("new".utf8))
        XCTAssertEqual(missing.status, 64, "\(missing)")
        XCTAssertTrue(missing.standardError.hasPrefix("kc: missing value for '--timeout <duration>'"), "a value really missing: \(missing)")
        XCTAssertEqual(try kc("get", service, "k").output, "kept")
    }

    func testAValueLargerThanAnItemCanHoldSaysSoWithoutReadingItAll() throws {
        let service = uniqueService()
        try kc("set", service, "k", input: Array("kept".utf8))
        let tooLarge = "kc: the value on standard input is larger than 32767 bytes, the most an item can hold; store a smaller value (or a path to a file)\n"
        // 100 MB through a pipe: kc stops reading after 32768 bytes and exits, so the
        // writer dies of SIGPIPE (141) instead of finishing; nothing is stored.
        for arguments in [["set", service, "k"], ["set", "--", service, "k"], ["set", "--access", "always", service, "k"]] {
            let command = ([builtKC] + arguments).map { "'\($0)'" }.joined(separator: " ")
            let result = try runCommand("/bin/bash", ["-c", "env --default-signal=PIPE head -c 100000000 /dev/zero 2>/dev/null | \(command); echo \"$? ${PIPESTATUS[0]}\""])
            XCTAssertEqual(result.output, "2 141\n", "\(arguments): \(result)")
            XCTAssertEqual(result.standardError, tooLarge, "\(arguments)")
            XCTAssertEqual(try kc("get", service, "k").output, "kept", "\(arguments) stored nothing")
        }
        // One byte over is refused the same way; the limit itself is stored.
        let over = try kc(["set", service, "k"], input: [UInt8](repeating: 0x61, count: 32768))
        XCTAssertEqual(over.status, 2, "\(over)")
        XCTAssertEqual(over.standardError, tooLarge)
        XCTAssertEqual(try kc("get", service, "k").output, "kept")
        // (An ordinary user's whole quota, 20,000 bytes, is less than the limit.)
        if TestQuota.hasRoom(forValueOf: 32767) {
            XCTAssertEqual(try kc(["set", service, "k"], input: [UInt8](repeating: 0x61, count: 32767)).status, 0)
            XCTAssertEqual(try kc("get", service, "k").standardOutput.count, 32767)
        }

        // podman's secret driver reads its value the same way.
        let podman = try runCommand("/bin/bash", ["-c", "env --default-signal=PIPE head -c 100000000 /dev/zero 2>/dev/null | SECRET_ID=big '\(builtKC)' podman-driver --service '\(service)' store; echo \"$? ${PIPESTATUS[0]}\""])
        XCTAssertEqual(podman.output, "2 141\n", "\(podman)")
        XCTAssertEqual(podman.standardError,
                       "kc: the secret on standard input is larger than 32767 bytes, the most an item can hold; store a smaller value (or a path to a file)\n")
        XCTAssertNil(try Keychain(service: service).data(forKey: "big"))

        // An import reads at most 64 MiB and one byte, and then imports nothing.
        let archive = try runCommand("/bin/bash", ["-c", "env --default-signal=PIPE head -c 100000000 /dev/zero 2>/dev/null | '\(builtKC)' import; echo \"$? ${PIPESTATUS[0]}\""])
        XCTAssertEqual(archive.output, "2 141\n", "\(archive)")
        XCTAssertEqual(archive.standardError,
                       "kc: nothing imported: the input is larger than 64 MiB (67108864 bytes), the most kc import reads; is it the right file?\n")
    }

    func testAccessTimeoutAndDeviceOnlyShowInLongListing() throws {
        let service = uniqueService()
        try kc("set", "--access", "after-first-unlock", "--this-device-only", service, "local", input: [1])
        try kc("set", "--access", "always", "--timeout", "1h30m", service, "brief", input: [2, 3])
        try kc("set", service, "plain", input: [4, 5, 6])
        let lines = try kc("ls", "--long", service).output.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        XCTAssertEqual(lines.map { $0[0] }, ["brief", "local", "plain"])
        XCTAssertEqual(lines.map { $0[1] }, ["always", "after-first-unlock+this-device-only", "when-unlocked"])
        XCTAssertEqual(lines.map { $0[2] }, ["2", "1", "3"])
        XCTAssertEqual(lines[0][3], "1h", "time left, as coarse as /proc/keys")
        XCTAssertEqual(lines[1][3], "-")
    }

    func testControlBytesInNamesCannotSplitColumnsOrLinesButPipesAndJSONStayExact() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        // In byte order, as kc lists them.
        let names = ["back\\slash", "esc\u{1b}[31m", "new\nline", "plain", "space name", "tab\tname"]
        for name in names { try keychain.set("v", forKey: name) }
        let escaped = ["back\\x5cslash", "esc\\x1b[31m", "new\\x0aline", "plain", "space name", "tab\\x09name"]

        // --long: one line per item, five tab-separated columns, the name escaped as the audit does.
        let long = try kc("ls", "--long", service)
        XCTAssertEqual(long.status, 0, "\(long)")
        let rows = long.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
        XCTAssertEqual(rows.count, names.count, "\(long)")
        XCTAssertTrue(rows.allSatisfy { $0.count == 5 }, "\(long)")
        XCTAssertEqual(rows.map { String($0[0]) }, escaped)

        // Plain output into a pipe is exact, as scripts read it (both spellings: fast and parsed).
        for arguments in [["ls", service], ["ls", "--", service]] {
            XCTAssertEqual(try kc(arguments).output, names.joined(separator: "\n") + "\n", "\(arguments)")
        }
        // --json is exact.
        let json = try JSONSerialization.jsonObject(with: Data(try kc("ls", "--json", service).standardOutput)) as? [String: Any]
        XCTAssertEqual((json?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String }, names)

        // At a terminal, plain output is escaped too: the escape sequence never reaches it.
        for arguments in [["ls", service], ["ls", "--", service]] {
            let terminal = try PseudoTerminal.run(builtKC, arguments, translateNewlines: false)
            XCTAssertEqual(terminal.status, 0, "\(terminal)")
            XCTAssertEqual(terminal.output, escaped.joined(separator: "\n") + "\n", "\(arguments)")
        }
        let services = try PseudoTerminal.run(builtKC, ["ls"], translateNewlines: false)
        XCTAssertTrue(services.output.split(separator: "\n").contains(Substring(service)), "\(services)")
        let odd = uniqueService() + "\u{1b}]0;title\u{07}"
        servicesToRemove.append(KeyName(odd))
        try Keychain(service: odd).set("v", forKey: "k")
        let withOdd = try PseudoTerminal.run(builtKC, ["ls"], translateNewlines: false)
        XCTAssertFalse(withOdd.output.contains("\u{1b}"), "\(withOdd)")
        XCTAssertTrue(withOdd.output.contains("\\x1b]0;title\\x07\n"), "\(withOdd)")
        XCTAssertTrue(try kc("ls").output.contains(odd + "\n"), "a pipe gets the name exactly")

        // kc import --dry-run's listing escapes as --long does.
        let archive = try runShell("'\(builtKC)' export --service '\(service)' | '\(builtKC)' import --dry-run")
        XCTAssertEqual(archive.output, escaped.map { "keep\t\(service)/\($0)\n" }.joined(), "\(archive)")
    }

    func testJSONListings() throws {
        let service = uniqueService()
        try kc("set", "--timeout", "10m", service, "token", input: Array("abc".utf8))
        let services = try JSONSerialization.jsonObject(with: Data(try kc("ls", "--json").standardOutput)) as? [String: Any]
        XCTAssertTrue((services?["services"] as? [String])?.contains(service) ?? false)

        let listing = try JSONSerialization.jsonObject(with: Data(try kc("ls", "--json", service).standardOutput)) as? [String: Any]
        XCTAssertEqual(listing?["service"] as? String, service)
        let item = try XCTUnwrap((listing?["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(item["name"] as? String, "token")
        XCTAssertEqual(item["access"] as? String, "when-unlocked")
        XCTAssertEqual(item["thisDeviceOnly"] as? Bool, false)
        XCTAssertEqual(item["size"] as? Int, 3)
        let secondsLeft = try XCTUnwrap(item["secondsLeft"] as? Int)
        XCTAssertTrue((540...600).contains(secondsLeft), "10m or 9m, as coarse as /proc/keys: \(secondsLeft)")
        XCTAssertNotNil(item["serial"] as? Int)
    }

    func testRemove() throws {
        let service = uniqueService()
        try kc("set", service, "k", input: [1])
        XCTAssertEqual(try kc("rm", service, "k").status, 0)
        XCTAssertEqual(try kc("get", service, "k").status, 1)
    }

    func testDoctorReportsKeyringsQuotaAndFuse() throws {
        let result = try kc("doctor")
        let names = result.output.split(separator: "\n").compactMap { $0.split(separator: ":").first?.dropFirst(5) }.map(String.init)
        XCTAssertEqual(names, ["session keyring", "user keyring", "persistent keyring", "key quota", "/dev/fuse", "fusermount3", "kc-mountd", "secret service"], result.output)
        XCTAssertTrue(result.output.contains("uid \(getuid()): "), result.output)
        let json = try JSONSerialization.jsonObject(with: Data(try kc("doctor", "--json").standardOutput)) as? [String: Any]
        XCTAssertEqual((json?["checks"] as? [[String: Any]])?.count, 8)
    }

    func testHelpAndVersion() throws {
        let help = try kc("--help")
        XCTAssertEqual(help.status, 0)
        for command in ["set", "get", "rm", "ls", "mount", "umount", "doctor"] { XCTAssertTrue(help.output.contains(command), command) }
        XCTAssertTrue(try kc("set", "--help").output.contains("standard input"))
        XCTAssertEqual(try kc("--version").status, 0)
    }
}

/// Completions generated from the argument parser.
final class CompletionTests: XCTestCase {
    func testCompletionScriptsForBashZshAndFish() throws {
        for shell in ["bash", "zsh", "fish"] {
            let script = try kc("--generate-completion-script", shell)
            XCTAssertEqual(script.status, 0, shell)
            for command in ["set", "get", "mount", "exec", "export", "import", "podman-driver"] {
                XCTAssertTrue(script.output.contains(command), "\(shell) completes \(command)")
            }
        }
        let bash = try runCommand("/bin/bash", ["-c", "source <('\(builtKC)' --generate-completion-script bash) && complete -p kc"])
        XCTAssertEqual(bash.status, 0, "\(bash)")
        XCTAssertTrue(bash.output.contains("kc"), bash.output)
    }
}
