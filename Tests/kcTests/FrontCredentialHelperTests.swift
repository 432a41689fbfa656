import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// kc's front answers the credential helpers' `get` (Front/CredentialHelpers.swift,
/// docs/FRONT.md "The credential helpers") where the answer is certain, and hands the
/// rest to the full kc with the input it read as standard input. These tests run each
/// helper as installed (a link named like the helper) to the front and to the full kc on
/// the same input and environment, and assert the same standard output, standard error,
/// exit status and keychain state (FrontTests' method). Which path the front took is
/// seen with a link to a copy of the front that has no `kc-full` beside it.
final class FrontCredentialHelperTests: KeyringTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = try helperFolders(for: self)
    }

    /// This process's environment with no vault where the full kc would look for one.
    private func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { $0.key != "KC_AUDIT" }
        environment["XDG_DATA_HOME"] = folder + "/no-vault"
        return environment.merging(extra) { $1 }
    }

    /// A unique host, whose git and docker services the test removes at its end.
    private func uniqueHost(_ label: String = #function) -> String {
        let host = uniqueService(label)
        for service in ["git:https:" + host, "git:https:" + host + "%2Fteam%2Frepo.git", "docker:" + host] {
            servicesToRemove.append(KeyName(service))
        }
        return host
    }

    /// Runs `helper get` through `which` folder's link (after `prefix`: bash's `exec`, or a
    /// wrapper that execs its arguments; then `redirections`).
    private func run(_ which: String, _ helper: String, _ arguments: [String], input: [UInt8], environment: [String: String],
                     prefix: String = "exec", redirections: String) throws -> CommandResult {
        let script = "\(prefix) \"$0\" \(arguments.joined(separator: " ")) \(redirections)"
        return try runCommand("/bin/bash", ["-c", script, folder + "/" + which + "/" + helper], input: input, environment: environment)
    }

    /// Runs the helper's `get` through the front and the full kc, asserts the path the
    /// front took and that both printed, exited and left the keychain alike, and returns
    /// the front's run.
    @discardableResult
    private func assertSame(_ helper: String, _ input: [UInt8], served expected: Bool, arguments: [String] = ["get"],
                            environment: [String: String]? = nil, prefix: String = "exec", redirections: String = "", services: [String],
                            file: StaticString = #filePath, line: UInt = #line) throws -> CommandResult {
        let environment = environment ?? self.environment()
        let shown = "\(helper) \(arguments.joined(separator: " ")) < \(String(decoding: input.prefix(80), as: UTF8.self).debugDescription)"
        let state = { try services.map { try HelperState($0) } }
        let alone = try run("alone", helper, arguments, input: input, environment: environment, prefix: prefix, redirections: redirections)
        XCTAssertEqual(!alone.standardError.contains("kc: cannot run the full kc, "), expected,
                       "\(shown) should be \(expected ? "served by the front" : "handed to the full kc"): \(alone)", file: file, line: line)
        let front = try run("front", helper, arguments, input: input, environment: environment, prefix: prefix, redirections: redirections)
        let frontState = try state()
        let full = try run("full", helper, arguments, input: input, environment: environment, prefix: prefix, redirections: redirections)
        let fullState = try state()
        XCTAssertEqual(front.status, full.status, "exit status of \(shown): \(front) vs \(full)", file: file, line: line)
        XCTAssertEqual(front.standardOutput, full.standardOutput, "standard output of \(shown): \(front) vs \(full)", file: file, line: line)
        XCTAssertEqual(front.standardError, full.standardError, "standard error of \(shown)", file: file, line: line)
        XCTAssertEqual(frontState, fullState, "keychain after \(shown)", file: file, line: line)
        return front
    }

    private func git(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Stores through the full kc's helper, as git and docker do.
    private func store(_ helper: String, _ input: String, arguments: [String] = ["store"]) throws {
        let stored = try runCommand(folder + "/full/" + helper, arguments, input: Array(input.utf8), environment: environment())
        XCTAssertEqual(stored.status, 0, "\(helper) store: \(stored)")
    }

    // MARK: git-credential-kc get

    func testGitGetOfAStoredPasswordIsServedExactly() throws {
        let host = uniqueHost()
        let services = ["git:https:" + host]
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=alice\npassword=pw 1=2\n\n")
        for input in ["protocol=https\nhost=\(host)\n\n",  // the only user
                      "protocol=https\nhost=\(host)\nusername=alice\n\n",
                      "protocol=https\r\nhost=\(host)\r\n\r\n",
                      "capability[]=authtype\ncapability[]=state\nprotocol=https\nhost=\(host)\nwwwauth[]=Basic realm=x\n\n",
                      "protocol=https\nhost=\(host)\n\nafter the empty line: not read\n",
                      "protocol=https\nhost=\(host)"] {  // no empty line: the end of the input
            let result = try assertSame("git-credential-kc", git(input), served: true, services: services)
            XCTAssertEqual(result.status, 0, "\(result)")
            XCTAssertEqual(result.output, "username=alice\npassword=pw 1=2\n", "\(input.debugDescription)")
        }
        // git passes the helper's own arguments first: `credential.helper = kc --access always`.
        let withLevel = try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\n\n"), served: true,
                                       arguments: ["--access", "always", "get"], services: services)
        XCTAssertEqual(withLevel.output, "username=alice\npassword=pw 1=2\n")
        // KC_AUDIT audits `kc get`, not the helpers: the same either way.
        try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\n\n"), served: true,
                       environment: environment(["KC_AUDIT": "1"]), services: services)
    }

    func testGitGetWithAPathAndARefreshTokenIsServed() throws {
        let host = uniqueHost()
        let services = ["git:https:" + host + "%2Fteam%2Frepo.git"]
        try store("git-credential-kc", "protocol=https\nhost=\(host)\npath=team/repo.git\nusername=a/b%c\npassword=p\noauth_refresh_token=r\n\n")
        let result = try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\npath=team/repo.git\n\n"), served: true,
                                    services: services)
        XCTAssertEqual(result.output, "username=a/b%c\npassword=p\noauth_refresh_token=r\n")
    }

    func testGitGetWithNothingStoredIsServedAsNoAnswer() throws {
        let host = uniqueHost()
        let services = ["git:https:" + host]
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=alice\npassword=p\n\n")
        for input in ["protocol=https\nhost=nothing-\(host)\n\n",  // no such service
                      "protocol=https\nhost=\(host)\nusername=bob\n\n",  // no such user
                      "host=\(host)\n\n", "protocol=https\n\n", "protocol=https\nhost=a/b\n\n", "",
                      "protocol=https\nhost=\(String(repeating: "h", count: 300))\n\n"] {
            let result = try assertSame("git-credential-kc", git(input), served: true, services: services)
            XCTAssertEqual(result.status, 0, "\(result)")
            XCTAssertEqual(result.output, "", "\(input.debugDescription)")
        }
    }

    func testGitGetOfNamesThatAreNotUTF8IsServedByteForByte() throws {
        let host = uniqueHost()
        let hostBytes = Array(host.utf8) + [0xff, 0xfe]
        servicesToRemove.append(KeyName(bytes: Array("git:https:".utf8) + hostBytes))
        let stored = try runCommand(folder + "/full/git-credential-kc", ["store"],
                                    input: git("protocol=https\nhost=") + hostBytes + git("\nusername=\u{e9}\npassword=") + [0x80, 0x41] + git("\n\n"),
                                    environment: environment())
        XCTAssertEqual(stored.status, 0, "\(stored)")
        let result = try assertSame("git-credential-kc", git("protocol=https\nhost=") + hostBytes + git("\n\n"), served: true, services: [])
        XCTAssertEqual(result.standardOutput, git("username=\u{e9}\npassword=") + [0x80, 0x41, 0x0a])
    }

    func testGitGetThatTheFrontCannotBeSureOfIsHandedOverWithTheSameInput() throws {
        let host = uniqueHost(), other = uniqueHost()
        let services = ["git:https:" + host, "git:https:" + other]
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=alice\npassword=p\n\n")
        for input in ["url=https://alice@\(host)\n\n",  // url=: the full kc's parser
                      "protocol=https\nhost=\(host)\npassword=typed\n\n",
                      "protocol=https\nhost=\(host)\npassword_expiry_utc=soon\n\n",
                      "protocol=https\nhost=\(host)\nnot key value\n\n",  // malformed: the full kc's message
                      "protocol=https\nhost=\(host)\nusername=a\u{0}b\n\n"] {  // a NUL
            try assertSame("git-credential-kc", git(input), served: false, services: services)
        }
        // Two users: the one stored last is the full kc's to read.
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=bob\npassword=q\n\n")
        let latest = try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\n\n"), served: false, services: services)
        XCTAssertEqual(latest.output, "username=bob\npassword=q\n")
        // A password with an expiry: the full kc shows the deadline.
        let expiry = Int(Date().timeIntervalSince1970) + 3600
        try store("git-credential-kc", "protocol=https\nhost=\(other)\nusername=carol\npassword=t\npassword_expiry_utc=\(expiry)\n\n")
        let timed = try assertSame("git-credential-kc", git("protocol=https\nhost=\(other)\n\n"), served: false, services: services)
        XCTAssertEqual(timed.output, "username=carol\npassword=t\npassword_expiry_utc=\(expiry)\n")
        // At another level than home: the full kc's.
        let afar = uniqueHost()
        try store("git-credential-kc", "protocol=https\nhost=\(afar)\nusername=dave\npassword=u\n\n", arguments: ["--access", "after-first-unlock", "store"])
        let found = try assertSame("git-credential-kc", git("protocol=https\nhost=\(afar)\n\n"), served: false, services: ["git:https:" + afar])
        XCTAssertEqual(found.output, "username=dave\npassword=u\n")
        // Another action, or another command line: untouched.
        try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\n\n"), served: false, arguments: ["erase"], services: services)
        try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\n\n"), served: false, arguments: ["--access", "never", "get"],
                       services: services)
        try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\n\n"), served: false, arguments: ["get", "extra"],
                       services: services)
    }

    /// git's input ends at the empty line: what the caller writes after it is left for
    /// the next reader, by the front as by the full kc, served or handed over.
    func testWhatFollowsTheEmptyLineIsLeftUnreadOnBothPaths() throws {
        let host = uniqueHost()
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=alice\npassword=p\n\n")
        for (first, served) in [("protocol=https\nhost=\(host)\n\n", true), ("protocol=https\nnot key value\n\n", false)] {
            // The rest comes later, as a second write: the helper's read has returned by then.
            let script = "{ printf '%s' \"$1\"; sleep 0.5; printf 'the rest\\n'; } | { \"$0\" get; echo \"status $?\"; cat; }"
            var results: [String: CommandResult] = [:]
            for which in ["alone", "front", "full"] {
                results[which] = try runCommand("/bin/bash", ["-c", script, folder + "/" + which + "/git-credential-kc", first],
                                                environment: environment())
            }
            guard let alone = results["alone"], let front = results["front"], let full = results["full"] else { return }
            XCTAssertEqual(!alone.standardError.contains("kc: cannot run the full kc, "), served, "\(first.debugDescription): \(alone)")
            XCTAssertEqual(front.output, full.output, "\(first.debugDescription)")
            XCTAssertEqual(front.standardError, full.standardError, "\(first.debugDescription)")
            XCTAssertTrue(front.output.hasSuffix("the rest\n"), "\(front)")
        }
    }

    func testGitInputOverTheLimitIsTheFullKcsWithTheBytesTheFrontRead() throws {
        let host = uniqueHost()
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=alice\npassword=p\n\n")
        let long = git("protocol=https\nhost=\(host)\n") + git("x=" + String(repeating: "y", count: 70_000) + "\n\n")
        let result = try assertSame("git-credential-kc", long, served: false, services: ["git:https:" + host])
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(result.standardError, "kc: git-credential-kc: the input is over 65536 bytes; git sends a few key=value lines\n")
        // Exactly at the limit, ended by the empty line: read whole, and served.
        let header = git("protocol=https\nhost=\(host)\nx=")
        let atLimit = header + Array(repeating: UInt8(ascii: "y"), count: 65536 - header.count - 2) + git("\n\n")
        XCTAssertEqual(atLimit.count, 65536)
        let served = try assertSame("git-credential-kc", atLimit, served: true, services: ["git:https:" + host])
        XCTAssertEqual(served.output, "username=alice\npassword=p\n")
    }

    func testGitOutputOrInputThatCannotBeUsedIsReportedAsTheFullKcReportsIt() throws {
        let host = uniqueHost()
        let services = ["git:https:" + host]
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=alice\npassword=p\n\n")
        let closedOutput = try assertSame("git-credential-kc", git("protocol=https\nhost=\(host)\n\n"), served: true,
                                          redirections: ">&-", services: services)
        XCTAssertEqual(closedOutput.status, 2, "\(closedOutput)")
        XCTAssertEqual(closedOutput.standardError, "kc: git-credential-kc: cannot write to standard output\n")
        let closedInput = try assertSame("git-credential-kc", [], served: true, redirections: "<&-", services: services)
        XCTAssertEqual(closedInput.status, 2, "\(closedInput)")
        XCTAssertEqual(closedInput.standardError, "kc: git-credential-kc: cannot read standard input: Bad file descriptor\n")
        let directory = try assertSame("git-credential-kc", [], served: true, redirections: "< /", services: services)
        XCTAssertEqual(directory.standardError, "kc: git-credential-kc: cannot read standard input: Is a directory\n")
    }

    // MARK: docker-credential-kc get

    func testDockerGetOfAStoredCredentialIsServedExactly() throws {
        let host = uniqueHost()
        let services = ["docker:" + host]
        try store("docker-credential-kc", #"{"ServerURL":"\#(host)","Username":"bob","Secret":"s\"e\\c\u0001r\tet é"}"#)
        for input in [host, host + "\n", "  \(host) \n\t"] {
            let result = try assertSame("docker-credential-kc", git(input), served: true, services: services)
            XCTAssertEqual(result.status, 0, "\(result)")
            XCTAssertEqual(result.output, #"{"ServerURL":"\#(host)","Username":"bob","Secret":"s\"e\\c\u0001r\tet é"}"# + "\n")
        }
        try assertSame("docker-credential-kc", git(host), served: true, environment: environment(["KC_AUDIT": "1"]), services: services)
        let closedOutput = try assertSame("docker-credential-kc", git(host), served: true, redirections: ">&-", services: services)
        XCTAssertEqual(closedOutput.status, 1, "\(closedOutput)")
    }

    func testDockerGetOfAnUnknownServerIsServedAsNotFound() throws {
        let host = uniqueHost()
        let result = try assertSame("docker-credential-kc", git(host), served: true, services: ["docker:" + host])
        XCTAssertEqual(result.status, 1, "\(result)")
        XCTAssertEqual(result.output, "credentials not found in native keychain\n")
        // A service whose only item this helper did not make.
        try Keychain(service: "docker:" + host).set("v", forKey: "100%")
        let foreign = try assertSame("docker-credential-kc", git(host), served: true, services: ["docker:" + host])
        XCTAssertEqual(foreign.output, "credentials not found in native keychain\n")
    }

    func testDockerGetThatTheFrontCannotBeSureOfIsHandedOver() throws {
        let host = uniqueHost()
        let services = ["docker:" + host]
        for input in ["", " \n "] {  // no server: the full kc's message
            let result = try assertSame("docker-credential-kc", git(input), served: false, services: services)
            XCTAssertEqual(result.output, "no credentials server URL\n")
        }
        // A secret that is not UTF-8 (stored with kc set): the full kc's message.
        try Keychain(service: "docker:" + host).set([0xff, 0x41], forKey: "bob")
        let binary = try assertSame("docker-credential-kc", git(host), served: false, services: services)
        XCTAssertEqual(binary.status, 1, "\(binary)")
        // At another level than home.
        let afar = uniqueHost()
        try Keychain(service: "docker:" + afar, accessibility: .afterFirstUnlock).set("s", forKey: "carol")
        let found = try assertSame("docker-credential-kc", git(afar), served: false, services: ["docker:" + afar])
        XCTAssertEqual(found.output, #"{"ServerURL":"\#(afar)","Username":"carol","Secret":"s"}"# + "\n")
        // Over the limit: the full kc's message, from the bytes the front read.
        let long = try assertSame("docker-credential-kc", Array(repeating: UInt8(ascii: "h"), count: 262_145), served: false, services: services)
        XCTAssertEqual(long.output, "kc: the input is over 262144 bytes; a credential is much shorter\n")
        // Other actions and command lines: untouched.
        try assertSame("docker-credential-kc", git(host), served: false, arguments: ["list"], services: services)
        try assertSame("docker-credential-kc", git(host), served: false, arguments: ["get", "more"], services: services)
    }

    func testAReaderThatHasGoneEndsBothHelpersAlike() throws {
        guard programExists("python3") else { throw XCTSkip("python3 is needed to make a pipe without a reader") }
        let host = uniqueHost()
        try store("git-credential-kc", "protocol=https\nhost=\(host)\nusername=alice\npassword=p\n\n")
        try store("docker-credential-kc", #"{"ServerURL":"\#(host)","Username":"bob","Secret":"s"}"#)
        // A pipe whose read end is closed, SIGPIPE at its default action (python ignores it).
        let noReader = "exec python3 -c 'import os, signal, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
            + "signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])'"
        for (helper, input) in [("git-credential-kc", "protocol=https\nhost=\(host)\n\n"), ("docker-credential-kc", host),
                                ("docker-credential-kc", "nothing-" + host)] {
            let result = try assertSame(helper, git(input), served: true, prefix: noReader, services: ["git:https:" + host, "docker:" + host])
            XCTAssertNotEqual(result.status, 0, "\(helper) < \(input): \(result)")
        }
    }

    func testDockerInputThatCannotBeReadIsReportedAsTheFullKcReportsIt() throws {
        let closed = try assertSame("docker-credential-kc", [], served: true, redirections: "<&-", services: [])
        XCTAssertEqual(closed.status, 1, "\(closed)")
        XCTAssertEqual(closed.output, "kc: cannot read standard input: Bad file descriptor\n")
    }
}

/// With a vault, a miss or a listing may load from it: the helpers are the full kc's,
/// untouched, whatever the vault's state.
final class FrontCredentialHelperVaultTests: VaultTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = try helperFolders(for: self)
    }

    func testWithAVaultTheHelpersGetIsTheFullKcs() throws {
        let vault = try makeVault()
        let host = uniqueService()
        servicesToRemove.append(KeyName("git:https:" + host))
        servicesToRemove.append(KeyName("docker:" + host))
        XCTAssertEqual(try vault.set("git:https:" + host, "alice", "p").status, 0)
        XCTAssertEqual(try vault.set("docker:" + host, "bob", "s").status, 0)
        XCTAssertEqual(try vault.unlock().result.status, 0)
        for (helper, input, answer) in [("git-credential-kc", "protocol=https\nhost=\(host)\n\n", "username=alice\npassword=p\n"),
                                        ("docker-credential-kc", host, #"{"ServerURL":"\#(host)","Username":"bob","Secret":"s"}"# + "\n")] {
            let alone = try runCommand(folder + "/alone/" + helper, ["get"], input: Array(input.utf8), environment: vault.environment)
            XCTAssertTrue(alone.standardError.contains("kc: cannot run the full kc, "), "\(helper) with a vault should be handed over: \(alone)")
            let front = try runCommand(folder + "/front/" + helper, ["get"], input: Array(input.utf8), environment: vault.environment)
            let full = try runCommand(folder + "/full/" + helper, ["get"], input: Array(input.utf8), environment: vault.environment)
            XCTAssertEqual(front.output, answer, "\(front)")
            XCTAssertEqual(front.status, full.status)
            XCTAssertEqual(front.standardOutput, full.standardOutput)
            XCTAssertEqual(front.standardError, full.standardError)
        }
    }
}

/// What a service holds, as the library sees it: items, levels, values, keyring masks.
private struct HelperState: Equatable {
    var items: [String]
    var values: [[UInt8]?]
    var masks: [UInt32]

    init(_ service: String) throws {
        let keychain = try Keychain(service: service)
        let found = try keychain.items()
        items = found.map { "\($0.name)@\($0.accessibility?.name ?? "-")" }
        values = try found.map { try keychain.data(forKey: $0.name) }
        masks = [SpecialKeyring.session.serial, SpecialKeyring.user.serial].compactMap { anchor in
            guard let ring = try? anchor.search(type: "keyring", description: KeyName("kc:" + service)) else { return nil }
            return try? ring.describe().permissions.rawValue
        }
    }
}

/// A new folder of `test`'s with the helpers as installed (links named like them) in
/// three folders: `front/` to the front built beside the full kc, `full/` to the full kc,
/// and `alone/` to a copy of the front with no `kc-full` beside it, which serves what the
/// front serves and says it cannot run the full kc for everything else. Skips the test
/// where the front was not built.
private func helperFolders(for test: XCTestCase) throws -> String {
    let bin = URL(fileURLWithPath: builtFullKC).deletingLastPathComponent().path
    let front = bin + "/kc-front"
    guard FileManager.default.isExecutableFile(atPath: front), FileManager.default.isExecutableFile(atPath: bin + "/kc-full") else {
        throw XCTSkip("the front was not built (bash Tools/build-front.sh; it needs a Swift toolchain with Embedded Swift)")
    }
    let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("kc-test-helpers-\(getpid())-\(test.name.filter(\.isLetter).suffix(30))").path
    try? FileManager.default.removeItem(atPath: folder)
    test.addTeardownBlock { try? FileManager.default.removeItem(atPath: folder) }
    for (name, target) in [("front", front), ("full", builtFullKC), ("alone", folder + "/kc-front")] {
        try FileManager.default.createDirectory(atPath: folder + "/" + name, withIntermediateDirectories: true)
        for helper in ["git-credential-kc", "docker-credential-kc"] {
            try FileManager.default.createSymbolicLink(atPath: folder + "/" + name + "/" + helper, withDestinationPath: target)
        }
    }
    try FileManager.default.copyItem(atPath: front, toPath: folder + "/kc-front")
    return folder
}
