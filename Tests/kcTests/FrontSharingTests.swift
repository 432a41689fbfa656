import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// kc's front serves `kc get [-q] --group GROUP SERVICE ITEM` (Front/Shared.swift,
/// docs/FRONT.md): a member of GROUP reading the item another user shares with it, and
/// the caller's own read with --group; everything it cannot be sure of goes to the full
/// kc. As FrontTests do, each case runs the front and the full kc on the same argv, here
/// as real users (`kc-test` owns and shares, `kc-test-member` is in the group,
/// `kc-test-outsider` is not, `kc-test-owner2` shares a service of the same name), and
/// asserts the same standard output, standard error, exit status and the owner's
/// service afterwards; a copy of the front with no `kc-full` beside it tells which path
/// the front took. Each run has a fresh session keyring with the user keyring linked in
/// (as a login's), and no vault.
final class FrontSharingTests: XCTestCase {
    private let owner = TestAccount.owner, member = TestAccount.member, outsider = TestAccount.outsider
    private let secondOwner = TestAccount.secondOwner
    private let group = TestAccount.shareGroup
    private var services: [[UInt8]] = []
    /// A folder every test user can read: `both/kc` (the front) with `both/kc-full`, and
    /// `alone/kc` (the front with no full kc beside it).
    private var folder = ""
    nonisolated(unsafe) private static var counter = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard KeyringTestCase.syscallsWork else {
            throw XCTSkip("kernel keyring system calls are unavailable here (seccomp or no CONFIG_KEYS)")
        }
        guard getuid() == 0 else { throw XCTSkip("these tests need root to act as their users") }
        guard owner.ensure(), member.ensure(), outsider.ensure(), secondOwner.ensure() else {
            throw XCTSkip("could not create the test users and group (useradd/groupadd/usermod)")
        }
        let built = URL(fileURLWithPath: builtKC).deletingLastPathComponent().path
        guard FileManager.default.isExecutableFile(atPath: built + "/kc-front") else {
            throw XCTSkip("the front was not built (bash Tools/build-front.sh; it needs a Swift toolchain with Embedded Swift)")
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("kc-test-front-shared-\(getpid())").path
        try? FileManager.default.removeItem(atPath: folder)
        for (source, target) in [("kc-front", "both/kc"), ("kc", "both/kc-full"), ("kc-front", "alone/kc")] {
            let path = folder + "/" + target
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            try FileManager.default.copyItem(atPath: built + "/" + source, toPath: path)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder)
    }

    override func tearDownWithError() throws {
        // The services live in the user keyrings, which outlive every process.
        for service in services {
            for account in [owner, member, secondOwner] {
                _ = try? shell(account, """
                    p=$(keyctl get_persistent @s 2>/dev/null)
                    for anchor in $(keyctl id @u) $p; do
                        for prefix in kc: kc.local:; do
                            r=$(keyctl search "$anchor" keyring "${prefix}"\(quoted(service)) 2>/dev/null) && keyctl clear "$r" && keyctl unlink "$r" "$anchor"
                        done
                    done >/dev/null 2>&1; true
                    """)
            }
        }
        services = []
        if !folder.isEmpty { try? FileManager.default.removeItem(atPath: folder) }
        try super.tearDownWithError()
    }

    // MARK: Running as the test users

    private func uniqueService(_ suffix: [UInt8] = []) -> [UInt8] {
        Self.counter += 1
        let name = Array("kc-front-share.\(getpid()).\(Self.counter)".utf8) + suffix
        services.append(name)
        return name
    }

    /// A word for bash, any bytes: `$'\xhh...'`.
    private func quoted(_ word: [UInt8]) -> String {
        "$'" + word.map { String(format: "\\x%02x", $0) }.joined() + "'"
    }

    /// Runs `program` (`kc` the front, `kc-full`, or `alone` for the lone front) with
    /// `arguments` as `account` (see ``shell(_:_:input:)``), after `environment`.
    private func run(_ account: TestAccount, _ program: String, _ arguments: [[UInt8]], input: [UInt8] = [],
                     environment: String = "", redirections: String = "", asRootFirst: String = "") throws -> CommandResult {
        let path = program == "alone" ? "\(folder)/alone/kc" : "\(folder)/both/\(program)"
        return try shell(account, "\(environment) exec \(path) \(arguments.map(quoted).joined(separator: " ")) \(redirections)",
                         input: input, asRootFirst: asRootFirst)
    }

