import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// Another local user attacks kc's keyrings (issue 13 §2-§4): from inside the owner's
/// session keyring, and as a member of a group the owner shares a service with. Every
/// attack runs as a real second uid against the real kernel, and every test checks that
/// the owner's data is intact afterwards.
final class KeyringAttackTests: XCTestCase {
    nonisolated(unsafe) private static var counter = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard KeyringTestCase.syscallsWork else { throw XCTSkip("kernel keyring system calls are unavailable here") }
        guard LocalUser.available else { throw XCTSkip("needs root to create the throwaway users") }
    }

    /// root's services from ``uniqueService(_:)``, removed whole (their emptied
    /// keyrings too) at tearDown.
    private var servicesMade: [String] = []

    override func tearDownWithError() throws {
        for service in servicesMade { try? Keychain(service: service).removeAll() }
        servicesMade = []
        for user in LocalUser.allCases { user.clearKeyrings() }
        try super.tearDownWithError()
    }

    private func uniqueService(_ label: String = #function) -> String {
        Self.counter += 1
        let name = "kc-attack.\(getpid()).\(Self.counter).\(label.filter { $0.isLetter }.prefix(30))"
        servicesMade.append(name)
        return name
    }

    // MARK: §2: another uid inside the owner's session keyring

    /// root stores an item at `access` in a fresh session, then, in that same session
    /// keyring, `bob` (as after `su bob` or `runuser -u bob`, which keep the session on
    /// Debian) tries everything against it. `linkAnchor` is how root's login would have
    /// linked the anchor into the session (pam_keyinit links @u; `keyctl get_persistent
    /// @s` the persistent one). Returns bob's results and root's value afterwards, read
    /// in a fresh session.
    private func attackFromInsideTheSession(access: String, linkAnchor: String) throws -> (attack: CommandResult, after: CommandResult) {
        let service = uniqueService()
        let script = """
            \(linkAnchor)
            echo "owner-session=$(keyctl id @s)"
            runuser -u \(LocalUser.bob.rawValue) -- sh -c 'echo "bob-session=$(keyctl id @s 2>&1)"'
            printf 's3cret' | '\(builtKC)' set --access \(access) \(service) token || exit 9
            ring=$(keyctl search @s keyring kc:\(service)); item=$(keyctl search "$ring" user token)
            runuser -u \(LocalUser.bob.rawValue) -- sh -c '
                keyctl pipe '"$item"' >/dev/null 2>&1; echo "read=$?"
                "$0" get \(service) token >/dev/null 2>&1; echo "kc-get=$?"
                printf evil | keyctl pupdate '"$item"' >/dev/null 2>&1; echo "update=$?"
                keyctl revoke '"$item"' >/dev/null 2>&1; echo "revoke=$?"
                keyctl unlink '"$item"' '"$ring"' 2>&1 | grep -q "^1 links" && echo "unlink-item=0" || echo "unlink-item=1"
                keyctl unlink '"$ring"' @s 2>&1 | grep -q "^1 links" && echo "unlink-ring=0" || echo "unlink-ring=1"
                keyctl newring kc:\(service) @s >/dev/null 2>&1; echo "plant-ring=$?"
                printf planted | keyctl padd user token '"$ring"' >/dev/null 2>&1; echo "plant-item=$?"
            ' '\(UnprivilegedUser.kcCopy)'
            '\(builtKC)' get \(service) token; echo " owner-get=$?"
            """
        let attack = try runCommand("/usr/bin/env", ["keyctl", "session", "-", "/bin/sh", "-c", script])
        let after = try runCommand("/usr/bin/env", ["keyctl", "session", "-", "/bin/sh", "-c",
            "\(linkAnchor)\n'\(builtKC)' get \(service) token; echo \" $?\"; '\(builtKC)' rm \(service) token >/dev/null 2>&1"])
        return (attack, after)
    }

    private func assertEveryAttackFailed(_ result: CommandResult, file: StaticString = #filePath, line: UInt = #line) {
        let lines = result.output.split(separator: "\n").map(String.init)
        for attack in ["read", "kc-get", "update", "revoke", "unlink-item", "plant-item"] {
            XCTAssertTrue(lines.contains { $0.hasPrefix(attack + "=") && $0 != attack + "=0" }, "\(attack) succeeded: \(result)", file: file, line: line)
        }
    }

    /// bob, inside root's session keyring, links a keyring named as root's service's
    /// would be there and gives root no right over it, not even to look at it. The kernel
    /// then refuses root's own keyring of that name in the session keyring; kc says so
    /// and how to get out (not a bare `keyctl_move: File exists`), stores nothing, and the
    /// service works again once root unlinks the stranger.
    func testAKeyringTheOwnerMayNotSeeUnderTheServicesNameIsReportedAndCanBeUnlinked() throws {
        let service = uniqueService()
        let script = """
            runuser -u \(LocalUser.bob.rawValue) -- sh -c 'k=$(keyctl newring kc:\(service) @s) && keyctl setperm "$k" 0x003f0000 && echo "$k"' > planted || exit 9
            printf 's3cret' | '\(builtKC)' set --access when-unlocked \(service) token; echo "set=$?"
            keyctl unlink "$(cat planted)" @s >/dev/null || exit 8
            printf 's3cret' | '\(builtKC)' set --access when-unlocked \(service) token; echo "set-after-unlink=$?"
            '\(builtKC)' get \(service) token; echo " get=$?"
            '\(builtKC)' rm \(service) token
            """
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kc-attack-\(getpid())-planted").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        chmod(folder, 0o755)
        let result = try runCommand("/usr/bin/env", ["keyctl", "session", "-", "/bin/sh", "-c", "cd '\(folder)' && " + script])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertTrue(result.output.contains("set=2\n"), "\(result)")
        XCTAssertEqual(result.standardError.split(separator: "\n").filter { !$0.hasPrefix("Joined session keyring") }.map { $0 + "\n" }.joined(),
                       "kc: a keyring you may not look at holds the name of service '\(service)' in your session keyring (another user who shares this session through su or runuser can link one there), so kc cannot make the service's keyring there; find it with 'keyctl show @s' and unlink it with 'keyctl unlink SERIAL @s', or store at another --access level\n")
        XCTAssertTrue(result.output.hasSuffix("set-after-unlink=0\ns3cret get=0\n"), "\(result)")
    }

    func testAnotherUidInTheOwnersSessionCannotReadChangeOrRemoveAWhenUnlockedItem() throws {
        let (attack, _) = try attackFromInsideTheSession(access: "when-unlocked", linkAnchor: "")
        let sessions = attack.output.split(separator: "\n").filter { $0.contains("-session=") }.map { $0.split(separator: "=").last ?? "" }
        XCTAssertEqual(sessions.count, 2)
        XCTAssertEqual(sessions.first, sessions.last, "bob is inside root's session keyring: \(attack)")
        assertEveryAttackFailed(attack)
        XCTAssertTrue(attack.output.contains("s3cret owner-get=0"), "\(attack)")
        let lines = attack.output.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("unlink-ring=1"), "bob unlinked the service keyring from alice's session: \(attack)")
        XCTAssertTrue(lines.contains("plant-ring=1"), "bob planted a keyring in alice's session: \(attack)")
    }

    func testAnotherUidInTheOwnersSessionCannotReachAfterFirstUnlockItemsThroughTheLinkedUserKeyring() throws {
        let (attack, after) = try attackFromInsideTheSession(access: "after-first-unlock", linkAnchor: "keyctl link @u @s")
        assertEveryAttackFailed(attack)
        XCTAssertEqual(after.output, "s3cret 0\n", "the owner's item is intact: \(attack)")
    }

    func testAnotherUidInTheOwnersSessionCannotReadAlwaysItemsThroughTheLinkedPersistentKeyring() throws {
        let (attack, after) = try attackFromInsideTheSession(access: "always", linkAnchor: "keyctl get_persistent @s >/dev/null")
        assertEveryAttackFailed(attack)
        XCTAssertEqual(after.output, "s3cret 0\n", "the owner's item is intact: \(attack)")
    }

    func testKcOfAnotherUidRefusesToStoreIntoASessionKeyringItDoesNotOwn() throws {
        let service = uniqueService()
        let script = """
            keyctl show @s >/dev/null
            runuser -u \(LocalUser.bob.rawValue) -- sh -c 'printf v | "$0" set \(service) token; echo "set=$?"' '\(UnprivilegedUser.kcCopy)'
            """
        let result = try runCommand("/usr/bin/env", ["keyctl", "session", "-", "/bin/sh", "-c", script])
        XCTAssertEqual(result.output, "set=2\n", "\(result)")
        XCTAssertTrue(result.standardError.contains("kc: this session keyring belongs to root (you reached it through su, sudo or runuser), who could remove what you store in it; start a session of your own with 'keyctl session', or store at --access after-first-unlock"), result.standardError)
    }

    /// A save through the mount reads an item's deadline from kc's record in `kc.expiry`
    /// alone. `bob`, inside root's session, plants a `kc.expiry` keyring of his own in
    /// root's user keyring with a record giving root's untimed item a deadline, readable
    /// by everyone. kc's guards on the session and user keyrings stop that; the test
    /// undoes them (default masks, as on a machine kc never wrote to) to check the last
    /// line of defence. root's next save must not take it: only root's own records
    /// count, so the item stays without expiry.
    func testAnotherUidInTheOwnersSessionCannotPlantADeadlineThatTheOwnersNextSaveTakes() throws {
        try MountFixture.requireFUSE()
        let service = uniqueService()
        let mountPoint = "/tmp/kc-test-plant-\(Self.counter)-\(getpid())"
        let script = """
            KC='\(builtKC)'
            keyctl link @u @s >/dev/null
            user=$(keyctl id @u)
            perm=$(keyctl rdescribe @u | cut -d';' -f4)
            # As on a machine where kc never guarded the user keyring, and has no kc.expiry yet
            # (root's own is kept alive in the session meanwhile and put back after).
            old=$(keyctl search @u keyring kc.expiry 2>/dev/null) || old=
            [ -n "$old" ] && keyctl link "$old" @s && keyctl unlink "$old" @u >/dev/null
            keyctl setperm @u 0x3f3f0000
            printf v1 | "$KC" set \(service) token || exit 9
            ring=$(keyctl search @s keyring kc:\(service)); item=$(keyctl search "$ring" user token)
            # kc guarded the session keyring as it stored; undo that too, so that bob
            # possesses the user keyring through it (defence in depth is what is tested).
            session=$(keyctl rdescribe @s | cut -d';' -f4)
            keyctl setperm @s 0x3f3f0000
            runuser -u \(LocalUser.bob.rawValue) -- sh -c '
                table=$(keyctl newring kc.expiry '"$user"') && keyctl setperm "$table" 0x3f3f3f3f && echo "planted-table=0"
                record=$(printf %s 4102444800 | keyctl padd user '"$item"' "$table") && keyctl setperm "$record" 0x3f3f3f3f && echo "planted-record=0"
            '
            keyctl setperm @s "0x$session"
            mkdir -p '\(mountPoint)'
            "$KC" mount '\(mountPoint)' && printf v2 > '\(mountPoint)/\(service)/token'; echo "save=$?"
            "$KC" umount '\(mountPoint)'; rmdir '\(mountPoint)'
            saved=$(keyctl search "$ring" user token)
            echo "expiry=$(grep "^$(printf %08x "$saved") " /proc/keys | awk '{print $4}')"
            echo "value=$("$KC" get \(service) token)"
            "$KC" ls --long \(service)
            planted=$(keyctl search @u keyring kc.expiry 2>/dev/null) && keyctl unlink "$planted" @u >/dev/null
            keyctl setperm @u "0x$perm"
            [ -n "$old" ] && keyctl link "$old" @u && keyctl unlink "$old" @s >/dev/null
            "$KC" rm \(service) token >/dev/null
            """
        let result = try runCommand("/usr/bin/env", ["keyctl", "session", "-", "/bin/sh", "-c", script])
        let lines = result.output.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("planted-record=0"), "the attack could be made here (bob's record in his own table): \(result)")
        XCTAssertTrue(lines.contains("save=0"), "\(result)")
        XCTAssertTrue(lines.contains("value=v2"), "\(result)")
        XCTAssertTrue(lines.contains("expiry=perm"), "root's save took bob's deadline: \(result)")
    }

    // MARK: §3: a member of a group-writable share

    /// alice stores `token` at after-first-unlock and shares the service group-writable.
    private func aliceSharesWritable(_ service: String) throws -> (ring: String, item: String) {
        let shared = try LocalUser.alice.run("""
            printf 's3cret' | "$KC" set --access after-first-unlock --group \(LocalUser.group) --group-writable \(service) token || exit 9
            ring=$(keyctl search @u keyring kc:\(service)); echo "$ring $(keyctl search "$ring" user token)"
            """)
        let serials = shared.output.split(whereSeparator: \.isWhitespace).map(String.init)
        guard shared.status == 0, serials.count == 2 else { throw XCTSkip("could not share: \(shared)") }
        return (serials[0], serials[1])
    }

    func testAMemberOfAWritableShareCanChangeValuesButNotLinkOrRemoveKeys() throws {
        let service = uniqueService()
        let (ring, item) = try aliceSharesWritable(service)
        let attack = try LocalUser.bob.run("""
            printf planted | keyctl padd user planted \(ring) >/dev/null 2>&1; echo "plant=$?"
            keyctl newring sub \(ring) >/dev/null 2>&1; echo "newring=$?"
            keyctl unlink \(item) \(ring) 2>&1 | grep -q "^1 links" && echo "unlink=0" || echo "unlink=1"
            printf r0tate | "$KC" set --from \(LocalUser.alice.rawValue) \(service) token; echo "rotate=$?"
            """)
        XCTAssertEqual(attack.output, "plant=1\nnewring=1\nunlink=1\nrotate=0\n", "\(attack)")
        let owner = try LocalUser.alice.run("\"$KC\" ls \(service); \"$KC\" get \(service) token")
        XCTAssertEqual(owner.output, "token\nr0tate", "the member changed the value in place, and nothing else: \(owner)")
    }

    /// A service whose keyring a member could write (kc before 0.3 gave a writable share
    /// group write on the keyring, which reproduces it): what the member linked there
    /// is never the owner's, and never stops the owner.
    func testKeysAMemberPlantedInTheOwnersServiceAreIgnoredAndRemoved() throws {
        let service = uniqueService()
        let (ring, _) = try aliceSharesWritable(service)
        _ = try LocalUser.alice.run("keyctl setperm \(ring) 0x3f3f0f00")  // the old mask
        let planted = try LocalUser.bob.run("""
            printf planted | keyctl padd user token2 \(ring) >/dev/null; echo "plant=$?"
            printf mine | keyctl padd user other \(ring) >/dev/null; echo "plant-other=$?"
            keyctl newring sub \(ring) >/dev/null; echo "newring=$?"
            """)
        XCTAssertEqual(planted.output, "plant=0\nplant-other=0\nnewring=0\n", "the old mask let the member plant: \(planted)")

        let owner = try LocalUser.alice.run("""
            "$KC" get \(service) other; echo " get-planted=$?"
            "$KC" get \(service) token2; echo " get-unsearchable=$?"
            printf fresh | "$KC" set --access after-first-unlock \(service) token2; echo "set=$?"
            "$KC" get \(service) token2; echo " get=$?"
            "$KC" ls \(service)
            "$KC" unshare \(service); echo "unshare=$?"
            "$KC" share \(service) --group \(LocalUser.group); echo "share=$?"
            "$KC" export --service \(service) | grep -c '"name"'
            keyctl rlist \(ring) | wc -w
            """)
        XCTAssertEqual(owner.output, """
             get-planted=1
             get-unsearchable=1
            set=0
            fresh get=0
            token
            token2
            unshare=0
            share=0
            2
            2

            """, "\(owner)")
    }

    // MARK: §4: the owner's `set --group` never writes into a member's service

    func testSetWithGroupWritesOnlyTheCallersOwnService() throws {
        let service = uniqueService()
        let bobFirst = try LocalUser.bob.run("""
            printf placeholder | "$KC" set --group \(LocalUser.group) --group-writable --access after-first-unlock \(service) token
            """)
        XCTAssertEqual(bobFirst.status, 0, "\(bobFirst)")
        let alice = try LocalUser.alice.run("""
            printf ALICE-REAL-SECRET | "$KC" set --group \(LocalUser.group) --access after-first-unlock \(service) token; echo "set=$?"
            "$KC" share \(service)
            """)
        XCTAssertEqual(alice.output, "set=0\n\(service): shared with group \(LocalUser.group) (read-only)\n", "alice's secret went to her own service: \(alice)")
        let bob = try LocalUser.bob.run("\"$KC\" get \(service) token")
        XCTAssertEqual(bob.output, "placeholder", "bob's service never received alice's secret")
        let dave = try LocalUser.dave.run("""
            "$KC" get --group \(LocalUser.group) \(service) token; echo " ambiguous=$?"
            "$KC" get --from \(LocalUser.alice.rawValue) \(service) token; echo
            """)
        XCTAssertEqual(dave.output, " ambiguous=2\nALICE-REAL-SECRET\n", "\(dave)")
    }
}
