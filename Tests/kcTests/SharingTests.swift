import Foundation
import KCTestSupport
import XCTest

/// Access groups across real users: `kc-test` owns services and shares them with the
/// group `kc-test-share`, which `kc-test-member` is also in; `kc-test-outsider` is not.
/// Each case checks the library (through `kc-keychain-probe`), the CLI, `keyctl` and,
/// where it says so, the mount.
final class SharingTests: XCTestCase {
    private let owner = TestAccount.owner, member = TestAccount.member, outsider = TestAccount.outsider
    private let group = TestAccount.shareGroup
    private var services: [String] = []
    nonisolated(unsafe) private static var counter = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard KeyringTestCase.syscallsWork else {
            throw XCTSkip("kernel keyring system calls are unavailable here (seccomp or no CONFIG_KEYS)")
        }
        guard getuid() == 0 else { throw XCTSkip("the sharing tests need root to create their users and group") }
        guard owner.ensure(), member.ensure(), outsider.ensure() else {
            throw XCTSkip("could not create the test users and group (useradd/groupadd/usermod)")
        }
    }

    override func tearDownWithError() throws {
        // The owner's services live in its user keyring, which outlives every process;
        // a member's or a second owner's write can make a service of the same name too.
        for service in services {
            for account in [owner, member, TestAccount.secondOwner] {
                _ = try? account.run("""
                    p=$(keyctl get_persistent @s 2>/dev/null)
                    for anchor in $(keyctl id @u) $p; do
                        for prefix in kc: kc.local:; do
                            r=$(keyctl search "$anchor" keyring "${prefix}\(service)" 2>/dev/null) && keyctl clear "$r" && keyctl unlink "$r" "$anchor"
                        done
                    done >/dev/null 2>&1; true
                    """)
            }
        }
        services = []
        try super.tearDownWithError()
    }

    private func uniqueService() -> String {
        Self.counter += 1
        let name = "kc-share.\(getpid()).\(Self.counter)"
        services.append(name)
        return name
    }

    /// The owner stores `value` at after-first-unlock, shared with the group; returns
    /// the item's serial.
    private func ownerShares(_ service: String, _ key: String = "token", value: String = "s3cret",
                             writable: Bool = false) throws -> String {
        let flags = writable ? "--group-writable " : ""
        let stored = try owner.run("""
            set -e
            printf '\(value)' | "$KC" set --group \(group) \(flags)--access after-first-unlock \(service) \(key)
            "$KC" ls --json \(service) | tr -d ' \\n'
            """)
        XCTAssertEqual(stored.status, 0, "\(stored)")
        let serial = stored.output.components(separatedBy: "\"serial\":").dropFirst().first?.prefix { $0.isNumber || $0 == "-" }
        return String(serial ?? "")
    }

    func testAMemberReadsWhatTheOwnerSharesAndAnOutsiderCannot() throws {
        let service = uniqueService()
        let serial = try ownerShares(service)
        XCTAssertFalse(serial.isEmpty)

        let asMember = try member.run("""
            "$KC" get --group \(group) \(service) token; echo " cli-group=$?"
            "$KC" get --from \(owner.name) \(service) token; echo " cli-from=$?"
            "$KC" get --group=\(group) \(service) token; echo " parsed-group=$?"
            "$KC" get --from \(owner.name) \(service) missing; echo "missing=$?"
            "$PROBE" get \(service) token --group \(group)
            "$PROBE" get \(service) token --from \(owner.name)
            keyctl print \(serial); echo " keyctl=$?"
            "$KC" ls --shared | grep -x '\(owner.name)/\(service)'
            "$KC" exec --from \(owner.name) --service \(service) --var TOKEN -- sh -c 'echo "exec=$TOKEN"'
            """)
        XCTAssertEqual(asMember.output, """
            s3cret cli-group=0
            s3cret cli-from=0
            s3cret parsed-group=0
            missing=1
            s3cret
            s3cret
            s3cret
             keyctl=0
            \(owner.name)/\(service)
            exec=s3cret

            """, "\(asMember)")

        XCTAssertTrue(asMember.standardError.contains("kc: no item 'missing' in service '\(service)'; list the items with 'kc ls --from \(owner.name) \(service)'"), asMember.standardError)

        let asOutsider = try outsider.run("""
            "$KC" get --from \(owner.name) \(service) token; echo "cli-from=$?"
            "$KC" get --group \(group) \(service) token; echo "cli-group=$?"
            "$PROBE" get \(service) token --from \(owner.name)
            "$PROBE" read-serial \(serial)
            keyctl print \(serial); echo "keyctl=$?"
            "$KC" ls --shared | wc -l
            """)
        let lines = asOutsider.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines[0], "cli-from=2", "\(asOutsider)")
        XCTAssertEqual(lines[1], "cli-group=2")
        XCTAssertTrue(lines[2].hasPrefix("error notShared "), lines[2])
        XCTAssertTrue(lines[3].hasPrefix("error ") && lines[3].contains("Permission denied"), "the kernel refuses the serial: \(lines[3])")
        XCTAssertEqual(lines[4], "keyctl=1")
        XCTAssertEqual(lines[5], "0", "nothing is listed as shared with an outsider")
        XCTAssertTrue(asOutsider.standardError.contains("kc: no service '\(service)' is shared with you by \(owner.name):"), asOutsider.standardError)
        XCTAssertTrue(asOutsider.standardError.contains("kc: you are not in group '\(group)'; ask an administrator to run 'sudo usermod -aG \(group) \(outsider.name)'"), asOutsider.standardError)
        XCTAssertTrue(asOutsider.standardError.contains("keyctl_read_alloc: Permission denied"), asOutsider.standardError)
    }

    func testSharedListingsEscapeATabInANameForPeopleAndKeepItExactForScripts() throws {
        let base = uniqueService()
        let service = base + "\ttab"
        services.append(service)
        let stored = try owner.run("""
            printf v | "$KC" set --group \(group) --access after-first-unlock "$(printf '\(base)\\ttab')" token
            """)
        XCTAssertEqual(stored.status, 0, "\(stored)")
        let listed = try member.run("""
            "$KC" ls --shared --long | grep -F '\(base)'
            "$KC" ls --shared | grep -F '\(base)'
            "$KC" ls --shared --json | grep -c -F '\(base)\\ttab'
            """)
        XCTAssertEqual(listed.output, """
            \(owner.name)/\(base)\\x09tab\t\(group)\tread-only
            \(owner.name)/\(service)
            1

            """, "--long escapes the tab; plain output into a pipe and --json keep the name exact: \(listed)")
    }

    func testAMemberCannotChangeAReadOnlyShareAndCanOnceItIsGroupWritable() throws {
        let service = uniqueService()
        _ = try ownerShares(service)

        let refused = try member.run("""
            printf 'evil' | "$KC" set --from \(owner.name) \(service) token; echo "set=$?"
            "$KC" rm --from \(owner.name) \(service) token; echo "rm=$?"
            printf 'evil' | "$PROBE" set \(service) token --from \(owner.name)
            "$PROBE" rm \(service) token --from \(owner.name)
            """)
        XCTAssertEqual(refused.output, """
            set=2
            rm=2
            error sharedReadOnly '\(service)' is shared by \(owner.name) read-only; ask them to run 'kc share \(service) --group \(group) --group-writable'
            error sharedReadOnly '\(service)' is shared by \(owner.name) read-only; ask them to run 'kc share \(service) --group \(group) --group-writable'

            """, "\(refused)")
        XCTAssertTrue(refused.standardError.contains("kc: '\(service)' is shared by \(owner.name) read-only; ask them to run 'kc share \(service) --group \(group) --group-writable'"), refused.standardError)
        XCTAssertEqual(try owner.run("\"$KC\" get \(service) token").output, "s3cret", "the refused writes changed nothing")

        let shared = try owner.run("\"$KC\" share \(service) --group \(group) --group-writable && \"$KC\" share \(service)")
        XCTAssertEqual(shared.output, "\(service): shared with group \(group) (writable)\n", "\(shared)")

        let changed = try member.run("""
            printf 'r0tate' | "$KC" set --from \(owner.name) \(service) token; echo "set=$?"
            printf 'new' | "$KC" set --from \(owner.name) \(service) brand-new; echo "add=$?"
            printf 'x' | "$KC" set --timeout 1h --from \(owner.name) \(service) token; echo "timeout=$?"
            """)
        XCTAssertEqual(changed.output, "set=0\nadd=2\ntimeout=2\n", "\(changed)")
        XCTAssertTrue(changed.standardError.contains("kc: only \(owner.name), who owns '\(service)', can add items; ask them to do it"), changed.standardError)
        XCTAssertTrue(changed.standardError.contains("can set an item's lifetime"), changed.standardError)
        let ownerView = try owner.run("\"$KC\" get \(service) token; echo; keyctl describe $(keyctl search @u user token 2>/dev/null || true) >/dev/null 2>&1; \"$KC\" ls \(service)")
        XCTAssertEqual(ownerView.output, "r0tate\ntoken\n", "the member's write replaced the value in place and added nothing: \(ownerView)")

        // Removing would take write on the owner's keyring, which would also let the
        // member link keys of its own into it: only the owner removes items.
        let removed = try member.run("\"$KC\" rm --from \(owner.name) \(service) token; echo \"rm=$?\"")
        XCTAssertEqual(removed.output, "rm=2\n", "\(removed)")
        XCTAssertTrue(removed.standardError.contains("kc: only \(owner.name), who owns '\(service)', can remove items; ask them to do it"), removed.standardError)
        XCTAssertEqual(try owner.run("\"$KC\" get \(service) token; echo \" $?\"").output, "r0tate 0\n")
    }

    func testUnshareTakesEffectAtOnce() throws {
        let service = uniqueService()
        let serial = try ownerShares(service)
        XCTAssertEqual(try member.run("\"$KC\" get --group \(group) \(service) token").output, "s3cret")

        let unshared = try owner.run("\"$KC\" unshare \(service) && \"$KC\" share \(service) && keyctl rdescribe \(serial)")
        XCTAssertEqual(unshared.status, 0, "\(unshared)")
        let ownerGID = try XCTUnwrap(try runCommand("/usr/bin/id", ["-g", owner.name]).output.split(separator: "\n").first)
        XCTAssertEqual(unshared.output, "\(service): private\nuser;\(owner.uid);\(ownerGID);003f0000;token\n",
                       "owner-only mask and the owner's own group back")

        let after = try member.run("""
            "$KC" get --group \(group) \(service) token; echo "cli=$?"
            "$PROBE" read-serial \(serial)
            keyctl print \(serial); echo "keyctl=$?"
            "$KC" ls --shared | grep -c -x '\(owner.name)/\(service)'
            """)
        let lines = after.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "cli=2", "\(after)")
        XCTAssertTrue(lines[1].contains("Permission denied"), "a serial learned while shared no longer reads: \(lines[1])")
        XCTAssertEqual(Array(lines.dropFirst(2)), ["keyctl=1", "0"])
        XCTAssertEqual(try owner.run("\"$KC\" get \(service) token").output, "s3cret", "the owner still has it")
    }

    func testItemsThatWereNeverSharedStayPrivate() throws {
        let shared = uniqueService(), privateService = uniqueService()
        let result = try owner.run("""
            set -e
            printf 'private' | "$KC" set --access after-first-unlock \(privateService) secret
            printf 'one' | "$KC" set --access after-first-unlock \(shared) first
            "$KC" share \(shared) --group \(group)
            printf 'two' | "$KC" set --access after-first-unlock \(shared) added-later
            printf 'three' | "$KC" set --access always \(shared) other-level
            "$KC" ls --json \(privateService) | tr -d ' \\n'; echo
            "$KC" ls --json \(shared) | tr -d ' \\n'; echo
            keyctl rdescribe $(keyctl search @u keyring kc:\(privateService))
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        let lines = result.output.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines[0].contains("\"sharedWith\":null"), lines[0])
        XCTAssertEqual(lines[1].components(separatedBy: "\"sharedWith\":\"\(group)\"").count - 1, 3,
                       "the items added after sharing, at any level, joined the sharing: \(lines[1])")
        XCTAssertTrue(lines[2].hasSuffix(";003f0000;kc:\(privateService)"), lines[2])
        let privateSerial = lines[0].components(separatedBy: "\"serial\":").dropFirst().first?.prefix { $0.isNumber } ?? ""

        let asMember = try member.run("""
            "$KC" get --group \(group) \(shared) added-later; echo
            "$KC" get --group \(group) \(shared) other-level; echo
            "$KC" get --group \(group) \(privateService) secret; echo "private=$?"
            keyctl print \(privateSerial); echo "keyctl=$?"
            "$KC" ls --shared | grep -e '\(shared)$' -e '\(privateService)$'
            """)
        XCTAssertEqual(asMember.output, "two\nthree\nprivate=2\nkeyctl=1\n\(owner.name)/\(shared)\n", "\(asMember)")
    }

    func testMountShowsSharedServicesReadOnly() throws {
        try MountFixture.requireFUSE()
        guard UnprivilegedUser.grantFUSEDevice(to: member.name), UnprivilegedUser.grantFUSEDevice(to: outsider.name) else {
            throw XCTSkip("the test users cannot be given /dev/fuse here")
        }
        let service = uniqueService()
        _ = try ownerShares(service, value: "mounted")
        let script = """
            m=$(mktemp -d /tmp/kc-share-mnt.XXXXXX)
            "$KC" mount --shared "$m" || exit 9
            ls "$m/shared"; echo "--"
            ls "$m/shared/\(owner.name)"; echo "--"
            cat "$m/shared/\(owner.name)/\(service)/token"; echo " cat=$?"
            printf x > "$m/shared/\(owner.name)/\(service)/token" 2>&1 && echo "write=0" || echo "write refused"
            rm "$m/shared/\(owner.name)/\(service)/token" 2>&1; echo "rm=$?"
            stat -c %a "$m/shared/\(owner.name)/\(service)/token"
            "$KC" umount "$m"; rmdir "$m"
            """
        let asMember = try member.run(script)
        let lines = asMember.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, owner.name, "\(asMember)")
        XCTAssertTrue(lines.contains(service), "\(asMember)")
        XCTAssertTrue(lines.contains("mounted cat=0"), "\(asMember)")
        XCTAssertTrue(lines.contains("write refused") && lines.contains("rm=1"), "\(asMember)")
        XCTAssertTrue(asMember.output.contains("Read-only file system") || asMember.standardError.contains("Read-only file system"),
                      "writes into shared/ are EROFS: \(asMember)")
        XCTAssertTrue(lines.contains("400"), "\(asMember)")

        let asOutsider = try outsider.run(script)
        XCTAssertEqual(asOutsider.output.split(separator: "\n").first, "--", "an outsider's shared/ is empty: \(asOutsider)")
        XCTAssertTrue(asOutsider.standardError.contains("No such file or directory"), "\(asOutsider)")
        XCTAssertEqual(try owner.run("\"$KC\" get \(service) token").output, "mounted")
    }

    func testAnOutsiderCannotUseAMembersMount() throws {
        try MountFixture.requireFUSE()
        guard UnprivilegedUser.grantFUSEDevice(to: member.name) else { throw XCTSkip("the test user cannot be given /dev/fuse here") }
        let service = uniqueService()
        _ = try ownerShares(service)
        let directory = try MountFixture.makeDirectory(owner: member.name)
        defer { _ = try? member.run("\"$KC\" umount \(directory)"); try? FileManager.default.removeItem(atPath: directory) }
        XCTAssertEqual(try member.run("\"$KC\" mount --shared \(directory)").status, 0)
        try runCommand("/bin/chmod", ["755", directory])
        let tried = try outsider.run("cat \(directory)/shared/\(owner.name)/\(service)/token; echo \"status=$?\"")
        XCTAssertTrue(tried.output.contains("status=1"), "\(tried)")
        XCTAssertTrue(tried.standardError.contains("Permission denied"), "\(tried)")
    }

    func testSharingMistakesAreClearAndHarmNothing() throws {
        let service = uniqueService()
        _ = try ownerShares(service)
        let result = try owner.run("""
            printf 'x' | "$KC" set --group no-such-group-kc \(service) token; echo "unknown-group=$?"
            printf 'x' | "$KC" set --group \(outsider.name) \(service) token; echo "not-member=$?"
            printf 'x' | "$KC" set --group \(owner.name) \(service) token; echo "other-group=$?"
            "$KC" get --from no-such-user-kc \(service) token; echo "unknown-user=$?"
            "$KC" share never-stored-\(service) --group \(group); echo "no-service=$?"
            printf 'x' | "$KC" set --group-writable \(service) token; echo "writable-alone=$?"
            "$KC" get \(service) token
            """)
        XCTAssertEqual(result.output, """
            unknown-group=2
            not-member=2
            other-group=2
            unknown-user=2
            no-service=2
            writable-alone=64
            s3cret
            """, "\(result)")
        for message in [
            "kc: no group named 'no-such-group-kc' on this system; check the name with 'getent group no-such-group-kc'",
            "kc: you are not in group '\(outsider.name)'",
            "kc: '\(service)' is already shared with group '\(group)'; to share it with '\(owner.name)' instead run 'kc share \(service) --group \(owner.name)'",
            "kc: no user named 'no-such-user-kc' on this system",
            "kc: no service 'never-stored-\(service)'; store an item in it first",
            "kc: --group-writable needs --group GROUP",
        ] {
            XCTAssertTrue(result.standardError.contains(message), "missing \(message) in \(result.standardError)")
        }
    }

    func testTwoOwnersSharingOneNameMustBeToldApart() throws {
        let second = TestAccount.secondOwner
        guard second.ensure() else { throw XCTSkip("could not create a second owner") }
        let service = uniqueService()
        _ = try ownerShares(service, value: "from-first")
        defer {
            _ = try? second.run("r=$(keyctl search @u keyring kc:\(service)) && keyctl clear $r && keyctl unlink $r @u")
        }
        // `set --group` writes to the second owner's own service (creating and sharing
        // it), never into the first owner's share of the same name.
        let secondShares = try second.run("""
            printf 'from-second' | "$KC" set --group \(group) --access after-first-unlock \(service) token; echo "set-group=$?"
            """)
        XCTAssertEqual(secondShares.output, "set-group=0\n", "\(secondShares)")

        let result = try member.run("""
            "$KC" get --group \(group) \(service) token; echo "ambiguous=$?"
            "$KC" get --from \(second.name) \(service) token; echo
            "$KC" get --group \(group) --from \(owner.name) \(service) token; echo
            """)
        XCTAssertEqual(result.output, "ambiguous=2\nfrom-second\nfrom-first\n", "\(result)")
        let owners = [owner.name, second.name].sorted().joined(separator: ", ")
        XCTAssertTrue(result.standardError.contains("kc: service '\(service)' is shared with you by several users (\(owners)); pick one with --from USER"), result.standardError)
    }

    func testAServiceSharedFromALoginSessionEndsWithIt() throws {
        let service = uniqueService()
        let ready = "/tmp/kc-share-ready.\(getpid())", stop = "/tmp/kc-share-stop.\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: ready); try? FileManager.default.removeItem(atPath: stop) }
        // The owner's login session: a session keyring kept alive by a waiting process.
        let session = Process()
        session.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        let directory = URL(fileURLWithPath: UnprivilegedUser.kcCopy).deletingLastPathComponent().path
        session.arguments = ["-u", owner.name, "--", "keyctl", "session", "-", "/bin/sh", "-c", """
            printf 'short-lived' | \(directory)/kc set --group \(group) \(service) token 2>\(ready).err
            touch \(ready)
            while [ ! -e \(stop) ]; do sleep 0.05; done
            """]
        try session.run()
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: ready) { usleep(25_000) }
        let note = (try? String(contentsOfFile: ready + ".err", encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: ready + ".err")
        XCTAssertTrue(note.contains("kc: note: '\(service)' is shared from this login session's keyring (when-unlocked): the group loses it when the session ends"), note)
        XCTAssertEqual(try member.run("\"$KC\" get --group \(group) \(service) token").output, "short-lived")

        FileManager.default.createFile(atPath: stop, contents: nil)
        session.waitUntilExit()
        // The kernel collects the dead session's keyrings asynchronously.
        var after = try member.run("\"$KC\" get --group \(group) \(service) token")
        for _ in 0..<100 where after.status == 0 {
            usleep(50_000)
            after = try member.run("\"$KC\" get --group \(group) \(service) token")
        }
        XCTAssertEqual(after.status, 2, "\(after)")
        XCTAssertTrue(after.standardError.contains("it lived in its owner's login session (when-unlocked), which has ended"), after.standardError)
    }
}
