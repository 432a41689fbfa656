import Foundation
import KCTestSupport
import XCTest

/// A member of a group-writable share writes into the owner's items (attack round three,
/// findings 2 and 3): what it can make the owner pay, whether the owner's deadlines and
/// vault survive it, and what it is told. alice owns, bob is the member; every write runs
/// as bob, through kc and around it with keyctl, against the real kernel.
final class MemberWriteAttackTests: XCTestCase {
    nonisolated(unsafe) private static var counter = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard KeyringTestCase.syscallsWork else { throw XCTSkip("kernel keyring system calls are unavailable here") }
        guard LocalUser.available else { throw XCTSkip("needs root to create the throwaway users") }
    }

    override func tearDownWithError() throws {
        for user in LocalUser.allCases { user.clearKeyrings() }
        try super.tearDownWithError()
    }

    private func uniqueService(_ label: String = #function) -> String {
        Self.counter += 1
        return "kc-member.\(getpid()).\(Self.counter).\(label.filter { $0.isLetter }.prefix(30))"
    }

    /// alice stores each item (name, value, extra `kc set` options) in `service`, shared
    /// group-writable with the members' group, at after-first-unlock.
    private func aliceShares(_ service: String, _ items: [(name: String, value: String, options: String)]) throws {
        var script = "set -e\n"
        for item in items {
            script += "printf '%s' '\(item.value)' | \"$KC\" set --group \(LocalUser.group) --group-writable --access after-first-unlock \(item.options) \(service) \(item.name)\n"
        }
        let stored = try LocalUser.alice.run(script)
        XCTAssertEqual(stored.status, 0, "\(stored)")
    }

    /// Bytes alice's keys cost her, from /proc/key-users.
    private func aliceQuotaBytes() throws -> Int {
        let text = try String(contentsOfFile: "/proc/key-users", encoding: .utf8)
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == ":" || $0 == "/" })
            if fields.count == 8, UInt32(fields[0]) == LocalUser.alice.uid, let bytes = Int(fields[6]) { return bytes }
        }
        return 0
    }

    /// kc's lines, without keyctl's own about the fresh session.
    private func kcLines(_ result: CommandResult) -> [Substring] {
        result.standardError.split(separator: "\n").filter { !$0.hasPrefix("Joined session keyring") }
    }

    /// The finding: 4000 bytes written into each shared item took alice from 1,827 to
    /// 17,758 of her 20,000 bytes. A member's write may not make an item larger than it is.
    func testAMemberCannotGrowTheOwnersItemsToFillItsQuota() throws {
        let service = uniqueService()
        let names = (1...5).map { "item\($0)" }
        try aliceShares(service, names.map { ($0, "8 bytes!", "") })
        let before = try aliceQuotaBytes()

        let grow = try LocalUser.bob.run(names.map {
            "head -c 4000 /dev/zero | tr '\\0' x | \"$KC\" set --from \(LocalUser.alice.rawValue) \(service) \($0); echo \"rc=$?\""
        }.joined(separator: "\n"))

        XCTAssertEqual(grow.output, String(repeating: "rc=2\n", count: 5), "\(grow)")
        XCTAssertEqual(kcLines(grow).first, """
            kc: a member may not make item 'item1' of \(LocalUser.alice.rawValue)'s '\(service)' larger than it is \
            (8 bytes; this value has 4000): \(LocalUser.alice.rawValue)'s key quota pays for it; ask \(LocalUser.alice.rawValue) \
            to store it, or to store a value at least that large first
            """)
        // alice's own runs make session keyrings (a few dozen bytes each, freed a moment
        // later), so the quota is compared with a margin; the writes would have added 19,960.
        XCTAssertLessThan(try aliceQuotaBytes(), before + 200, "alice pays nothing more")
        let values = try LocalUser.alice.run(names.map { "\"$KC\" get \(service) \($0); echo" }.joined(separator: "\n"))
        XCTAssertEqual(values.output, String(repeating: "8 bytes!\n", count: 5), "nothing was changed: \(values)")

        // A value no larger than the item is goes in place.
        let rotate = try LocalUser.bob.run("printf 'r0tated!' | \"$KC\" set --from \(LocalUser.alice.rawValue) \(service) item1; echo \"rc=$?\"")
        XCTAssertEqual(rotate.output, "rc=0\n", "\(rotate)")
        XCTAssertLessThan(try aliceQuotaBytes(), before + 200, "a value of the same size costs nothing more")
        XCTAssertEqual(try LocalUser.alice.run("\"$KC\" get \(service) item1").output, "r0tated!")
    }

    /// Finding 2, the share: `kc set --from alice` with 5000 bytes said "kernel keyring
    /// call failed (keyctl_update: Invalid argument)". A member can change a key only in
    /// place, which the kernel limits to a page; kc says so, and the item is unharmed.
    func testAMemberIsToldThatMoreThanAPageIsTheOwnersToStore() throws {
        let service = uniqueService()
        let large = String(repeating: "c", count: 5000)
        try aliceShares(service, [("cert", large, "")])

        let write = try LocalUser.bob.run(
            "head -c 4500 /dev/zero | tr '\\0' x | \"$KC\" set --from \(LocalUser.alice.rawValue) \(service) cert; echo \"rc=$?\"")

        XCTAssertEqual(write.output, "rc=2\n", "\(write)")
        XCTAssertEqual(kcLines(write), ["""
            kc: a member can write at most 4096 bytes into an item (the kernel's limit for changing a key in place; \
            this value has 4500); ask \(LocalUser.alice.rawValue) to store item 'cert' of '\(service)'
            """])
        XCTAssertEqual(try LocalUser.alice.run("\"$KC\" get \(service) cert").output, large)
    }

    /// A member's `keyctl_update` clears a key's expiry, and only the owner may set it
    /// again: bob's write made alice's one-hour secret last for ever. An item with a
    /// deadline now carries no member write, so neither kc nor keyctl can change it.
    func testAnItemWithADeadlineKeepsItWhateverAMemberDoes() throws {
        let service = uniqueService()
        try aliceShares(service, [("token", "aaaa", "--timeout 1h"), ("plain", "bbbb", "")])
        let serial = try LocalUser.alice.run("\"$KC\" ls --long \(service) | awk '$1 == \"token\" {print $5}'").output
            .trimmingCharacters(in: .whitespacesAndNewlines)

        let attack = try LocalUser.bob.run("""
            printf cccc | "$KC" set --from \(LocalUser.alice.rawValue) \(service) token; echo "kc=$?"
            keyctl update \(serial) dddd >/dev/null 2>&1; echo "keyctl=$?"
            printf eeee | "$KC" set --from \(LocalUser.alice.rawValue) \(service) plain; echo "plain=$?"
            """)

        XCTAssertEqual(attack.output, "kc=2\nkeyctl=1\nplain=0\n", "\(attack)")
        XCTAssertEqual(kcLines(attack), ["""
            kc: item 'token' of \(LocalUser.alice.rawValue)'s '\(service)' has a deadline, so only \(LocalUser.alice.rawValue) \
            may change it (the kernel drops a key's deadline when anyone changes its value, and only its owner may set one \
            again); ask \(LocalUser.alice.rawValue) to store it
            """])
        // `ls --long` shows the time left: 1h, or 59m a moment later.
        let owner = try LocalUser.alice.run("\"$KC\" get \(service) token; echo; \"$KC\" ls --long \(service) | cut -f1,4 | sed 's/\t[0-9].*/\tdeadline/'")
        XCTAssertEqual(owner.output, "aaaa\nplain\t-\ntoken\tdeadline\n", "value and deadline intact: \(owner)")

        // The owner's own writes keep it so; without a deadline members may write it again.
        let rewritten = try LocalUser.alice.run("""
            printf ffff | "$KC" set \(service) token && "$KC" ls --long \(service) | awk '$1 == "token" {print ($4 == "-" ? "-" : "deadline")}'
            printf gggg | "$KC" set --timeout none \(service) token && "$KC" ls --long \(service) | awk '$1 == "token" {print ($4 == "-" ? "-" : "deadline")}'
            """)
        XCTAssertEqual(rewritten.output, "deadline\n-\n", "\(rewritten)")
        let again = try LocalUser.bob.run("printf hhhh | \"$KC\" set --from \(LocalUser.alice.rawValue) \(service) token; echo \"rc=$?\"")
        XCTAssertEqual(again.output, "rc=0\n", "\(again)")
        let timed = try LocalUser.alice.run("""
            printf iiii | "$KC" set --timeout 2h \(service) token && "$KC" ls --long \(service) | awk '$1 == "token" {print ($4 == "-" ? "-" : "deadline")}'
            """)
        XCTAssertEqual(timed.output, "deadline\n", "\(timed)")
        let locked = try LocalUser.bob.run("printf jjjj | \"$KC\" set --from \(LocalUser.alice.rawValue) \(service) token; echo \"rc=$?\"")
        XCTAssertEqual(locked.output, "rc=2\n", "a new deadline takes members' write away again: \(locked)")
    }

    /// Round three's attack on the fix: the kernel lets anyone with search on a key
    /// invalidate it, and a share gave the group search, so any member (of a read-only
    /// share too) could destroy the owner's whole service with one `keyctl invalidate`.
    /// Members get view and read (and write on items of a writable share), never search.
    func testAMemberCannotInvalidateTheOwnersServiceOrItems() throws {
        let service = uniqueService()
        try aliceShares(service, [("token", "aaaa", "")])
        let readOnly = service + ".ro"
        let stored = try LocalUser.alice.run("""
            printf bbbb | "$KC" set --group \(LocalUser.group) --access after-first-unlock \(readOnly) token
            for ring in kc:\(service) kc:\(readOnly); do
                r=$(keyctl search @u keyring $ring); echo "$r $(keyctl search $r user token)"
            done
            """)
        let serials = stored.output.split(whereSeparator: \.isWhitespace).map(String.init)
        XCTAssertEqual(serials.count, 4, "\(stored)")

        let attack = try LocalUser.bob.run(serials.map { "keyctl invalidate \($0) 2>/dev/null; echo \"$?\"" }.joined(separator: "\n") + """

            "$KC" get --from \(LocalUser.alice.rawValue) \(service) token; echo
            "$KC" get --from \(LocalUser.alice.rawValue) \(readOnly) token; echo
            """)
        XCTAssertEqual(attack.output, "1\n1\n1\n1\naaaa\nbbbb\n", "no key invalidated; members still read: \(attack)")
        let owner = try LocalUser.alice.run("\"$KC\" get \(service) token; echo; \"$KC\" get \(readOnly) token")
        XCTAssertEqual(owner.output, "aaaa\nbbbb", "\(owner)")
    }

    /// The finding: alice's next `kc unlock` saved bob's values into alice's vault, which
    /// the README says never happens. Unlock and lock keep the vault's (alice's) value.
    func testTheOwnersVaultNeverSavesAValueAMemberWrote() throws {
        let service = uniqueService()
        let vault = try VaultFixture(owner: LocalUser.alice.rawValue)
        defer { _ = try? runCommand("/bin/rm", ["-rf", vault.dataHome]) }
        let env = "export XDG_DATA_HOME='\(vault.dataHome)'\n"
        let made = try LocalUser.alice.run(env + """
            set -e
            printf 'pass phrase\\n' | "$KC" vault init --work-factor 10 2>/dev/null
            printf 'pass phrase\\n' | "$KC" unlock >/dev/null 2>&1
            printf 'alice-v1' | "$KC" set --group \(LocalUser.group) --group-writable --access after-first-unlock \(service) token
            """)
        XCTAssertEqual(made.status, 0, "\(made)")

        let write = try LocalUser.bob.run("printf 'bob-was!' | \"$KC\" set --from \(LocalUser.alice.rawValue) \(service) token; echo \"rc=$?\"")
        XCTAssertEqual(write.output, "rc=0\n", "\(write)")

        let owner = try LocalUser.alice.run(env + """
            printf 'pass phrase\\n' | "$KC" unlock 2>&1 | grep -v '^kc: unlocked'
            "$KC" get \(service) token; echo
            "$KC" lock --level after-first-unlock >/dev/null 2>&1
            printf 'pass phrase\\n' | "$KC" unlock >/dev/null 2>&1
            "$KC" get \(service) token
            """)
        XCTAssertEqual(owner.output, """
            kc: not saved in the vault, as a member of the share may have written the kernel's value (the vault keeps yours; store one with 'kc set' to keep it): \(service)/token
            bob-was!
            alice-v1
            """, "the kernel kept bob's value until the lock; the vault only ever held alice's: \(owner)")
    }
}