    /// Runs a bash `script` as `account`, in a fresh session keyring with the user
    /// keyring linked in, without a vault and without KC_AUDIT.
    /// With `asRootFirst`, that bash script runs first as root in a mount namespace of its
    /// own (to bind other files over /etc's for this run alone).
    private func shell(_ account: TestAccount, _ script: String, input: [UInt8] = [], asRootFirst: String = "") throws -> CommandResult {
        let inner = """
            exec 2>&3 3>&-; keyctl link @u @s >/dev/null; XDG_DATA_HOME=/proc/kc-test-no-vault; export XDG_DATA_HOME; unset KC_AUDIT; cd /
            \(script)
            """
        // keyctl's "Joined session keyring" line goes nowhere; the script gets standard error back.
        let outer = "exec 3>&2 2>/dev/null; exec keyctl session - /bin/bash -c \"$1\" kc-test"
        let asAccount = ["/usr/sbin/runuser", "-u", account.name, "--", "/bin/bash", "-c", outer, "outer", inner]
        guard !asRootFirst.isEmpty else { return try runCommand(asAccount[0], Array(asAccount.dropFirst()), input: input) }
        return try runCommand("/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/bash", "-c",
                                                   "set -e\n\(asRootFirst)\nexec \"$@\"", "root"] + asAccount, input: input)
    }

    /// The owner's view of `service`: its listing with serials and sharing.
    private func ownerState(_ service: [UInt8], of account: TestAccount? = nil) throws -> String {
        let listed = try run(account ?? owner, "kc-full", [Array("ls".utf8), Array("--json".utf8), service])
        return "\(listed.status) \(listed.output) \(listed.standardError)"
    }

    /// Runs `arguments` as `account` through the front and through the full kc and
    /// asserts the front took the path `served` says and both printed, exited and left
    /// the owner's service alike. Returns the front's run.
    @discardableResult
    private func assertSame(_ account: TestAccount, _ arguments: [[UInt8]], served expected: Bool, service: [UInt8],
                            environment: String = "", redirections: String = "", asRootFirst: String = "",
                            file: StaticString = #filePath, line: UInt = #line) throws -> CommandResult {
        let shown = arguments.map { String(decoding: $0, as: UTF8.self).debugDescription }.joined(separator: " ")
        let alone = try run(account, "alone", arguments, environment: environment,
                            redirections: redirections.contains(">&-") ? "" : redirections, asRootFirst: asRootFirst)
        XCTAssertEqual(!alone.standardError.contains("kc: cannot run the full kc, "), expected,
                       "kc \(shown) as \(account.name) should be \(expected ? "served by the front" : "handed to the full kc"): \(alone)",
                       file: file, line: line)
        let before = try ownerState(service)
        let front = try run(account, "kc", arguments, environment: environment, redirections: redirections, asRootFirst: asRootFirst)
        let afterFront = try ownerState(service)
        let full = try run(account, "kc-full", arguments, environment: environment, redirections: redirections, asRootFirst: asRootFirst)
        let afterFull = try ownerState(service)
        XCTAssertEqual(front.status, full.status, "exit status of kc \(shown): \(front) vs \(full)", file: file, line: line)
        XCTAssertEqual(front.standardOutput, full.standardOutput, "standard output of kc \(shown)", file: file, line: line)
        XCTAssertEqual(front.standardError, full.standardError, "standard error of kc \(shown)", file: file, line: line)
        XCTAssertEqual(before, afterFront, "the owner's service after the front's kc \(shown)", file: file, line: line)
        XCTAssertEqual(afterFront, afterFull, "the owner's service after the full kc's kc \(shown)", file: file, line: line)
        return front
    }

    /// `account` stores `value` as `item` of `service` at after-first-unlock, shared with
    /// the group (or private with `shared: false`).
    private func store(_ account: TestAccount, _ service: [UInt8], _ item: [UInt8], _ value: [UInt8], shared: Bool = true) throws {
        let options = shared ? ["--group", group] : []
        let stored = try run(account, "kc-full", [Array("set".utf8)] + options.map { Array($0.utf8) }
                                 + [Array("--access".utf8), Array("after-first-unlock".utf8), service, item], input: value)
        XCTAssertEqual(stored.status, 0, "\(stored)")
    }

    private func words(_ texts: String...) -> [[UInt8]] { texts.map { Array($0.utf8) } }

    private var groupID: String {
        ((try? runCommand("/usr/bin/getent", ["group", group]))?.output ?? "").split(separator: ":").dropFirst(2).first.map(String.init) ?? ""
    }

    // MARK: What the front serves

    func testAMemberReadsTheOwnersSharedItemFromTheFrontByteForByte() throws {
        let service = uniqueService()
        let values: [(name: String, value: [UInt8])] = [
            ("token", Array("s3cret".utf8)),
            ("line", Array("ends in a newline\n".utf8)),
            ("bytes", [0, 0xff, 0x0a, 0x80, 0]),
            // Over a page (the full kc reads twice), within a test user's 20,000-byte quota.
            ("large", (0..<9000).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
        ]
        for (name, value) in values { try store(owner, service, Array(name.utf8), value) }
        let s = String(decoding: service, as: UTF8.self)
        for (name, value) in values {
            for spelling in [words("get", "--group", group, s, name), words("get", "-q", "--group", group, s, name),
                             words("get", "--group", group, "--quiet", "--", s, name), words("get", s, name, "--group", group)] {
                let result = try assertSame(member, spelling, served: true, service: service)
                XCTAssertEqual(result.status, 0, "\(result)")
                XCTAssertTrue(result.standardOutput == value, "\(name): the exact bytes, nothing added (\(result.standardOutput.count) bytes)")
                XCTAssertEqual(result.standardError, "")
            }
        }
    }

    func testTheCallersOwnServiceWinsWithGroupAndIsServedAtHome() throws {
        let service = uniqueService()
        try store(owner, service, Array("token".utf8), Array("the owner's".utf8))
        let s = String(decoding: service, as: UTF8.self)
        // The owner's own read with --group.
        let own = try assertSame(owner, words("get", "--group", group, s, "token"), served: true, service: service)
        XCTAssertEqual(own.output, "the owner's")
        // A member with a service of the same name reads its own, not the shared one.
        try store(member, service, Array("token".utf8), Array("the member's".utf8), shared: false)
        let mine = try assertSame(member, words("get", "--group", group, s, "token"), served: true, service: service)
        XCTAssertEqual(mine.output, "the member's")
        // Its own service without the item: the full kc's miss, which names --group.
        for quiet in [[], ["-q"]] {
            let missing = try assertSame(member, words("get") + quiet.map { Array($0.utf8) } + words("--group", group, s, "absent"),
                                         served: false, service: service)
            XCTAssertEqual(missing.status, 1)
        }
    }

    // MARK: What the front hands to the full kc

    func testWhatTheFrontCannotBeSureOfIsTheFullKcsBeforeAnythingChanged() throws {
        let service = uniqueService()
        try store(owner, service, Array("token".utf8), Array("s3cret".utf8))
        let s = String(decoding: service, as: UTF8.self)
        let handedOver: [(TestAccount, [String])] = [
            // Misses, with and without -q, and an unshared name.
            (member, ["get", "--group", group, s, "absent"]), (member, ["get", "-q", "--group", group, s, "absent"]),
            (member, ["get", "--group", group, s + ".unshared", "token"]),
            (member, ["get", "-q", "--group", group, s + ".unshared", "token"]),
            // A group that does not exist, one given by number (the full kc takes a gid), one the caller is not in.
            (member, ["get", "--group", "kc-test-no-such-group", s, "token"]), (member, ["get", "--group", groupID, s, "token"]),
            (member, ["get", "--group", "99999", s, "token"]), (member, ["get", "--group", owner.name, s, "token"]),
            (outsider, ["get", "--group", group, s, "token"]), (outsider, ["get", "-q", "--group", group, s, "absent"]),
            // --from: a miss, a uid given as a number, a user that does not exist, one who shares nothing, the caller itself.
            (member, ["get", "--from", owner.name, s, "absent"]), (member, ["get", "-q", "--from", owner.name, s, "absent"]),
            (member, ["get", "--from", owner.uid, s, "token"]), (member, ["get", "--from", "kc-test-no-such-user", s, "token"]),
            (member, ["get", "--from", outsider.name, s, "token"]), (member, ["get", "--from", member.name, s, "token"]),
            (outsider, ["get", "--from", owner.name, s, "token"]),
            // Other spellings: both options, the parser's.
            (member, ["get", "--group=\(group)", s, "token"]), (member, ["get", "--from=\(owner.name)", s, "token"]),
            (member, ["get", "--group", group, "--from", owner.name, s, "token"]), (member, ["get", "--group", group, "--group", group, s, "token"]),
            (member, ["get", "--from", owner.name, "--from", owner.name, s, "token"]), (member, ["get", "--from", "-x", s, "token"]),
            (member, ["get", "--group", "-x", s, "token"]), (member, ["get", "--group", group, s]), (member, ["get", "--group"]),
            // Names the full kc refuses.
            (member, ["get", "--group", group, s, ""]), (member, ["get", "--group", group, s, "a/b"]), (member, ["get", "--group", group, "..", "token"]),
        ]
        for (account, arguments) in handedOver {
            try assertSame(account, arguments.map { Array($0.utf8) }, served: false, service: service)
        }
    }

    func testTwoOwnersSharingOneNameAreTheFullKcsToReport() throws {
        let service = uniqueService()
        try store(owner, service, Array("token".utf8), Array("first".utf8))
        try store(secondOwner, service, Array("token".utf8), Array("second".utf8))
        let s = String(decoding: service, as: UTF8.self)
        for quiet in [[], ["-q"]] {
            let result = try assertSame(member, words("get") + quiet.map { Array($0.utf8) } + words("--group", group, s, "token"),
                                        served: false, service: service)
            XCTAssertTrue(result.standardError.contains("is shared with you by several users"), "\(result)")
            XCTAssertEqual(result.standardOutput, [])
        }
        // Naming the owner picks one.
        for (account, value) in [(owner, "first"), (secondOwner, "second")] {
            let picked = try assertSame(member, words("get", "--from", account.name, s, "token"), served: true, service: service)
            XCTAssertEqual(picked.output, value)
        }
    }

    func testAMemberReadsWhatANamedOwnerSharesFromTheFront() throws {
        let service = uniqueService()
        try store(owner, service, Array("token".utf8), [0, 0xff, 0x0a, 0x80])
        let s = String(decoding: service, as: UTF8.self)
        for spelling in [words("get", "--from", owner.name, s, "token"), words("get", "-q", "--from", owner.name, s, "token"),
                         words("get", s, "--from", owner.name, "--", "token")] {
            let result = try assertSame(member, spelling, served: true, service: service)
            XCTAssertEqual(result.standardOutput, [0, 0xff, 0x0a, 0x80])
            XCTAssertEqual(result.standardError, "")
        }
        // --from naming the caller itself reads its own service, as a plain get.
        let own = try assertSame(owner, words("get", "--from", owner.name, s, "token"), served: true, service: service)
        XCTAssertEqual(own.standardOutput, [0, 0xff, 0x0a, 0x80])
        // A service of the member's own of that name does not stand in the way of a named owner's.
        try store(member, service, Array("token".utf8), Array("the member's".utf8), shared: false)
        let named = try assertSame(member, words("get", "--from", owner.name, s, "token"), served: true, service: service)
        XCTAssertEqual(named.standardOutput, [0, 0xff, 0x0a, 0x80])
    }

    func testNamesThatAreNotUTF8AreTheFullKcsAndAnsweredAlike() throws {
        // /proc/keys, which the member reads, then shows bytes Swift text would change.
        let service = uniqueService([0xff, 0x41])
        try store(owner, service, [0x80, 0x74], Array("odd item".utf8))
        try store(owner, service, Array("token".utf8), Array("plain item".utf8))
        for item in [[0x80, 0x74], Array("token".utf8), [0xc3]] as [[UInt8]] {
            try assertSame(member, words("get", "--group", group) + [service, item], served: false, service: service)
        }
        let plain = uniqueService()
        try store(owner, plain, [0xe2, 0x82], Array("odd".utf8))
        try assertSame(member, words("get", "--group", group) + [plain, [0xe2, 0x82]], served: false, service: plain)
    }

    func testTheReadAuditAVaultAndAClosedOutputAreAnsweredAsTheFullKcAnswers() throws {
        let service = uniqueService()
        try store(owner, service, Array("token".utf8), Array("s3cret".utf8))
        let arguments = words("get", "--group", group, String(decoding: service, as: UTF8.self), "token")
        for value in ["1", "0", ""] {
            let audited = try assertSame(member, arguments, served: false, service: service, environment: "export KC_AUDIT=\(value);")
            XCTAssertEqual(audited.output, "s3cret")
        }
        // Something where the vault would be: the full kc decides.
        try FileManager.default.createDirectory(atPath: folder + "/data/kc", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let vaulted = try assertSame(member, arguments, served: false, service: service,
                                     environment: "XDG_DATA_HOME=\(folder)/data; export XDG_DATA_HOME;")
        XCTAssertEqual(vaulted.status, 0, "\(vaulted)")
        // A closed standard output: the front's own words, the full kc's.
        let closed = try assertSame(member, arguments, served: true, service: service, redirections: ">&-")
        XCTAssertEqual(closed.status, 2)
        XCTAssertEqual(closed.standardError, "kc: cannot write to standard output\n")
    }

    func testAGroupDatabaseTheFrontCannotReadAsTheFullKcDoesIsHandedOver() throws {
        let service = uniqueService()
        try store(owner, service, Array("token".utf8), Array("s3cret".utf8))
        let arguments = words("get", "--group", group, String(decoding: service, as: UTF8.self), "token")
        let groupFile = try String(contentsOfFile: "/etc/group", encoding: .utf8)
        let switchFile = try String(contentsOfFile: "/etc/nsswitch.conf", encoding: .utf8)
        let record = try XCTUnwrap(groupFile.split(separator: "\n").first { $0.hasPrefix(group + ":") })
        let userFile = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
        let user = try XCTUnwrap(userFile.split(separator: "\n").first { $0.hasPrefix(owner.name + ":") })
        let variants: [(file: String, text: String, why: String)] = [
            ("/etc/group", groupFile + record + "\n", "two records of the group"),
            ("/etc/group", "# caf\u{e9}\n" + groupFile, "a byte over 0x7f"),
            ("/etc/nsswitch.conf", switchFile.replacingOccurrences(of: "\ngroup:", with: "\ngroup: systemd"), "files not first for group"),
            ("/etc/nsswitch.conf", switchFile + "group: files\n", "two group lines"),
            ("/etc/passwd", userFile + user + "\n", "two records of the owner"),
            ("/etc/passwd", userFile + "# caf\u{e9}\n", "a byte over 0x7f in passwd"),
            ("/etc/nsswitch.conf", switchFile.replacingOccurrences(of: "\npasswd:", with: "\npasswd: files [NOTFOUND=return]"),
             "an action after files"),
        ]
        // The files as they are: served.
        try assertSame(member, arguments, served: true, service: service)
        try assertSame(member, words("get", "--from", owner.name, String(decoding: service, as: UTF8.self), "token"),
                       served: true, service: service)
        // A line that starts with blanks: glibc passes over them and reads the record, and
        // so does the core's reader in both programs (the static full kc kept the blank as
        // part of the name until they shared it): served, with the full kc's answer.
        let blanks = "\(folder)/etc-blanks"
        try ("  " + groupFile).write(toFile: blanks, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: blanks)
        let blanked = try assertSame(member, arguments, served: true, service: service,
                                     asRootFirst: "mount --bind \(blanks) /etc/group")
        XCTAssertEqual(blanked.output, "s3cret")
        for (index, variant) in variants.enumerated() {
            let fake = "\(folder)/etc-\(index)"
            try variant.text.write(toFile: fake, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: fake)
            let arguments = variant.file == "/etc/group" || variant.why.contains("group")
                ? arguments : words("get", "--from", owner.name, String(decoding: service, as: UTF8.self), "token")
            let result = try assertSame(member, arguments, served: false, service: service,
                                        asRootFirst: "mount --bind \(fake) \(variant.file)")
            XCTAssertEqual(result.output, "s3cret", "\(variant.why): \(result)")
        }
    }
}
