import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// kc's front (Front/Front.swift, docs/FRONT.md), installed as `kc` with the full kc
/// beside it as `kc-full`, serves `kc get [-q] SERVICE ITEM` itself when the item is at
/// its home level and hands every other command line to the full kc. These tests run the
/// front and the full kc on the same argv and environment and assert the same standard
/// output, standard error, exit status and keychain state (FastPathTests' method). Which
/// path the front took is seen with a copy of it that has no `kc-full` beside it: it
/// serves what it serves, and says it cannot run the full kc for everything else.
///
/// Tools/build-front.sh builds the front (Tools/test.sh runs it); where it was not built
/// (no Embedded Swift in the toolchain) these tests skip.
final class FrontTests: KeyringTestCase {
    /// A folder of this test's, with a copy of the front alone in it.
    private var folder = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = try folderWithTheFrontAlone(for: self)
    }

    private var loneFront: String { folder + "/kc-front" }

    // MARK: Running both

    /// This process's environment without KC_AUDIT and SECRET_ID, plus `extra`.
    private func environment(_ extra: [String: String] = [:]) -> [String: String] {
        ProcessInfo.processInfo.environment.filter { $0.key != "KC_AUDIT" && $0.key != "SECRET_ID" }.merging(extra) { $1 }
    }

    /// Words of argv as bytes.
    private func words(_ texts: String...) -> [[UInt8]] { texts.map { Array($0.utf8) } }

    /// Runs `program` with `arguments` (any bytes: bash execs them from `$'...'` words),
    /// after `prefix` (`exec`, `exec -a NAME`, or a wrapper that execs its arguments) and
    /// followed by bash `redirections`.
    private func run(_ program: String, _ arguments: [[UInt8]], input: [UInt8] = [], environment: [String: String],
                     prefix: String = "exec", redirections: String = "") throws -> CommandResult {
        let quoted = arguments.map { "$'" + $0.map { String(format: "\\x%02x", $0) }.joined() + "'" }
        let script = "\(prefix) \"$0\" \(quoted.joined(separator: " ")) \(redirections)"
        return try runCommand("/bin/bash", ["-c", script, program], input: input, environment: environment)
    }

    /// Whether the front alone served the command line (true) or handed it over (false).
    private func served(_ arguments: [[UInt8]], input: [UInt8] = [], environment: [String: String], prefix: String = "exec",
                        redirections: String = "") throws -> Bool {
        let alone = try run(loneFront, arguments, input: input, environment: environment, prefix: prefix, redirections: redirections)
        return !alone.standardError.contains("kc: cannot run the full kc, ")
    }

    /// Runs `arguments` through the front and through the full kc, each after `reset`,
    /// and asserts that the front took the path `served` says and that both printed and
    /// exited alike and left the same `state`. Returns the front's run and state.
    @discardableResult
    private func assertSame<State: Equatable>(
        _ arguments: [[UInt8]], served expected: Bool, input: [UInt8] = [], environment: [String: String]? = nil,
        prefix: String = "exec", redirections: String = "",
        reset: () throws -> Void = {}, state: () throws -> State,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (result: CommandResult, state: State) {
        let environment = environment ?? self.environment()
        let shown = arguments.map { String(decoding: $0, as: UTF8.self).debugDescription }.joined(separator: " ")
        try reset()
        XCTAssertEqual(try served(arguments, input: input, environment: environment, prefix: prefix,
                                  redirections: redirections.contains(">&-") ? "" : redirections), expected,
                       "kc \(shown) should be \(expected ? "served by the front" : "handed to the full kc")", file: file, line: line)
        try reset()
        let front = try run(try builtFront(), arguments, input: input, environment: environment, prefix: prefix, redirections: redirections)
        let frontState = try state()
        try reset()
        let full = try run(builtFullKC, arguments, input: input, environment: environment, prefix: prefix, redirections: redirections)
        let fullState = try state()
        XCTAssertEqual(front.status, full.status, "exit status of kc \(shown): \(front) vs \(full)", file: file, line: line)
        XCTAssertEqual(front.standardOutput, full.standardOutput, "standard output of kc \(shown)", file: file, line: line)
        XCTAssertEqual(front.standardError, full.standardError, "standard error of kc \(shown)", file: file, line: line)
        XCTAssertEqual(frontState, fullState, "keychain after kc \(shown)", file: file, line: line)
        return (front, frontState)
    }

    /// What a service holds, as the library sees it, and its keyrings' masks.
    private struct ServiceState: Equatable, CustomStringConvertible {
        var items: [String]
        var values: [[UInt8]?]
        var masks: [UInt32]

        init(_ service: some KeyNameConvertible) throws {
            let keychain = try Keychain(service: service)
            let found = try keychain.items()
            items = found.map { "\($0.name)@\($0.accessibility?.name ?? "-")" }
            values = try found.map { try keychain.data(forKey: $0.name) }
            masks = [SpecialKeyring.session.serial, SpecialKeyring.user.serial].compactMap { anchor in
                guard let ring = try? anchor.search(type: "keyring", description: KeyName("kc:") + service.keyName) else { return nil }
                return try? ring.describe().permissions.rawValue
            }
        }

        var description: String { "items \(items), values \(values), masks \(masks.map { String($0, radix: 16) })" }
    }

    /// The most an item holds where the key quota has room for it (root's, or a raised
    /// one); else over two pages, as far as an ordinary user's 20,000 bytes leave free.
    static var largestValue: Int {
        let free = KeyQuota.current()?.freeBytes ?? 40_000
        return TestQuota.hasRoom(forValueOf: 32767 + 2000) ? 32767 : max(4200, min(9000, free - 3000))
    }

    /// Under `ulimit -v` too small for the full kc, the kernel would kill it at execve
    /// with SIGSEGV before it said a word: the front says so instead, and what it serves
    /// itself still works.
    func testAnAddressSpaceLimitTooSmallForTheFullKcIsSaid() throws {
        let front = try builtFront()
        let service = uniqueService()
        try Keychain(service: service).set("small", forKey: "k")
        let size = (try FileManager.default.attributesOfItem(atPath: builtFullKC)[.size] as? NSNumber)?.intValue ?? 0
        let kib = size / 1024  // the file alone: less than the full kc needs
        let handed = try runCommand("/bin/bash", ["-c", "ulimit -v \(kib); exec \"$0\" ls", front])
        XCTAssertEqual(handed.status, 126, "\(handed)")
        XCTAssertTrue(handed.standardError.hasPrefix("kc: the address-space limit (ulimit -v \(kib) KiB) is too small for the full kc, "), handed.standardError)
        XCTAssertTrue(handed.standardError.hasSuffix("; raise it (ulimit -v unlimited) and run kc again\n"), handed.standardError)
        let served = try runCommand("/bin/bash", ["-c", "ulimit -v \(kib); exec \"$0\" get \"$1\" k", front, service])
        XCTAssertEqual(served.status, 0, "\(served)")
        XCTAssertEqual(served.output, "small")
    }

    // MARK: What the front serves

    func testAnItemAtItsHomeLevelIsServedExactlyAsTheFullKcPrintsIt() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        let values: [(name: String, value: [UInt8])] = [
            ("token", Array("s3cret".utf8)),
            ("line", Array("ends in a newline\n".utf8)),
            ("bytes", [0, 0xff, 0x0a, 0x80, 0]),
            ("-q", Array("a name that looks like a flag".utf8)),
            ("largest", (0..<Self.largestValue).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
        ]
        for (name, value) in values { try keychain.set(value, forKey: name) }
        let state = { try ServiceState(service) }
        for (name, value) in values where name != "-q" {
            for spelling in [words("get", service, name), words("get", "-q", service, name), words("get", "--quiet", "--", service, name),
                             words("get", service, name, "-q")] {
                let (result, _) = try assertSame(spelling, served: true, state: state)
                XCTAssertEqual(result.status, 0, "\(result)")
                XCTAssertEqual(result.standardOutput, value, "\(name): the exact bytes, nothing added")
                XCTAssertEqual(result.standardError, "")
            }
        }
        let dashed = try assertSame(words("get", "--", service, "-q"), served: true, state: state)
        XCTAssertEqual(dashed.result.output, "a name that looks like a flag")
    }

    func testNamesThatAreNotUTF8AreServedByteForByte() throws {
        let service = uniqueServiceName(endingWith: [0xff])
        let item = KeyName(bytes: Array("key".utf8) + [0xfe])
        try Keychain(service: service).set([0x80, 0x81], forKey: item)
        let (result, _) = try assertSame([Array("get".utf8), service.bytes, item.bytes], served: true, state: { try ServiceState(service) })
        XCTAssertEqual(result.standardOutput, [0x80, 0x81])
        let missing = try assertSame([Array("get".utf8), service.bytes, Array("key".utf8) + [0xfd]], served: true,
                                     environment: environment(["XDG_DATA_HOME": folder + "/no-vault"]), state: { try ServiceState(service) })
        XCTAssertEqual(missing.result.status, 1, "\(missing.result)")
    }

    /// Where a login session links the user keyring into the session keyring (pam_keyinit),
    /// the full kc's first search finds an after-first-unlock service through it: the
    /// front makes that same search, so it serves such an item too.
    func testAnAfterFirstUnlockItemReachedThroughTheSessionKeyringIsServed() throws {
        guard programExists("keyctl") else { throw XCTSkip("keyctl (keyutils) is needed to make a session") }
        let service = uniqueService()
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("deep", forKey: "token")
        // keyctl says which session it joined on standard error: not kc's words, so not compared.
        let prefix = "exec 3>&2 && exec keyctl session - /bin/sh -c 'exec 2>&3 3>&-; keyctl link @u @s >/dev/null && exec \"$@\"' sh"
        let (result, _) = try assertSame(words("get", service, "token"), served: true, prefix: prefix, redirections: "2>/dev/null",
                                         state: { try ServiceState(service) })
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.output, "deep")
    }

    func testATerminalGetsTheSameNewlineFromBoth() throws {
        let service = uniqueService()
        try Keychain(service: service).set("no newline", forKey: "bare")
        try Keychain(service: service).set("newline\n", forKey: "ended")
        for (item, shown) in [("bare", "no newline\r\n"), ("ended", "newline\r\n")] {
            let front = try PseudoTerminal.run(try builtFront(), ["get", service, item], environment: environment())
            let full = try PseudoTerminal.run(builtFullKC, ["get", service, item], environment: environment())
            XCTAssertEqual(front.status, 0, "\(front)")
            XCTAssertEqual(front.output, shown, "\(item)")
            XCTAssertEqual(front.output, full.output, "\(item)")
            XCTAssertEqual(front.status, full.status, "\(item)")
        }
    }

    func testOutputThatCannotBeWrittenIsReportedAsTheFullKcReportsIt() throws {
        let service = uniqueService()
        try Keychain(service: service).set("s3cret", forKey: "token")
        let state = { try ServiceState(service) }
        // Standard output closed, and a pipe whose reader has gone.
        let closed = try assertSame(words("get", service, "token"), served: true, redirections: ">&-", state: state)
        XCTAssertEqual(closed.result.status, 2, "\(closed.result)")
        XCTAssertEqual(closed.result.standardError, "kc: cannot write to standard output\n")
        guard programExists("python3") else { throw XCTSkip("python3 is needed to make a pipe without a reader") }
        // A pipe whose read end is closed, SIGPIPE at its default action (python ignores it).
        let noReader = "exec python3 -c 'import os, signal, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
            + "signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])'"
        let broken = try assertSame(words("get", service, "token"), served: true, prefix: noReader, state: state)
        XCTAssertNotEqual(broken.result.status, 0, "\(broken.result)")
    }

    // MARK: What the front hands to the full kc

    func testEverythingButAHitAtHomeIsHandedToTheFullKcUnchanged() throws {
        let service = uniqueService(), absent = service + ".absent"
        let keychain = try Keychain(service: service)
        try keychain.set("v", forKey: "token")
        try keychain.accessibility(.afterFirstUnlock).set("afu", forKey: "deep")
        try keychain.accessibility(.always).set("al", forKey: "kept")
        try keychain.accessibility(.whenUnlockedThisDeviceOnly).set("local", forKey: "here")
        let group = try XCTUnwrap(getgrgid(getgid()).map { String(cString: $0.pointee.gr_name) }, "the primary group has a name")
        let me = String(getuid())
        let state = { try ServiceState(service) }
        let handedOver: [[String]] = [
            // Misses at home that are hits at another level: the full kc finds them there.
            ["get", service, "deep"], ["get", service, "kept"], ["get", service, "here"],
            // Names the full kc refuses, in its words.
            ["get", service, ""], ["get", "", "token"], ["get", service, "a/b"], ["get", ".", "token"], ["get", service, ".."],
            ["get", service, String(repeating: "x", count: 256)], ["get", String(repeating: "s", count: 256), "token"],
            // Sharing, options and spellings that are not the plain one.
            // (`--group` with the caller's own service at home is served: FrontSharingTests.)
            ["get", "--group", group, service, "absent"], ["get", "--from", me, service, "token"], ["get", "--from=\(me)", service, "token"],
            ["get", "-q", "-q", service, "token"], ["get", "-q", "--quiet", service, "token"], ["get", "--quiet=yes", service, "token"],
            ["get", "-", service, "token"], ["get", "--help"], ["get", service], ["get", service, "token", "extra"], ["get"],
            // Other commands.
            ["ls", "-l", service], ["ls", "--long", service], ["ls", "--json", service], ["ls"], ["ls", service, "extra"],
            ["ls", "--group", group, service], ["--version"], ["help", "get"], ["rm", absent, "token"], ["Get", service, "token"], [],
        ]
        for arguments in handedOver {
            let argv = arguments.map { Array($0.utf8) }
            try assertSame(argv, served: false, state: state)
        }
        XCTAssertEqual(try state().items, ["deep@after-first-unlock", "here@when-unlocked+this-device-only", "kept@always", "token@when-unlocked"])
    }

    func testTheReadAuditIsTheFullKcs() throws {
        let service = uniqueService()
        try Keychain(service: service).set("audited", forKey: "token")
        for value in ["1", "0", ""] {
            let (result, _) = try assertSame(words("get", service, "token"), served: false, environment: environment(["KC_AUDIT": value]),
                                             state: { try ServiceState(service) })
            XCTAssertEqual(result.output, "audited", "KC_AUDIT=\(value): \(result)")
        }
    }

    /// Under a helper's name the front is that helper, never `kc get`: a `get S K` command
    /// line is the full kc's usage error; the helper's own `get` (FrontCredentialHelperTests)
    /// may be served.
    func testUnderTheHelpersNamesTheFrontIsTheHelperNotKcGet() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        let state = { try ServiceState(service) }
        for name in ["git-credential-kc", "docker-credential-kc", "/usr/local/bin/git-credential-kc"] {
            try assertSame(words("get", service, "token"), served: false, input: Array("protocol=https\nhost=kc.invalid\n\n".utf8),
                           prefix: "exec -a \(name)", state: state)
        }
        // Installed, the helpers are links to kc: the front finds kc-full beside the file
        // the link names, not beside the link.
        let link = folder + "/git-credential-kc"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: try builtFront())
        let helper = try runCommand(link, ["get"], input: Array("protocol=https\nhost=kc.invalid\n\n".utf8), environment: environment())
        let full = try runCommand("/bin/bash", ["-c", "exec -a git-credential-kc \"$0\" get", builtFullKC],
                                  input: Array("protocol=https\nhost=kc.invalid\n\n".utf8), environment: environment())
        XCTAssertFalse(helper.standardError.contains("cannot run the full kc"), "\(helper)")
        XCTAssertEqual(helper.status, full.status, "\(helper) vs \(full)")
        XCTAssertEqual(helper.standardOutput, full.standardOutput)
        XCTAssertEqual(helper.standardError, full.standardError)
    }

    /// Installed as setup.sh installs them (`kc` the front, `kc-full` the full kc, copies
    /// in one folder), a command the full kc prints for the user to keep names `kc`.
    func testTheInstalledLayoutWorksAndPrintedCommandsNameTheFront() throws {
        let front = try builtFront()
        let installed = folder + "/bin"
        try FileManager.default.createDirectory(atPath: installed, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: front, toPath: installed + "/kc")
        try FileManager.default.copyItem(atPath: URL(fileURLWithPath: builtFullKC).resolvingSymlinksInPath().path, toPath: installed + "/kc-full")
        let service = uniqueService()
        let stored = try runCommand(installed + "/kc", ["set", service, "token"], input: Array("v".utf8), environment: environment())
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try runCommand(installed + "/kc", ["get", service, "token"], environment: environment()).output, "v")
        let printed = try runCommand(installed + "/kc", ["podman-driver", "--service", service], environment: environment())
        XCTAssertEqual(printed.status, 0, "\(printed)")
        XCTAssertTrue(printed.output.contains("'\(installed)/kc' podman-driver"), "\(printed.output)")
        XCTAssertFalse(printed.output.contains("kc-full"), "\(printed.output)")
    }

    /// The front touches nothing before it hands over: `kc exec --files` still gives its
    /// command the core-file limit the caller had (the front lowers it only while it holds
    /// a value), and so does the `kc exec --env` the front serves itself.
    func testTheCallersCoreLimitReachesTheFullKc() throws {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit) == 0, limit.rlim_max >= 1234 * 1024 else {
            throw XCTSkip("the hard core-file limit is below the 1234 blocks this test asks for")
        }
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        for (option, served) in [("--files", false), ("--env", true)] {
            let (result, _) = try assertSame(words("exec", "--service", service, option, "--", "/bin/bash", "-c", "ulimit -c"),
                                             served: served, prefix: "ulimit -S -c 1234 && exec", state: { try ServiceState(service) })
            XCTAssertEqual(result.output, "1234\n", "\(option): \(result)")
        }
    }

    /// A service keyring with a mask kc no longer makes is repaired by the full kc before
    /// it reads; the front hands it over rather than read through it.
    func testAServiceKeyringWhoseMaskKcRepairsIsHandedOverAndRepaired() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        let ring = try XCTUnwrap(try sessionKeyring.search(type: "keyring", description: KeyName("kc:") + KeyName(service)))
        let kcMask = try ring.describe().permissions
        let possessorAll = KeyPermissions(rawValue: kcMask.rawValue | 0x3f00_0000)
        let (result, after) = try assertSame(words("get", service, "token"), served: false,
                                             reset: { try ring.setPermissions(possessorAll) }, state: { try ServiceState(service) })
        XCTAssertEqual(result.output, "v", "\(result)")
        XCTAssertEqual(after.masks.first, kcMask.rawValue, "repaired by the full kc")
    }

    // MARK: kc set of an existing item

    /// What a set leaves: the service as the library sees it, and whether the item is
    /// still the same kernel key (an update in place) at each level it was.
    private struct SetState: Equatable {
        var service: ServiceState
        var sameKeys: [Bool]
    }

    private func setState(_ service: String, _ item: String, keys: [KeySerial]) throws -> SetState {
        let anchors = [SpecialKeyring.session.serial, SpecialKeyring.user.serial]
        let now = anchors.compactMap { anchor -> KeySerial? in
            guard let ring = try? anchor.search(type: "keyring", description: KeyName("kc:") + KeyName(service)) else { return nil }
            return try? ring.search(type: "user", description: KeyName(item))
        }
        return SetState(service: try ServiceState(service), sameKeys: now.map { keys.contains($0) })
    }

    func testAnExistingItemSetAgainIsUpdatedInPlaceByTheFrontAsByTheFullKc() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("old", forKey: "token")
        let keys = [try XCTUnwrap(try keychain.item("token")?.serial)]
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let values: [[UInt8]] = [Array("new".utf8), Array("ends in a newline\n".utf8), [0, 0xff, 0x0a, 0x80, 0],
                                 [UInt8](repeating: 0x61, count: page)]
        for value in values {
            for spelling in [words("set", service, "token"), words("set", "--", service, "token")] {
                let (result, after) = try assertSame(spelling, served: true, input: value, environment: withoutVault,
                                                     reset: { try keychain.set("old", forKey: "token") },
                                                     state: { try self.setState(service, "token", keys: keys) })
                XCTAssertEqual(result.status, 0, "\(result)")
                XCTAssertEqual(result.standardOutput, [], "nothing printed")
                XCTAssertEqual(result.standardError, "", "nothing printed")
                XCTAssertEqual(try keychain.data(forKey: "token"), value, "the exact bytes stored")
                XCTAssertEqual(after.sameKeys, [true], "the same key")
            }
        }
        // Names that are not UTF-8.
        let odd = uniqueServiceName(endingWith: [0xff])
        let item = KeyName(bytes: Array("key".utf8) + [0xfe])
        try Keychain(service: odd).set("old", forKey: item)
        try assertSame([Array("set".utf8), odd.bytes, item.bytes], served: true, input: Array("v".utf8), environment: withoutVault,
                       reset: { try Keychain(service: odd).set("old", forKey: item) }, state: { try ServiceState(odd) })
        XCTAssertEqual(try Keychain(service: odd).string(forKey: item), "v")
    }

    /// An after-first-unlock item that the session's search reaches (pam_keyinit links
    /// the user keyring in) keeps its level, as with the full kc.
    func testAnAfterFirstUnlockItemSetThroughTheSessionKeyringKeepsItsLevel() throws {
        guard programExists("keyctl") else { throw XCTSkip("keyctl (keyutils) is needed to make a session") }
        let service = uniqueService()
        let keychain = try Keychain(service: service, accessibility: .afterFirstUnlock)
        try keychain.set("old", forKey: "token")
        let prefix = "exec 3>&2 && exec keyctl session - /bin/sh -c 'exec 2>&3 3>&-; keyctl link @u @s >/dev/null && exec \"$@\"' sh"
        let (result, after) = try assertSame(words("set", service, "token"), served: true, input: Array("deep".utf8), environment: withoutVault,
                                             prefix: prefix, redirections: "2>/dev/null",
                                             reset: { try keychain.set("old", forKey: "token") }, state: { try ServiceState(service) })
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(after.items, ["token@after-first-unlock"])
        XCTAssertEqual(try keychain.string(forKey: "token"), "deep")
    }

    /// Every other set is the full kc's, and it reads the value the front read: the
    /// bytes, and then the end (empty, over a page, too long, a new item, a deadline).
    func testEveryOtherSetIsTheFullKcsWithTheSameValue() throws {
        let service = uniqueService(), timed = uniqueService(), fresh = uniqueService()
        let keychain = try Keychain(service: service)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let largest = Self.largestValue
        let reset: () throws -> Void = {
            _ = try keychain.removeAll()
            try keychain.set("old", forKey: "token")
            _ = try Keychain(service: fresh).removeAll()
            try Keychain(service: timed).set(Array("old".utf8), forKey: "token", until: Deadline.fromNow(seconds: 3600))
            // The key a large value replaced is freed by the kernel's collector a moment
            // later: an ordinary user's quota must have room again for the next run.
            TestQuota.waitForRoom(keys: 10, bytes: largest + 1500)
        }
        try reset()
        let state = { [try ServiceState(service), try ServiceState(fresh), try ServiceState(timed)] }
        let group = try XCTUnwrap(getgrgid(getgid()).map { String(cString: $0.pointee.gr_name) }, "the primary group has a name")
        let cases: [(arguments: [String], input: [UInt8])] = [
            (["set", service, "token"], []),  // empty: a new key, the full kc's
            (["set", service, "token"], [0]),  // one NUL byte: a new key too (Sources/Keyrings/ItemValue.swift)
            (["set", service, "token"], [UInt8](repeating: 0x62, count: page + 1)),  // over a page: add_key, not update
            (["set", service, "token"], [UInt8](repeating: 0x63, count: largest)),
            (["set", service, "token"], [UInt8](repeating: 0x64, count: 32768)),  // too long
            (["set", service, "token"], [UInt8](repeating: 0x65, count: 100_000)),
            (["set", service, "new"], Array("n".utf8)),  // a new item
            (["set", fresh, "token"], Array("n".utf8)),  // a new service
            (["set", timed, "token"], Array("t".utf8)),  // a deadline record: a new key in its place
            (["set", "--access", "always", service, "token"], Array("a".utf8)),
            (["set", "--timeout", "1h", service, "token"], Array("a".utf8)),
            (["set", "--ephemeral", service, "token"], Array("a".utf8)),
            (["set", "--group", group, service, "token"], Array("g".utf8)),
            (["set", service, "token", "value"], Array("x".utf8)),
            (["set", service, "a/b"], Array("x".utf8)), (["set", "", "token"], Array("x".utf8)),
            (["set", service], Array("x".utf8)),
        ]
        for (arguments, input) in cases {
            let (result, _) = try assertSame(arguments.map { Array($0.utf8) }, served: false, input: input, environment: withoutVault,
                                             reset: reset, state: state)
            if arguments == ["set", service, "token"] {
                XCTAssertEqual(result.status, input.count > 32767 ? 2 : 0, "\(input.count) bytes: \(result)")
                if result.status == 0 { XCTAssertEqual(try keychain.data(forKey: "token"), input, "the value the front read") }
            }
        }
        // A generated value is the full kc's (each run draws its own: only the items compare).
        try assertSame(words("set", "--generate", service, "token"), served: false, environment: withoutVault, reset: reset,
                       state: { try ServiceState(service).items })
        // Standard input closed or unreadable: nothing read, the full kc meets it as it came.
        for redirection in ["<&-", "< /"] {
            try assertSame(words("set", service, "token"), served: false, environment: withoutVault, redirections: redirection,
                           reset: reset, state: state)
        }
        // A mask kc repairs: the full kc repairs it and stores.
        let ring = { try XCTUnwrap(try self.sessionKeyring.search(type: "keyring", description: KeyName("kc:") + KeyName(service))) }
        let kcMask = try ring().describe().permissions
        let (_, repaired) = try assertSame(words("set", service, "token"), served: false, input: Array("r".utf8), environment: withoutVault,
                                           reset: { try reset(); try ring().setPermissions(KeyPermissions(rawValue: kcMask.rawValue | 0x3f00_0000)) },
                                           state: state)
        XCTAssertEqual(repaired[0].masks.first, kcMask.rawValue)
        XCTAssertEqual(try keychain.string(forKey: "token"), "r")
    }

    // MARK: kc rm of an item

    /// What a removal leaves: the services as the library sees them, and whether a
    /// deadline record of `keys` is left in the user keyring's `kc.expiry`.
    private func removalState(_ services: [String], keys: [KeySerial] = []) throws -> [String] {
        let table = try? SpecialKeyring.user.serial.search(type: "keyring", description: "kc.expiry")
        let records = keys.map { key in (try? table?.search(type: "user", description: KeyName(String(key.rawValue)))) != nil }
        return try services.map { "\(try ServiceState($0))" } + ["records \(records)"]
    }

    func testRemovingAnItemLeavesWhatTheFullKcLeaves() throws {
        let service = uniqueService(), timed = uniqueService(), lone = uniqueService()
        let odd = uniqueServiceName(endingWith: [0xff])
        let oddItem = KeyName(bytes: Array("key".utf8) + [0xfe])
        let keychain = try Keychain(service: service)
        var timedKey: KeySerial? = nil
        let reset: () throws -> Void = {
            try keychain.set("a", forKey: "token")
            try keychain.set("b", forKey: "other")
            try Keychain(service: odd).set("o", forKey: oddItem)
            try Keychain(service: odd).set("o", forKey: "other")
            try Keychain(service: lone).set("l", forKey: "token")
            try Keychain(service: timed).set(Array("t".utf8), forKey: "token", until: Deadline.fromNow(seconds: 3600))
            try Keychain(service: timed).set("u", forKey: "other")
            timedKey = try Keychain(service: timed).item("token")?.serial
        }
        try reset()
        let state = { try self.removalState([service, timed, lone, odd.description], keys: timedKey.map { [$0] } ?? []) }
        XCTAssertEqual(try state().last, "records [true]", "the timed item has a record to drop")
        for spelling in [words("rm", service, "token"), words("rm", "--", service, "token")] {
            let (result, after) = try assertSame(spelling, served: true, environment: withoutVault, reset: reset, state: state)
            XCTAssertEqual(result.status, 0, "\(result)")
            XCTAssertEqual(result.standardOutput + Array(result.standardError.utf8), [])
            XCTAssertTrue(after[0].hasPrefix("items [\"other@when-unlocked\"]"), "\(after)")
        }
        let (_, afterTimed) = try assertSame(words("rm", timed, "token"), served: true, environment: withoutVault, reset: reset, state: state)
        XCTAssertEqual(afterTimed.last, "records [false]", "its deadline record is dropped too")
        try assertSame([Array("rm".utf8), odd.bytes, oddItem.bytes], served: true, environment: withoutVault, reset: reset, state: state)
        // The last item: the front removes it, and the emptied service stays, as the
        // full kc leaves it.
        let (last, afterLast) = try assertSame(words("rm", lone, "token"), served: true, environment: withoutVault, reset: reset, state: state)
        XCTAssertEqual(last.status, 0, "\(last)")
        XCTAssertTrue(afterLast[2].hasPrefix("items [],"), "\(afterLast)")
        XCTAssertTrue(try Keychain(service: lone).serviceExists(), "the emptied service stays")
    }

    /// Two removals of a service's last two items at once, and a third process storing
    /// meanwhile: each removal removes its item alone, the service stays, and the item
    /// stored meanwhile is kept.
    func testRacingRemovalsOfTheLastItemsLeaveTheServiceAndLoseNoItem() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        let front = try builtFront()
        var environment = withoutVault
        environment["KC_S"] = service
        for round in 0..<30 {
            try keychain.set("a", forKey: "a")
            try keychain.set("b", forKey: "b")
            let keep = round % 3 == 0
            let script = """
                "$0" rm "$KC_S" a & "$0" rm "$KC_S" b & \(keep ? "printf k | \"$0\" set \"$KC_S\" kept &" : "") wait
                """
            let result = try runCommand("/bin/bash", ["-c", script, front], environment: environment)
            XCTAssertEqual(result.status, 0, "round \(round): \(result)")
            XCTAssertEqual(result.standardError, "", "round \(round)")
            XCTAssertEqual(try keychain.allKeyNames(), keep ? ["kept"] : [], "round \(round)")
            if keep {
                XCTAssertEqual(try keychain.string(forKey: "kept"), "k", "round \(round): the item stored meanwhile is kept")
                _ = try keychain.remove("kept")
            }
            XCTAssertTrue(try keychain.serviceExists(), "round \(round): the emptied service stays")
        }
        try keychain.removeAll()
    }

    func testEveryOtherRemovalIsTheFullKcsBeforeAnythingChanged() throws {
        let service = uniqueService(), twice = uniqueService()
        let keychain = try Keychain(service: service)
        let group = try XCTUnwrap(getgrgid(getgid()).map { String(cString: $0.pointee.gr_name) }, "the primary group has a name")
        let reset: () throws -> Void = {
            try keychain.set("a", forKey: "token")
            try keychain.set("b", forKey: "other")
            // One item with a copy at two levels (two racing writers leave that for a
            // moment): the full kc removes both.
            try Keychain(service: twice).set("x", forKey: "other")
            try Keychain(service: twice).set("s", forKey: "token")
            try Keychain(service: twice, accessibility: .afterFirstUnlock).set("y", forKey: "other")
            let deep = try XCTUnwrap(try SpecialKeyring.user.serial.search(type: "keyring", description: KeyName("kc:") + KeyName(twice)))
            if try deep.search(type: "user", description: "token") == nil {
                let copy = try Array("u".utf8).withUnsafeBytes { bytes in
                    try KeySerial.add(type: "user", description: KeyName("token"), payload: bytes, into: deep)
                }
                try copy.setPermissions(.ownerOnly)
            }
        }
        try reset()
        let state = { try self.removalState([service, twice]) }
        let handedOver: [[String]] = [
            ["rm", service, "absent"], ["rm", service + ".absent", "token"], ["rm", twice, "token"],
            ["rm", "--group", group, service, "token"], ["rm", "--from", String(getuid()), service, "token"],
            ["rm", service, "a/b"], ["rm", "", "token"], ["rm", service, "token", "extra"], ["rm", "-y", service, "token"],
        ]
        for arguments in handedOver {
            let (_, after) = try assertSame(arguments.map { Array($0.utf8) }, served: false, environment: withoutVault, reset: reset, state: state)
            if arguments == ["rm", twice, "token"] { XCTAssertFalse(after[1].contains("token@"), "both copies removed: \(after)") }
        }
        // A keyring whose mask kc repairs.
        let ring = { try XCTUnwrap(try self.sessionKeyring.search(type: "keyring", description: KeyName("kc:") + KeyName(service))) }
        let kcMask = try ring().describe().permissions
        try assertSame(words("rm", service, "token"), served: false, environment: withoutVault,
                       reset: { try reset(); try ring().setPermissions(KeyPermissions(rawValue: kcMask.rawValue | 0x3f00_0000)) },
                       state: state)
    }

    // MARK: A miss without a vault

    /// An environment whose vault folder does not exist: a miss in the kernel is final.
    private var withoutVault: [String: String] { environment(["XDG_DATA_HOME": folder + "/no-vault"]) }

    /// A service with an item at every level, so a miss probes every anchor's keyrings.
    private func serviceAtEveryLevel() throws -> String {
        let service = uniqueService("front-levels")
        let keychain = try Keychain(service: service)
        try keychain.set("v", forKey: "token")
        try keychain.accessibility(.afterFirstUnlock).set("afu", forKey: "deep")
        try keychain.accessibility(.always).set("al", forKey: "kept")
        try keychain.accessibility(.whenUnlockedThisDeviceOnly).set("local", forKey: "here")
        return service
    }

    func testAMissWithoutAVaultIsServedWithTheFullKcsMessage() throws {
        let service = try serviceAtEveryLevel(), absent = service + ".absent"
        let state = { try ServiceState(service) }
        for arguments in [["get", service, "missing"], ["get", "-q", service, "missing"], ["get", service, "missing", "--quiet"],
                          ["get", "--quiet", "--", absent, "missing"], ["get", "--", service, "-q"], ["get", absent, "token"]] {
            let (result, _) = try assertSame(arguments.map { Array($0.utf8) }, served: true, environment: withoutVault, state: state)
            XCTAssertEqual(result.status, 1, "\(arguments): \(result)")
            XCTAssertEqual(result.standardOutput, [], "\(arguments)")
        }
        let (said, _) = try assertSame(words("get", service, "missing"), served: true, environment: withoutVault, state: state)
        XCTAssertEqual(said.standardError, "kc: no item 'missing' in service '\(service)'; list the items with 'kc ls \(service)'\n")
        let (quiet, _) = try assertSame(words("get", "-q", service, "missing"), served: true, environment: withoutVault, state: state)
        XCTAssertEqual(quiet.standardError, "")
        // Found through HOME too, when XDG_DATA_HOME is not set.
        let home = folder + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        var homeOnly = environment(["HOME": home])
        homeOnly["XDG_DATA_HOME"] = nil
        try assertSame(words("get", "-q", service, "missing"), served: true, environment: homeOnly, state: state)
    }

    func testAMissIsTheFullKcsWhereAVaultMayHoldIt() throws {
        let service = try serviceAtEveryLevel()
        let state = { try ServiceState(service) }
        // A folder where the vault would be (not a vault yet, to the full kc): the full kc's to tell.
        let data = folder + "/data"
        try FileManager.default.createDirectory(atPath: data + "/kc", withIntermediateDirectories: true)
        try assertSame(words("get", service, "missing"), served: false, environment: environment(["XDG_DATA_HOME": data]), state: state)
        // A file or a link there: the same.
        let linked = folder + "/linked"
        try FileManager.default.createDirectory(atPath: linked, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: linked + "/kc", withDestinationPath: folder + "/nowhere")
        try assertSame(words("get", service, "missing"), served: false, environment: environment(["XDG_DATA_HOME": linked]), state: state)
        // No XDG_DATA_HOME, and a HOME that is another user's: the full kc looks the home up.
        // (As root a folder given to nobody; as an ordinary user, root's own "/".)
        var others = "/"
        if getuid() == 0 {
            others = folder + "/others"
            try FileManager.default.createDirectory(atPath: others, withIntermediateDirectories: true)
            XCTAssertEqual(chown(others, 65534, 65534), 0)
        }
        var elsewhere = environment(["HOME": others])
        elsewhere["XDG_DATA_HOME"] = nil
        try assertSame(words("get", "-q", service, "missing"), served: false, environment: elsewhere, state: state)
        var homeless = environment()
        homeless["XDG_DATA_HOME"] = nil
        homeless["HOME"] = nil
        try assertSame(words("get", "-q", service, "missing"), served: false, environment: homeless, state: state)
    }

    /// A keyring at another level whose mask kc repairs: the full kc repairs it on the way.
    func testAMissPastAKeyringWhoseMaskKcRepairsIsHandedOver() throws {
        let service = try serviceAtEveryLevel()
        let ring = try XCTUnwrap(try SpecialKeyring.user.serial.search(type: "keyring", description: KeyName("kc:") + KeyName(service)))
        let kcMask = try ring.describe().permissions
        let possessorAll = KeyPermissions(rawValue: kcMask.rawValue | 0x3f00_0000)
        let (result, after) = try assertSame(words("get", "-q", service, "missing"), served: false, environment: withoutVault,
                                             reset: { try ring.setPermissions(possessorAll) }, state: { try ServiceState(service) })
        XCTAssertEqual(result.status, 1, "\(result)")
        XCTAssertEqual(after.masks.last, kcMask.rawValue, "repaired by the full kc")
    }

    // MARK: kc ls SERVICE without a vault

    func testAListingWithoutAVaultIsServedExactlyAsTheFullKcPrintsIt() throws {
        let service = try serviceAtEveryLevel(), absent = service + ".absent"
        let keychain = try Keychain(service: service)
        let names: [[UInt8]] = [Array("b".utf8), Array("a".utf8), Array("B".utf8), Array("é".utf8), [0x61, 0xff], Array("line\nbreak".utf8),
                                Array("sp ace".utf8), Array("back\\slash".utf8), Array("-q".utf8)]
        for name in names { try keychain.set("v", forKey: KeyName(bytes: name)) }
        // A keyring inside the service keyring is not an item.
        let home = try XCTUnwrap(try sessionKeyring.search(type: "keyring", description: KeyName("kc:") + KeyName(service)))
        let nested = try KeySerial.add(type: "keyring", description: KeyName("nested"), payload: nil, into: home)
        try nested.setPermissions(.ownerOnly)
        let state = { try ServiceState(service) }
        let all: [[UInt8]] = names + ["deep", "here", "kept", "token"].map { Array($0.utf8) }
        let expected: [UInt8] = all.sorted { $0.lexicographicallyPrecedes($1) }.flatMap { $0 + [0x0a] }
        for spelling in [words("ls", service), words("ls", "--", service), words("ls", service, "--")] {
            let (result, _) = try assertSame(spelling, served: true, environment: withoutVault, state: state)
            XCTAssertEqual(result.status, 0, "\(result)")
            XCTAssertEqual(result.standardOutput, expected, "sorted by bytes, exact")
            XCTAssertEqual(result.standardError, "")
        }
        let missing = try assertSame(words("ls", absent), served: true, environment: withoutVault, state: state)
        XCTAssertEqual(missing.result.status, 1)
        XCTAssertEqual(missing.result.standardError, "kc: no service '\(absent)'; list the services with 'kc ls'\n")
        let closed = try assertSame(words("ls", service), served: true, environment: withoutVault, redirections: ">&-", state: state)
        XCTAssertEqual(closed.result.status, 2, "\(closed.result)")
        XCTAssertEqual(closed.result.standardError, "kc: cannot write to standard output: Bad file descriptor\n")
        // A vault folder, or flags: the full kc's.
        let data = folder + "/data"
        try FileManager.default.createDirectory(atPath: data + "/kc", withIntermediateDirectories: true)
        try assertSame(words("ls", service), served: false, environment: environment(["XDG_DATA_HOME": data]), state: state)
    }

    func testAnEmptyServiceIsListedAsEmptyAndANonUTF8OneNamedAsTheFullKcNamesIt() throws {
        let service = uniqueService()
        let ring = try KeySerial.add(type: "keyring", description: KeyName("kc:") + KeyName(service), payload: nil, into: sessionKeyring)
        try ring.setPermissions(.ownerOnly)
        let (empty, _) = try assertSame(words("ls", service), served: true, environment: withoutVault, state: { try ServiceState(service) })
        XCTAssertEqual(empty.status, 0, "\(empty)")
        XCTAssertEqual(empty.standardOutput, [])
        let odd = uniqueServiceName(endingWith: [0xfe, 0x0a])
        let (missing, _) = try assertSame([Array("ls".utf8), odd.bytes], served: true, environment: withoutVault, state: { try ServiceState(odd) })
        XCTAssertEqual(missing.status, 1, "\(missing)")
    }

    /// At a terminal the full kc escapes a name that could fake a line or send escapes:
    /// a listing with such a name is its own; one without is the front's, byte for byte.
    func testATerminalGetsTheSameListingFromBoth() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("v", forKey: "plain")
        try keychain.set("v", forKey: "with space")
        let plain = try PseudoTerminal.run(loneFront, ["ls", service], environment: withoutVault)
        XCTAssertEqual(plain.output, "plain\r\nwith space\r\n", "served by the front alone: \(plain)")
        XCTAssertEqual(plain.output, try PseudoTerminal.run(builtFullKC, ["ls", service], environment: withoutVault).output)
        try keychain.set("v", forKey: "tab\there")
        let escaped = try PseudoTerminal.run(loneFront, ["ls", service], environment: withoutVault)
        XCTAssertTrue(escaped.output.contains("cannot run the full kc"), "handed over: \(escaped)")
        let viaFront = try PseudoTerminal.run(try builtFront(), ["ls", service], environment: withoutVault)
        let full = try PseudoTerminal.run(builtFullKC, ["ls", service], environment: withoutVault)
        XCTAssertEqual(viaFront.output, full.output)
        XCTAssertEqual(full.output, "plain\r\ntab\\x09here\r\nwith space\r\n")
    }
}

