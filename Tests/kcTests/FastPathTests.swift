import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The commands scripts call in loops (`get`, `set`, `rm`, `ls`, `exec`, `podman-driver
/// lookup`) skip ArgumentParser when spelled plainly (Sources/kc/FastPath.swift and
/// PlainCommandLine.swift); every other spelling is left to the parser. These tests
/// show which spellings take which path (under gdb), that a plain spelling and a
/// parser-only one of the same operation give the same output, exit status and keychain
/// state, that bad input on the fast path is refused exactly and harms nothing, and that
/// names that are not UTF-8 pass through the fast path byte for byte.
final class FastPathTests: KeyringTestCase {
    /// A group and a user that do not exist.
    private let noSuchGroup = "kc-no-such-group"
    private let noSuchUser = "kc-no-such-user"

    /// This process's uid, for `--from` naming the caller's own services.
    private var me: String { String(getuid()) }

    /// The name of this process's primary group, which `--group` accepts.
    private var ownGroup: String {
        get throws {
            guard let entry = getgrgid(getgid()) else { throw XCTSkip("the primary group has no name") }
            return String(cString: entry.pointee.gr_name)
        }
    }

    private func invalidName(_ kind: String, _ problem: String) -> String {
        "kc: invalid \(kind) name: it \(problem); use 1-255 bytes without '/' or NUL, not '.' or '..'\n"
    }

    private func timeoutRefusal(_ text: String) -> String {
        "kc: --timeout must be a positive duration such as 90s, 15m, 2h, 7d or 1h30m (at most 136 years), or 'none'; not '\(text)'; see 'kc help set'\n"
    }

    private func noSuchGroupMessage(_ group: String) -> String {
        "kc: no group named '\(group)' on this system; check the name with 'getent group \(group)', or create it with 'sudo groupadd \(group)'\n"
    }

    // MARK: Running kc with arguments that are any bytes

    /// This process's environment without SECRET_ID, plus `extra`.
    private func environment(_ extra: [String: String] = [:]) -> [String: String] {
        ProcessInfo.processInfo.environment.filter { $0.key != "SECRET_ID" }.merging(extra) { $1 }
    }

    /// `bytes` as one bash word, `$'\xNN...'`, which bash passes on exactly.
    private func bashWord(_ bytes: [UInt8]) -> String {
        "$'" + bytes.map { String(format: "\\x%02x", $0) }.joined() + "'"
    }

    /// Runs `command` followed by `arguments`, which may be bytes that are not UTF-8
    /// (Foundation's Process takes Strings only): bash execs them from `$'...'` words.
    private func run(_ command: [String], then arguments: [[UInt8]], input: [UInt8] = [],
                     environment: [String: String]? = nil) throws -> CommandResult {
        let script = "exec \"$@\" " + arguments.map(bashWord).joined(separator: " ")
        return try runCommand("/bin/bash", ["-c", script, "bash"] + command, input: input,
                              environment: environment ?? self.environment())
    }

    /// The built kc with byte arguments.
    private func kcBytes(_ arguments: [[UInt8]], input: [UInt8] = [], environment: [String: String]? = nil) throws -> CommandResult {
        try run([builtKC], then: arguments, input: input, environment: environment)
    }

    /// The built kc with text arguments and a given environment (SECRET_ID unset by default).
    private func kcIn(_ environment: [String: String], _ arguments: [String], input: [UInt8] = []) throws -> CommandResult {
        try runCommand(builtKC, arguments, input: input, environment: environment)
    }

    // MARK: 1. Which spellings reach the parser

    /// Which path kc took for one command line.
    private enum Path: Equatable { case fast, parser }

    /// Runs kc under gdb with a breakpoint on ArgumentParser's parseAsRoot: a spelling
    /// that reaches the parser stops there; one that does not runs to its exit.
    private struct ParserProbe {
        static let symbol = "$s14ArgumentParser15ParsableCommandPAAE11parseAsRootyAaB_pSaySSGSgKFZ"
        let run: ([String], [[UInt8]], [UInt8], [String: String]?) throws -> CommandResult

        /// Skips the test where gdb is missing, kc is stripped or gdb cannot run it.
        init(run: @escaping ([String], [[UInt8]], [UInt8], [String: String]?) throws -> CommandResult) throws {
            guard programExists("gdb") else { throw XCTSkip("gdb is needed to see whether the parser runs") }
            guard try runShell("nm '\(builtKC)' | grep -qF '\(Self.symbol)'").status == 0 else {
                throw XCTSkip("the built kc has no parseAsRoot symbol (stripped)")
            }
            self.run = run
            let check = try path(of: [Array("--version".utf8)])
            guard check.path == .parser else { throw XCTSkip("gdb cannot run kc here (ptrace refused?): \(check.output)") }
        }

        /// The path kc took, nil if gdb's output shows neither (with that output).
        func path(of arguments: [[UInt8]], input: [UInt8] = [], environment: [String: String]? = nil) throws -> (path: Path?, output: String) {
            let gdb = ["/usr/bin/env", "gdb", "-q", "-batch", "-ex", "break \(Self.symbol)", "-ex", "run",
                       "-ex", "info breakpoints", "--args", builtKC]
            let result = try run(gdb, arguments, input, environment)
            guard result.status == 0 else { return (nil, "\(result)") }
            if result.output.contains("breakpoint already hit") { return (.parser, result.output) }
            // `[Inferior 1 (process N) exited normally]` or `... exited with code NN]`.
            if result.output.contains("[Inferior 1 (process"), result.output.contains(" exited ") { return (.fast, result.output) }
            return (nil, result.output)
        }
    }

    /// One command line for the probe.
    private struct Spelling {
        var arguments: [[UInt8]]
        var path: Path
        var input: [UInt8] = []
        var environment: [String: String]? = nil

        init(_ arguments: [String], _ path: Path, input: String = "", environment: [String: String]? = nil) {
            self.init(bytes: arguments.map { Array($0.utf8) }, path, input: input, environment: environment)
        }

        init(bytes arguments: [[UInt8]], _ path: Path, input: String = "", environment: [String: String]? = nil) {
            self.arguments = arguments
            self.path = path
            self.input = Array(input.utf8)
            self.environment = environment
        }

        var shown: String { arguments.map { String(decoding: $0, as: UTF8.self).debugDescription }.joined(separator: " ") }
    }

    func testPlainSpellingsSkipTheParserAndUnusualOnesReachIt() throws {
        let probe = try ParserProbe { command, arguments, input, environment in
            try self.run(command, then: arguments, input: input, environment: environment)
        }
        let service = uniqueService(), other = uniqueService()
        let keychain = try Keychain(service: service)
        for name in ["token", "gone1", "gone2"] { try keychain.set("v", forKey: name) }
        try keychain.accessibility(.afterFirstUnlock).set("s", forKey: "secret")
        try Keychain(service: other).set("o", forKey: "editor")
        let odd = uniqueServiceName(endingWith: [0xff])
        let oddKey: [UInt8] = Array("key".utf8) + [0xfe]
        try Keychain(service: odd).set("b", forKey: KeyName(bytes: oddKey))
        let withID = environment(["SECRET_ID": "secret"])

        let spellings: [Spelling] = [
            // kc get
            Spelling(["get", service, "token"], .fast),
            Spelling(["get", "-q", "--from", me, "--", service, "token"], .fast),
            Spelling(["get", "-q", service, "missing"], .fast),
            Spelling(["get", service, ""], .fast),  // a bad name is the fast path's to refuse
            Spelling(bytes: [Array("get".utf8), odd.bytes, oddKey], .fast),
            Spelling(["get", "--from=\(me)", service, "token"], .parser),
            Spelling(["get", "-q", "-q", service, "token"], .parser),
            Spelling(["get", "--help"], .parser),
            // kc set
            Spelling(["set", "--access", "after-first-unlock", "--timeout", "1h", service, "t1"], .fast, input: "x"),
            Spelling(["set", "--this-device-only", "--ephemeral", "--", service, "t2"], .fast, input: "y"),
            Spelling(["set", service, "a/b"], .fast, input: "z"),
            Spelling(bytes: [Array("set".utf8), odd.bytes, Array("k2".utf8)], .fast, input: "w"),
            Spelling(["set", "--access=always", service, "t3"], .parser, input: "u"),
            Spelling(["set", "--timeout", "1h", "--timeout", "2h", service, "t3"], .parser, input: "u"),
            Spelling(["set", "--access", "sometimes", service, "t3"], .parser, input: "u"),  // a bad level's message is the parser's
            Spelling(["set", "--timeout", "soon", service, "t3"], .parser, input: "u"),      // so is a bad duration's
            Spelling(["set", "--group", noSuchGroup, "--from", me, service, "t3"], .parser, input: "u"),
            Spelling(["set", "--group-writable", service, "t3"], .parser, input: "u"),
            Spelling(["set", "--help"], .parser),
            // kc rm
            Spelling(["rm", service, "gone1"], .fast),
            Spelling(["rm", "--from", me, "--", service, "gone2"], .fast),
            Spelling(["rm", service, "missing"], .fast),
            Spelling(["rm", "--from=\(me)", service, "token"], .parser),
            Spelling(["rm", "--from", me, "--from", me, service, "token"], .parser),
            Spelling(["rm", "-h"], .parser),
            // kc ls
            Spelling(["ls"], .fast),
            Spelling(["ls", service], .fast),
            Spelling(["ls", "--from", me, "--", service], .fast),
            Spelling(["ls", service + ".absent"], .fast),
            Spelling(bytes: [Array("ls".utf8), odd.bytes], .fast),
            Spelling(["ls", "--from=\(me)", service], .parser),
            Spelling(["ls", "--group", noSuchGroup], .parser),  // without a service, --group is the parser's to ignore
            Spelling(["ls", "-l", service], .parser),
            Spelling(["ls", "--help"], .parser),
            // kc exec
            Spelling(["exec", "--service", service, "--env", "--", "/bin/true"], .fast),
            Spelling(["exec", "--files", "--service", service, "--service", other, "--", "/bin/true"], .fast),
            Spelling(["exec", "--service", other, "--env", "--allow-env", "EDITOR", "--allow-env", "PAGER", "--", "/bin/true"], .fast),
            Spelling(["exec", "--service", service + ".absent", "--env", "--", "/bin/true"], .fast),
            Spelling(["exec", "--service=\(service)", "--env", "--", "/bin/true"], .parser),
            Spelling(["exec", "--env", "--env", "--service", service, "--", "/bin/true"], .parser),
            Spelling(["exec", "--service", service, "--env", "/bin/true"], .parser),  // no --
            Spelling(["exec", "--service", service, "--", "/bin/true"], .parser),     // neither --env nor --files
            Spelling(["exec", "--service", service, "--files", "--allow-env", "EDITOR", "--", "/bin/true"], .parser),
            Spelling(["exec", "--help"], .parser),
            // kc podman-driver lookup
            Spelling(["podman-driver", "lookup", "--service", service], .fast, environment: withID),
            Spelling(["podman-driver", "lookup", "--service", service, "--access", "after-first-unlock", "--"], .fast, environment: withID),
            Spelling(["podman-driver", "lookup", "--service", service], .fast),  // SECRET_ID unset
            Spelling(["podman-driver", "lookup", "--service=\(service)"], .parser, environment: withID),
            Spelling(["podman-driver", "lookup", "--service", service, "--service", service], .parser, environment: withID),
            Spelling(["podman-driver", "--service", service, "lookup"], .parser, environment: withID),
            Spelling(["podman-driver", "lookup", "--access", "sometimes", "--service", service], .parser, environment: withID),
            Spelling(["podman-driver", "lookup", "--help"], .parser),
        ]
        for spelling in spellings {
            let found = try probe.path(of: spelling.arguments, input: spelling.input,
                                       environment: spelling.environment ?? environment())
            XCTAssertEqual(found.path, spelling.path,
                           "kc \(spelling.shown) should \(spelling.path == .fast ? "skip" : "reach") the parser: \(found.output)")
        }
        // The fast spellings did their work: t1 and t2 stored as asked, gone1 and gone2 removed.
        XCTAssertEqual(try keychain.item("t1")?.accessibility, .afterFirstUnlock)
        XCTAssertNotNil(try keychain.item("t1")?.deadline, "--timeout 1h gave t1 a deadline")
        XCTAssertEqual(try keychain.item("t2")?.accessibility, .whenUnlockedThisDeviceOnly)
        XCTAssertEqual(try keychain.allKeyNames().sorted(), ["secret", "t1", "t2", "token"])
        XCTAssertEqual(try Keychain(service: odd).string(forKey: "k2"), "w")
    }

    // MARK: 2. The same meaning on both paths

    /// What one item and its service hold, as the library sees them.
    private struct ItemState: Equatable, CustomStringConvertible {
        var names: [KeyName]
        var access: String?
        var expires: Bool
        var value: [UInt8]?

        init(_ service: some KeyNameConvertible, _ key: String) throws {
            let keychain = try Keychain(service: service)
            names = try keychain.allKeyNames().sorted()
            let item = try keychain.item(key)
            access = item?.accessibility?.name
            expires = item?.deadline != nil
            value = try keychain.data(forKey: key)
        }

        var description: String { "names \(names), access \(access ?? "none"), expires \(expires), value \(value.map { "\($0)" } ?? "none")" }
    }

    /// Runs a plain spelling and a parser-only spelling of one operation, each after
    /// `reset`, and asserts the same exit status, standard output, standard error and
    /// resulting `state`. Returns the plain run and its state, for the caller to check
    /// that both did the right thing.
    @discardableResult
    private func assertSameOnBothPaths<State: Equatable>(
        _ plain: [String], _ parsed: [String], input: [UInt8] = [], environment: [String: String]? = nil,
        reset: () throws -> Void = {}, state: () throws -> State,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (result: CommandResult, state: State) {
        let environment = environment ?? self.environment()
        try reset()
        let fast = try kcIn(environment, plain, input: input)
        let fastState = try state()
        try reset()
        let slow = try kcIn(environment, parsed, input: input)
        let slowState = try state()
        let both = "kc \(plain.joined(separator: " ")) and kc \(parsed.joined(separator: " "))"
        XCTAssertEqual(fast.status, slow.status, "exit status of \(both): \(fast) vs \(slow)", file: file, line: line)
        XCTAssertEqual(fast.standardOutput, slow.standardOutput, "standard output of \(both)", file: file, line: line)
        XCTAssertEqual(fast.standardError, slow.standardError, "standard error of \(both)", file: file, line: line)
        XCTAssertEqual(fastState, slowState, "keychain after \(both)", file: file, line: line)
        return (fast, fastState)
    }

    func testSetMeansTheSameOnBothPaths() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("neighbour", forKey: "other")
        let value: [UInt8] = Array("pass word\n".utf8) + [0, 0xff]
        let reset = { _ = try keychain.remove("token") }
        let state = { try ItemState(service, "token") }
        let stored: [(plain: [String], parsed: [String], access: String, timeout: UInt64?)] = [
            (["set", service, "token"], ["set", "--access=when-unlocked", service, "token"], "when-unlocked", nil),
            (["set", "--access", "after-first-unlock", "--timeout", "1h", service, "token"],
             ["set", "--access=after-first-unlock", "--timeout=1h", service, "token"], "after-first-unlock", 3600),
            (["set", "--this-device-only", "--ephemeral", "--timeout", "90m", "--", service, "token"],
             ["set", "--this-device-only", "--ephemeral", "--timeout=90m", "--", service, "token"], "when-unlocked+this-device-only", 5400),
            (["set", service, "token", "--access", "always"], ["set", service, "token", "--access=always"], "always", nil),
        ]
        for (plain, parsed, access, timeout) in stored {
            let (result, after) = try assertSameOnBothPaths(plain, parsed, input: value, reset: reset, state: state)
            XCTAssertEqual(result.status, 0, "\(plain): \(result)")
            XCTAssertEqual(result.standardOutput, [], "\(plain)")
            XCTAssertEqual(after.names, ["other", "token"], "\(plain)")
            XCTAssertEqual(after.access, access, "\(plain)")
            XCTAssertEqual(after.value, value, "\(plain) stored standard input exactly")
            XCTAssertEqual(after.expires, timeout != nil, "\(plain)")
            if let timeout {
                let left = try XCTUnwrap(keychain.item("token")?.secondsLeft, "\(parsed)")
                XCTAssertLessThanOrEqual(left, timeout, "\(parsed)")
            }
        }
        // Errors: the same message, and nothing stored.
        let refused: [(plain: [String], parsed: [String], status: Int32, message: String?)] = [
            (["set", "--group", noSuchGroup, service, "token"], ["set", "--group=\(noSuchGroup)", service, "token"], 2, noSuchGroupMessage(noSuchGroup)),
            (["set", "--from", noSuchUser, service, "token"], ["set", "--from=\(noSuchUser)", service, "token"], 2, nil),
            (["set", "--timeout", "1h", service, "a/b"], ["set", "--timeout=1h", service, "a/b"], 64, invalidName("item", "contains '/'")),
            // A bad duration: the plain spelling is left to the parser, which words it.
            (["set", "--timeout", "0", service, "token"], ["set", "--timeout=0", service, "token"], 64, timeoutRefusal("0")),
            (["set", "--timeout", "-5", service, "token"], ["set", "--timeout=-5", service, "token"], 64, timeoutRefusal("-5")),
        ]
        for (plain, parsed, status, message) in refused {
            let (result, after) = try assertSameOnBothPaths(plain, parsed, input: value, reset: reset, state: state)
            XCTAssertEqual(result.status, status, "\(plain): \(result)")
            if let message { XCTAssertEqual(result.standardError, message, "\(plain)") }
            XCTAssertTrue(result.standardError.hasPrefix("kc: "), "\(plain): \(result)")
            XCTAssertEqual(after.names, ["other"], "\(plain) stored nothing")
        }
        XCTAssertEqual(try keychain.string(forKey: "other"), "neighbour")
    }

    func testRemoveMeansTheSameOnBothPaths() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("neighbour", forKey: "other")
        // At after-first-unlock: rm finds an item at whatever level it has.
        let reset = { try keychain.accessibility(.afterFirstUnlock).set("v", forKey: "token") }
        let state = { try ItemState(service, "token") }

        let removed = try assertSameOnBothPaths(["rm", "--from", me, service, "token"], ["rm", "--from=\(me)", service, "token"],
                                                reset: reset, state: state)
        XCTAssertEqual(removed.result.status, 0, "\(removed.result)")
        XCTAssertEqual(removed.result.standardError, "")
        XCTAssertEqual(removed.state.names, ["other"], "token removed, its neighbour kept")

        let missing = try assertSameOnBothPaths(["rm", "--from", me, "--", service, "missing"], ["rm", "--from=\(me)", "--", service, "missing"],
                                                reset: reset, state: state)
        XCTAssertEqual(missing.result.status, 1, "\(missing.result)")
        XCTAssertEqual(missing.result.standardError,
                       "kc: no item 'missing' in service '\(service)'; list the items with 'kc ls --from \(me) \(service)'\n")
        XCTAssertEqual(missing.state.names, ["other", "token"])

        let noGroup = try assertSameOnBothPaths(["rm", "--group", noSuchGroup, service, "token"], ["rm", "--group=\(noSuchGroup)", service, "token"],
                                                reset: reset, state: state)
        XCTAssertEqual(noGroup.result.status, 2, "\(noGroup.result)")
        XCTAssertEqual(noGroup.result.standardError, noSuchGroupMessage(noSuchGroup))
        XCTAssertEqual(noGroup.state.value, Array("v".utf8), "token kept")

        let noUser = try assertSameOnBothPaths(["rm", "--from", noSuchUser, service, "token"], ["rm", "--from=\(noSuchUser)", service, "token"],
                                               reset: reset, state: state)
        XCTAssertEqual(noUser.result.status, 2, "\(noUser.result)")
        XCTAssertTrue(noUser.result.standardError.hasPrefix("kc: "), "\(noUser.result)")
        XCTAssertEqual(noUser.state.names, ["other", "token"])
    }

    func testListMeansTheSameOnBothPaths() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("1", forKey: "b")
        try keychain.accessibility(.afterFirstUnlock).set("2", forKey: "a")
        let state = { try ItemState(service, "a") }
        let group = try ownGroup

        for (plain, parsed) in [(["ls", "--from", me, service], ["ls", "--from=\(me)", service]),
                                (["ls", "--group", group, "--", service], ["ls", "--group=\(group)", "--", service])] {
            let listed = try assertSameOnBothPaths(plain, parsed, state: state)
            XCTAssertEqual(listed.result.status, 0, "\(plain): \(listed.result)")
            XCTAssertEqual(listed.result.output, "a\nb\n", "\(plain): every level, in name order")
            XCTAssertEqual(listed.state.names, ["a", "b"])
        }
        let noGroup = try assertSameOnBothPaths(["ls", "--group", noSuchGroup, service], ["ls", "--group=\(noSuchGroup)", service], state: state)
        XCTAssertEqual(noGroup.result.status, 2, "\(noGroup.result)")
        XCTAssertEqual(noGroup.result.standardError, noSuchGroupMessage(noSuchGroup))
        XCTAssertEqual(noGroup.result.standardOutput, [])
        let noUser = try assertSameOnBothPaths(["ls", "--from", noSuchUser, service], ["ls", "--from=\(noSuchUser)", service], state: state)
        XCTAssertEqual(noUser.result.status, 2, "\(noUser.result)")
        XCTAssertTrue(noUser.result.standardError.hasPrefix("kc: "), "\(noUser.result)")

        // Without a service the parser ignores --group, so `kc ls --group=G` lists the
        // services as plain `kc ls` does. Only this process's services are compared:
        // another run may make or remove its own meanwhile.
        let ours = "kc-test.\(getpid())."
        let plain = try kc("ls"), parsed = try kc("ls", "--group=\(noSuchGroup)")
        let mine = { (result: CommandResult) in result.output.split(separator: "\n").filter { $0.hasPrefix(ours) } }
        XCTAssertEqual(plain.status, 0, "\(plain)")
        XCTAssertEqual(parsed.status, plain.status, "\(parsed)")
        XCTAssertEqual(parsed.standardError, plain.standardError)
        XCTAssertEqual(mine(parsed), mine(plain))
        XCTAssertTrue(mine(plain).contains(Substring(service)), "kc ls lists \(service): \(plain)")
    }

    func testExecMeansTheSameOnBothPaths() throws {
        let service = uniqueService(), risky = uniqueService()
        try Keychain(service: service).set("s3cret", forKey: "token")
        try Keychain(service: service).accessibility(.afterFirstUnlock).set("pw 1", forKey: "db.password")
        try Keychain(service: risky).set("vi", forKey: "editor")
        let state = { try [ItemState(service, "token"), ItemState(service, "db.password"), ItemState(risky, "editor")] }
        let before = try state()

        let script = "printf '%s|%s' \"$TOKEN\" \"$DB_PASSWORD\"; exit 7"
        let env = try assertSameOnBothPaths(["exec", "--service", service, "--env", "--", "/bin/sh", "-c", script],
                                            ["exec", "--service=\(service)", "--env", "--", "/bin/sh", "-c", script], state: state)
        XCTAssertEqual(env.result.status, 7, "the command's status: \(env.result)")
        XCTAssertEqual(env.result.output, "s3cret|pw 1")

        let listing = "cd \"$CREDENTIALS_DIRECTORY\" && for f in *; do printf '%s=%s;' \"$f\" \"$(cat \"$f\")\"; done"
        let files = try assertSameOnBothPaths(["exec", "--files", "--service", service, "--service", risky, "--", "/bin/sh", "-c", listing],
                                              ["exec", "--files", "--service=\(service)", "--service", risky, "--", "/bin/sh", "-c", listing],
                                              environment: environment(["LC_ALL": "C"]), state: state)
        XCTAssertEqual(files.result.status, 0, "\(files.result)")
        XCTAssertEqual(files.result.output, "db.password=pw 1;editor=vi;token=s3cret;")

        let refused = try assertSameOnBothPaths(["exec", "--service", risky, "--env", "--", "/bin/echo", "ran"],
                                                ["exec", "--service=\(risky)", "--env", "--", "/bin/echo", "ran"], state: state)
        XCTAssertEqual(refused.result.status, 2, "\(refused.result)")
        XCTAssertEqual(refused.result.standardError,
                       "kc: item 'editor' of '\(risky)' would become $EDITOR, which changes what programs load, run or trust; rename the item, use --files, or pass --allow-env EDITOR if you mean it\n")
        XCTAssertEqual(refused.result.standardOutput, [], "the command did not run")

        let allowed = try assertSameOnBothPaths(["exec", "--service", risky, "--env", "--allow-env", "EDITOR", "--", "/bin/sh", "-c", "printf %s \"$EDITOR\""],
                                                ["exec", "--service", risky, "--env", "--allow-env=EDITOR", "--", "/bin/sh", "-c", "printf %s \"$EDITOR\""],
                                                state: state)
        XCTAssertEqual(allowed.result.status, 0, "\(allowed.result)")
        XCTAssertEqual(allowed.result.output, "vi")

        let noGroup = try assertSameOnBothPaths(["exec", "--group", noSuchGroup, "--service", service, "--files", "--", "/bin/echo", "ran"],
                                                ["exec", "--group=\(noSuchGroup)", "--service", service, "--files", "--", "/bin/echo", "ran"], state: state)
        XCTAssertEqual(noGroup.result.status, 2, "\(noGroup.result)")
        XCTAssertEqual(noGroup.result.standardError, noSuchGroupMessage(noSuchGroup))
        XCTAssertEqual(noGroup.result.standardOutput, [], "the command did not run")

        // After --, --help and a second -- are the command, on both paths.
        for command in [["--help"], ["--", "/bin/echo", "ran"]] {
            let odd = try assertSameOnBothPaths(["exec", "--service", service, "--env", "--"] + command,
                                                ["exec", "--service=\(service)", "--env", "--"] + command, state: state)
            XCTAssertEqual(odd.result.status, 127, "\(command): \(odd.result)")
            XCTAssertEqual(odd.result.standardError, "kc: cannot run '\(command[0])': No such file or directory\n")
        }
        XCTAssertEqual(try state(), before, "kc exec changed no item")
    }

    func testAServiceNamedTwiceIsPassedOnceOnBothPaths() throws {
        let service = uniqueService(), other = uniqueService()
        try Keychain(service: service).set("s3cret", forKey: "token")
        try Keychain(service: other).set("o", forKey: "other")
        let state = { try [ItemState(service, "token"), ItemState(other, "other")] }

        let env = try assertSameOnBothPaths(["exec", "--service", service, "--service", service, "--env", "--", "/bin/sh", "-c", "printf %s \"$TOKEN\""],
                                            ["exec", "--service=\(service)", "--service", service, "--env", "--", "/bin/sh", "-c", "printf %s \"$TOKEN\""],
                                            state: state)
        XCTAssertEqual(env.result.status, 0, "\(env.result)")
        XCTAssertEqual(env.result.output, "s3cret")
        XCTAssertEqual(env.result.standardError, "")

        let listing = "cd \"$CREDENTIALS_DIRECTORY\" && for f in *; do printf '%s=%s;' \"$f\" \"$(cat \"$f\")\"; done"
        let files = try assertSameOnBothPaths(["exec", "--files", "--service", service, "--service", other, "--service", service, "--", "/bin/sh", "-c", listing],
                                              ["exec", "--files", "--service=\(service)", "--service", other, "--service", service, "--", "/bin/sh", "-c", listing],
                                              environment: environment(["LC_ALL": "C"]), state: state)
        XCTAssertEqual(files.result.status, 0, "\(files.result)")
        XCTAssertEqual(files.result.output, "other=o;token=s3cret;")

        let named = try assertSameOnBothPaths(["exec", "--service", service, "--service", service, "--var", "TOKEN", "--", "/bin/sh", "-c", "printf %s \"$TOKEN\""],
                                              ["exec", "--service=\(service)", "--service=\(service)", "--var", "TOKEN", "--", "/bin/sh", "-c", "printf %s \"$TOKEN\""],
                                              state: state)
        XCTAssertEqual(named.result.status, 0, "\(named.result)")
        XCTAssertEqual(named.result.output, "s3cret")
    }

    func testPodmanLookupMeansTheSameOnBothPaths() throws {
        let service = uniqueService()
        let secret: [UInt8] = Array("db pass\n".utf8) + [0, 0xff]
        try Keychain(service: service, accessibility: .afterFirstUnlock).set(secret, forKey: "id1")
        let state = { try ItemState(service, "id1") }
        let before = try state()

        for (plain, parsed) in [(["podman-driver", "lookup", "--service", service], ["podman-driver", "lookup", "--service=\(service)"]),
                                (["podman-driver", "lookup", "--service", service, "--access", "after-first-unlock"],
                                 ["podman-driver", "lookup", "--service", service, "--access=after-first-unlock"])] {
            let found = try assertSameOnBothPaths(plain, parsed, environment: environment(["SECRET_ID": "id1"]), state: state)
            XCTAssertEqual(found.result.status, 0, "\(plain): \(found.result)")
            XCTAssertEqual(found.result.standardOutput, secret, "\(plain): the secret exactly")
            XCTAssertEqual(found.result.standardError, "")
        }
        let plain = ["podman-driver", "lookup", "--service", service], parsed = ["podman-driver", "lookup", "--service=\(service)"]
        let missing = try assertSameOnBothPaths(plain, parsed, environment: environment(["SECRET_ID": "id2"]), state: state)
        XCTAssertEqual(missing.result.status, 1, "\(missing.result)")
        XCTAssertEqual(missing.result.standardError,
                       "kc: podman secret id2 is not in the keychain (service '\(service)'): it was lost at a reboot or expired, or removed; create it again, or 'podman secret rm' it\n")
        let unset = try assertSameOnBothPaths(plain, parsed, state: state)
        XCTAssertEqual(unset.result.status, 64, "\(unset.result)")
        XCTAssertEqual(unset.result.standardError, "kc: SECRET_ID is not set; podman sets it when it runs this driver\n")
        let slash = try assertSameOnBothPaths(plain, parsed, environment: environment(["SECRET_ID": "a/b"]), state: state)
        XCTAssertEqual(slash.result.status, 64, "\(slash.result)")
        XCTAssertEqual(slash.result.standardError, invalidName("item", "contains '/'"))
        XCTAssertEqual(try state(), before, "a lookup changes nothing")
        // podman takes what was written as the secret: output that cannot be written is
        // a failure, on both paths, never a silent exit 0.
        for words in [plain, parsed] {
            let closed = try runCommand("/bin/bash", ["-c", "exec \"$0\" \"$@\" >&-", builtKC] + words,
                                        environment: environment(["SECRET_ID": "id1"]))
            XCTAssertEqual(closed.status, 2, "\(words): \(closed)")
            XCTAssertEqual(closed.standardError, "kc: cannot write to standard output\n", "\(words)")
        }
    }

    // MARK: 3. Bad input on the fast path

    func testBadNamesOnTheFastPathAreRefusedExactlyAndHarmNothing() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        let kept: [UInt8] = Array("kept\n".utf8) + [0xff]
        try keychain.set(kept, forKey: "keep")
        try keychain.accessibility(.afterFirstUnlock).set("deep", forKey: "deep")
        let badNames: [(name: String, problem: String)] = [
            ("", "is empty"),
            ("a/b", "contains '/'"),
            (String(repeating: "x", count: 256), "is 256 bytes long; the limit is 255"),
        ]
        for (name, problem) in badNames {
            let asItem = invalidName("item", problem), asService = invalidName("service", problem)
            var commands: [(arguments: [String], message: String)] = [
                (["get", service, name], asItem),
                (["get", "-q", "--", service, name], asItem),
                (["get", name, "keep"], asService),
                (["set", service, name], asItem),
                (["set", "--access", "after-first-unlock", "--timeout", "1h", name, "keep"], asService),
                (["rm", service, name], asItem),
                (["rm", "--from", me, name, "keep"], asService),
                (["ls", name], asService),
            ]
            // An empty option value is the parser's; '/' and length are the fast path's.
            if !name.isEmpty { commands.append((["podman-driver", "lookup", "--service", name], asService)) }
            for (arguments, message) in commands {
                let result = try kcIn(environment(["SECRET_ID": "keep"]), arguments, input: Array("new".utf8))
                XCTAssertEqual(result.status, 64, "\(arguments): \(result)")
                XCTAssertEqual(result.standardError, message, "\(arguments)")
                XCTAssertEqual(result.standardOutput, [], "\(arguments)")
            }
        }
        XCTAssertEqual(try keychain.allKeyNames().sorted(), ["deep", "keep"], "nothing stored or removed")
        XCTAssertEqual(try keychain.data(forKey: "keep"), kept)
        XCTAssertEqual(try keychain.item("keep")?.accessibility, .whenUnlocked)
        XCTAssertEqual(try keychain.string(forKey: "deep"), "deep")
        XCTAssertEqual(try keychain.item("deep")?.accessibility, .afterFirstUnlock)
    }

    func testMissingThingsOnTheFastPathAreReportedExactlyAndHarmNothing() throws {
        let service = uniqueService(), absent = service + ".absent"
        let keychain = try Keychain(service: service)
        let kept: [UInt8] = Array("kept\n".utf8) + [0xff]
        try keychain.set(kept, forKey: "keep")
        try keychain.accessibility(.afterFirstUnlock).set("deep", forKey: "deep")
        let noItem = { (service: String) in
            "kc: no item 'missing' in service '\(service)'; list the items with 'kc ls \(service)'\n"
        }
        let noService = "kc: no service '\(absent)'; list the services with 'kc ls'\n"
        let cases: [(arguments: [String], status: Int32, message: String)] = [
            (["rm", service, "missing"], 1, noItem(service)),
            (["rm", "--", absent, "missing"], 1, noItem(absent)),
            (["get", service, "missing"], 1, noItem(service)),
            (["get", "-q", service, "missing"], 1, ""),
            (["get", "--quiet", "--", absent, "missing"], 1, ""),
            (["ls", absent], 1, noService),
            (["ls", "--", absent], 1, noService),
            (["exec", "--service", absent, "--env", "--", "/bin/echo", "ran"], 1, noService),
            (["exec", "--service", service, "--service", absent, "--files", "--", "/bin/echo", "ran"], 1, noService),
            (["podman-driver", "lookup", "--service", service], 64, "kc: SECRET_ID is not set; podman sets it when it runs this driver\n"),
            (["podman-driver", "lookup"], 64, "kc: SECRET_ID is not set; podman sets it when it runs this driver\n"),
        ]
        for (arguments, status, message) in cases {
            let result = try kcIn(environment(), arguments)
            XCTAssertEqual(result.status, status, "\(arguments): \(result)")
            XCTAssertEqual(result.standardError, message, "\(arguments)")
            XCTAssertEqual(result.standardOutput, [], "\(arguments): nothing written, no command run")
        }
        XCTAssertEqual(try keychain.allKeyNames().sorted(), ["deep", "keep"], "nothing stored or removed")
        XCTAssertEqual(try keychain.data(forKey: "keep"), kept)
        XCTAssertEqual(try keychain.string(forKey: "deep"), "deep")
        XCTAssertEqual(try keychain.item("deep")?.accessibility, .afterFirstUnlock)
        XCTAssertFalse(try Keychain(service: absent).serviceExists(), "no command made the absent service")
        XCTAssertEqual(try kc("get", service, "keep").standardOutput, kept, "still read through the fast path")
    }

    // MARK: 4. Names that are not UTF-8

    func testNamesThatAreNotUTF8GoThroughTheFastPathByteForByte() throws {
        let service = uniqueServiceName(endingWith: [0xff])  // `$'...\xff'`
        let first = KeyName(bytes: Array("key".utf8) + [0xfe]), second = KeyName(bytes: Array("key".utf8) + [0xff])
        let one: [UInt8] = Array("one\n".utf8) + [0x80], two: [UInt8] = Array("two".utf8)
        let set = Array("set".utf8), get = Array("get".utf8)

        var result = try kcBytes([set, service.bytes, first.bytes], input: one)
        XCTAssertEqual(result.status, 0, "\(result)")
        result = try kcBytes([set, Array("--access".utf8), Array("after-first-unlock".utf8), Array("--".utf8), service.bytes, second.bytes], input: two)
        XCTAssertEqual(result.status, 0, "\(result)")
        // The library sees the exact bytes: two items, not one whose name ends in U+FFFD.
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.allKeyNames().sorted(), [first, second])
        XCTAssertEqual(try keychain.data(forKey: first), one)
        XCTAssertEqual(try keychain.data(forKey: second), two)
        XCTAssertEqual(try keychain.item(second)?.accessibility, .afterFirstUnlock)
        let repaired = KeyName(String(decoding: service.bytes, as: UTF8.self))
        XCTAssertFalse(try Keychain.services().contains(repaired), "no service named with U+FFFD")

        XCTAssertEqual(try kcBytes([get, service.bytes, first.bytes]).standardOutput, one)
        XCTAssertEqual(try kcBytes([get, Array("-q".utf8), Array("--".utf8), service.bytes, second.bytes]).standardOutput, two)
        let missing = try kcBytes([get, service.bytes, Array("key".utf8) + [0xfd]])
        XCTAssertEqual(missing.status, 1, "\(missing)")

        let items = try kcBytes([Array("ls".utf8), service.bytes])
        XCTAssertEqual(items.status, 0, "\(items)")
        XCTAssertEqual(items.standardOutput, first.bytes + [0x0a] + second.bytes + [0x0a], "ls SERVICE prints the exact bytes")
        let services = try kc("ls")
        XCTAssertTrue(services.standardOutput.split(separator: 0x0a).contains { Array($0) == service.bytes },
                      "ls prints the service's exact bytes on a line of its own: \(services)")

        let listing = "cd \"$CREDENTIALS_DIRECTORY\" && for f in *; do printf '%s=' \"$f\"; cat \"$f\"; printf ';'; done"
        let exec = try kcBytes([Array("exec".utf8), Array("--service".utf8), service.bytes, Array("--files".utf8), Array("--".utf8),
                                Array("/bin/sh".utf8), Array("-c".utf8), Array(listing.utf8)],
                               environment: environment(["LC_ALL": "C"]))
        XCTAssertEqual(exec.status, 0, "\(exec)")
        XCTAssertEqual(exec.standardOutput, first.bytes + Array("=".utf8) + one + Array(";".utf8) + second.bytes + Array("=".utf8) + two + Array(";".utf8),
                       "kc exec --files names each file with the item's exact bytes")

        result = try kcBytes([Array("rm".utf8), service.bytes, second.bytes])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try keychain.allKeyNames(), [first], "rm removed that name only")
        result = try kcBytes([Array("rm".utf8), service.bytes, second.bytes])
        XCTAssertEqual(result.status, 1, "\(result)")
        XCTAssertEqual(result.standardError,
                       "kc: no item 'key\\xff' in service '\(String(decoding: service.bytes.dropLast(), as: UTF8.self))\\xff'; list the items with 'kc ls \(String(decoding: service.bytes.dropLast(), as: UTF8.self))\\xff'\n")
    }

    // MARK: Disagreements between the two paths

    /// A service name that is not UTF-8 and whose bytes, each repaired to the three-byte
    /// U+FFFD, would pass 255: the fast path lists it; `kc ls`'s validate() checks the
    /// repaired String, not the exact bytes, and refuses it as too long.
    ///
    /// Fails at 9a0407a, on purpose: it shows a disagreement between the two paths
    /// (KC.List.validate() validates `service`, the String, where FastPath.list() and
    /// the parsed run() use the exact bytes).
    func testListingALongServiceNameThatIsNotUTF8MeansTheSameOnBothPaths() throws {
        let service = uniqueServiceName(endingWith: [UInt8](repeating: 0xff, count: 90))
        XCTAssertLessThanOrEqual(service.bytes.count, 255)
        try Keychain(service: service).set("v", forKey: "token")
        let ls = Array("ls".utf8), from = Array("--from".utf8)
        let fast = try kcBytes([ls, from, Array(me.utf8), service.bytes])
        let parsed = try kcBytes([ls, Array("--from=\(me)".utf8), service.bytes])
        XCTAssertEqual(fast.status, 0, "\(fast)")
        XCTAssertEqual(fast.output, "token\n")
        XCTAssertEqual(parsed.status, fast.status, "kc ls --from=\(me) SERVICE: \(parsed)")
        XCTAssertEqual(parsed.standardOutput, fast.standardOutput)
        XCTAssertEqual(parsed.standardError, fast.standardError)
    }

    /// `kc exec` whose command has an argument that is not UTF-8 and repairs to the same
    /// text as the service: the fast path runs it; the parser's path cannot tell which
    /// argv entry the service was and refuses.
    ///
    /// Fails at 9a0407a, on purpose: it shows a disagreement between the two paths
    /// (RawArguments.exactNames searches all of argv, the command's arguments included,
    /// for entries that repair to the service's text, finds two, and refuses).
    func testExecWhoseCommandHasAnArgumentLikeTheServiceMeansTheSameOnBothPaths() throws {
        let service = uniqueServiceName(endingWith: [0xff])
        let lookalike = Array(service.bytes.dropLast()) + [0xfe]
        try Keychain(service: service).set("v", forKey: "token")
        let command = [Array("--env".utf8), Array("--".utf8), Array("/bin/sh".utf8), Array("-c".utf8),
                       Array("printf '%s|%s' \"$1\" \"$TOKEN\"".utf8), Array("sh".utf8), lookalike]
        let fast = try kcBytes([Array("exec".utf8), Array("--service".utf8), service.bytes] + command)
        let parsed = try kcBytes([Array("exec".utf8), Array("--service=".utf8) + service.bytes] + command)
        XCTAssertEqual(fast.status, 0, "\(fast)")
        XCTAssertEqual(fast.standardOutput, lookalike + Array("|v".utf8))
        XCTAssertEqual(parsed.status, fast.status, "kc exec --service=SERVICE: \(parsed)")
        XCTAssertEqual(parsed.standardOutput, fast.standardOutput)
        XCTAssertEqual(parsed.standardError, fast.standardError)
    }
}