/// The vault's cases: the kernel is where values are read from, so a hit is the front's
/// whatever the vault's state; a miss is the full kc's, which loads the item from an
/// unlocked vault or says that a locked one holds it.
final class FrontVaultTests: VaultTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = try folderWithTheFrontAlone(for: self)
    }

    private func assertSame(_ vault: VaultFixture, _ arguments: [String], service: String, served: Bool, input: [UInt8] = [],
                            comparesVault: Bool = true, reset: () throws -> Void = {}, file: StaticString = #filePath, line: UInt = #line) throws -> CommandResult {
        let front = try builtFront()
        try reset()
        let alone = try runCommand(folder + "/kc-front", arguments, input: input, environment: vault.environment)
        XCTAssertEqual(!alone.standardError.contains("kc: cannot run the full kc, "), served,
                       "\(arguments) should be \(served ? "served by the front" : "handed to the full kc"): \(alone)", file: file, line: line)
        try reset()
        let viaFront = try runCommand(front, arguments, input: input, environment: vault.environment)
        let frontState = try Keychain(service: service).items().map { "\($0.name)@\($0.accessibility?.name ?? "-")" }
        let frontVault = try vault.digest()
        try reset()
        let viaFull = try runCommand(builtFullKC, arguments, input: input, environment: vault.environment)
        let fullState = try Keychain(service: service).items().map { "\($0.name)@\($0.accessibility?.name ?? "-")" }
        XCTAssertEqual(viaFront.status, viaFull.status, "\(arguments): \(viaFront) vs \(viaFull)", file: file, line: line)
        XCTAssertEqual(viaFront.standardOutput, viaFull.standardOutput, "\(arguments)", file: file, line: line)
        XCTAssertEqual(viaFront.standardError, viaFull.standardError, "\(arguments)", file: file, line: line)
        XCTAssertEqual(frontState, fullState, "the kernel after \(arguments)", file: file, line: line)
        // A save encrypts afresh (a new file key each time): then only what it holds compares.
        if comparesVault { XCTAssertEqual(frontVault, try vault.digest(), "the vault after \(arguments)", file: file, line: line) }
        return viaFront
    }

    func testALockedVaultAndAVaultThatReloadsAreTheFullKcsAndAHitIsTheFronts() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "v").status, 0)
        XCTAssertEqual(try vault.unlock().result.status, 0)

        let hit = try assertSame(vault, ["get", service, "token"], service: service, served: true)
        XCTAssertEqual(hit.output, "v", "\(hit)")
        // Unlocked, an item the kernel lost is loaded back by the full kc.
        let reloaded = try assertSame(vault, ["get", "-q", service, "token"], service: service, served: false,
                                      reset: { self.removeServiceKeyrings(KeyName(service)) })
        XCTAssertEqual(reloaded.output, "v", "\(reloaded)")
        // Locked, a miss says so, even with -q.
        XCTAssertEqual(try vault.lock().status, 0)
        let locked = try assertSame(vault, ["get", "-q", service, "token"], service: service, served: false)
        XCTAssertEqual(locked.status, 1, "\(locked)")
        XCTAssertTrue(locked.standardError.contains("the vault holds it but is locked; run 'kc unlock'"), "\(locked)")
    }

    /// With a vault, a set journals the value: the full kc's, locked or not, and it
    /// stores the value the front read.
    func testASetWithAVaultIsTheFullKcsWithTheSameValue() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "v").status, 0)
        XCTAssertEqual(try vault.unlock().result.status, 0)
        let stored = try assertSame(vault, ["set", service, "token"], service: service, served: false, input: Array("new".utf8),
                                    comparesVault: false)
        XCTAssertEqual(stored.status, 0, "\(stored)")
        // Saved: the kernel's copy gone, the vault brings the new value back.
        removeServiceKeyrings(KeyName(service))
        XCTAssertEqual(try runCommand(builtFullKC, ["get", service, "token"], environment: vault.environment).output, "new")
        XCTAssertEqual(try vault.lock().status, 0)
        _ = try assertSame(vault, ["set", service, "token"], service: service, served: false, input: Array("newer".utf8),
                           comparesVault: false)
    }

    /// A listing with a vault loads what the kernel lacks first (unlocked): the full kc's.
    func testAListingWithAVaultIsTheFullKcs() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "v").status, 0)
        XCTAssertEqual(try vault.unlock().result.status, 0)
        let listed = try assertSame(vault, ["ls", service], service: service, served: false,
                                    reset: { self.removeServiceKeyrings(KeyName(service)) })
        XCTAssertEqual(listed.output, "token\n", "\(listed)")
        XCTAssertEqual(try vault.lock().status, 0)
        let locked = try assertSame(vault, ["ls", service], service: service, served: false)
        XCTAssertEqual(locked.status, 0, "\(locked)")
    }
}

/// A new folder of `test`'s holding a copy of the front and no `kc-full`: the copy serves
/// what the front serves and says it cannot run the full kc for everything else. It is
/// removed when the test ends.
private func folderWithTheFrontAlone(for test: XCTestCase) throws -> String {
    let front = try builtFront()
    let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("kc-test-front-\(getpid())-\(test.name.filter(\.isLetter).suffix(30))").path
    try? FileManager.default.removeItem(atPath: folder)
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(atPath: folder) }
    try FileManager.default.copyItem(atPath: front, toPath: folder + "/kc-front")
    return folder
}

/// The front Tools/build-front.sh built beside the full kc, with `kc-full` linked to it;
/// skips the test where there is none.
private func builtFront() throws -> String {
    let folder = URL(fileURLWithPath: builtFullKC).deletingLastPathComponent().path
    let front = folder + "/kc-front"
    guard FileManager.default.isExecutableFile(atPath: front) else {
        throw XCTSkip("the front was not built (bash Tools/build-front.sh; it needs a Swift toolchain with Embedded Swift)")
    }
    guard FileManager.default.isExecutableFile(atPath: folder + "/kc-full") else {
        throw XCTSkip("no kc-full beside the front (bash Tools/build-front.sh links it)")
    }
    return front
}

// MARK: kc exec

extension FrontTests {
    /// `kc exec --env` of one's own services: the front becomes the command with the same
    /// environment the full kc gives the command it runs (every level's items, variables
    /// set over inherited ones of the same name, in the full kc's order), the same exit
    /// status, the same death by a signal, and the same message for a command that is not
    /// there. (`_` is the program bash ran, which differs by path; it is left out.)
    func testExecOfOwnServicesIsServedAndRunsTheCommandAsTheFullKcRunsIt() throws {
        let service = try serviceAtEveryLevel(), other = uniqueService("front-exec-other")
        try Keychain(service: other).set("pw 1", forKey: "db.password")
        try Keychain(service: other).set("n", forKey: "1st")
        let state = { [try ServiceState(service), try ServiceState(other)] }
        let printed = "env | grep -v '^_='"
        var inherited = withoutVault
        inherited["TOKEN"] = "inherited"
        inherited["DB_PASSWORD"] = "inherited too"
        for arguments in [words("exec", "--service", service, "--env", "--", "sh", "-c", printed),
                          words("exec", "--env", "--service", service, "--service", other, "--service", service, "--", "/bin/sh", "-c", printed)] {
            let (result, _) = try assertSame(arguments, served: true, environment: inherited, state: state)
            XCTAssertEqual(result.status, 0, "\(result)")
            let lines = String(decoding: result.standardOutput, as: UTF8.self).split(separator: "\n")
            XCTAssertTrue(lines.contains("TOKEN=v") && lines.contains("DEEP=afu") && lines.contains("KEPT=al") && lines.contains("HERE=local"),
                          "every level's items: \(lines)")
            XCTAssertFalse(lines.contains("TOKEN=inherited"), "an item's variable replaces the inherited one")
        }
        let (both, _) = try assertSame(words("exec", "--env", "--service", service, "--service", other, "--", "sh", "-c", printed),
                                       served: true, environment: inherited, state: state)
        let lines = String(decoding: both.standardOutput, as: UTF8.self).split(separator: "\n")
        XCTAssertTrue(lines.contains("DB_PASSWORD=pw 1") && lines.contains("_1ST=n"), "\(lines)")
        // The command's end is kc's.
        let (exited, _) = try assertSame(words("exec", "--service", service, "--env", "--", "sh", "-c", "exit 7"),
                                         served: true, environment: withoutVault, state: state)
        XCTAssertEqual(exited.status, 7)
        let (killed, _) = try assertSame(words("exec", "--service", service, "--env", "--", "sh", "-c", "kill -TERM $$"),
                                         served: true, environment: withoutVault, state: state)
        XCTAssertNotEqual(killed.status, 0)
        // A signal the caller ignores reaches the command at its default action, as the
        // full kc's spawn sets it.
        let (interrupted, _) = try assertSame(words("exec", "--service", service, "--env", "--", "sh", "-c", "kill -INT $$; echo survived"),
                                              served: true, environment: withoutVault, prefix: "trap '' INT; exec", state: state)
        XCTAssertEqual(interrupted.standardOutput, [], "\(interrupted)")
        let (missing, _) = try assertSame(words("exec", "--service", service, "--env", "--", "kc-no-such-command-\(getpid())"),
                                          served: true, environment: withoutVault, state: state)
        XCTAssertEqual(missing.status, 127)
        XCTAssertEqual(missing.standardError, "kc: cannot run 'kc-no-such-command-\(getpid())': No such file or directory\n")
    }

    /// What the full kc refuses with a message or reads otherwise is handed over before
    /// anything changed, and it says and does what it always did.
    func testEveryOtherExecIsTheFullKcs() throws {
        let service = uniqueService("front-exec-refused"), absent = service + ".absent"
        let keychain = try Keychain(service: service)
        try keychain.set("v", forKey: "token")
        let state = { try ServiceState(service) }
        let command = ["--", "sh", "-c", "env | grep -v '^_=' | grep -c ."]
        for spelling in [["exec", "--service", absent, "--env"], ["exec", "--service", service, "--files"],
                         ["exec", "--service", service, "--env", "--files"], ["exec", "--service", service, "--var", "TOKEN"],
                         ["exec", "--service", service, "--env", "--allow-env", "PATH"], ["exec", "--service=\(service)", "--env"],
                         ["exec", "--service", service, "--env", "--group", "root"]] {
            try assertSame((spelling + command).map { Array($0.utf8) }, served: false, environment: withoutVault, state: state)
        }
        // With a vault the full kc may load items first.
        try FileManager.default.createDirectory(atPath: folder + "/data/kc", withIntermediateDirectories: true)
        try assertSame(words("exec", "--service", service, "--env", "--", "true"), served: false,
                       environment: environment(["XDG_DATA_HOME": folder + "/data"]), state: state)
        // Items the full kc refuses to make variables of, or names otherwise.
        for (name, value) in [("ld.preload", Array("x".utf8)), ("TOKEN", Array("clash".utf8)), ("nul", [0x61, 0, 0x62]),
                              ("caf\u{e9}", Array("é".utf8))] {
            try keychain.set(Data(value), forKey: name)
            defer { try? keychain.remove(name) }
            let (result, _) = try assertSame(words("exec", "--service", service, "--env", "--", "true"), served: name == "caf\u{e9}",
                                             environment: withoutVault, state: state)
            XCTAssertEqual(result.status, name == "caf\u{e9}" ? 0 : 2, "\(name): \(result)")
        }
        let odd = try Keychain(service: service)
        try odd.set("v", forKey: KeyName(bytes: [0x61, 0xff]))
        try assertSame(words("exec", "--service", service, "--env", "--", "true"), served: false, environment: withoutVault, state: state)
    }
}
