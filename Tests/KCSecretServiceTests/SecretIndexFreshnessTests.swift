import Foundation
import KCTestSupport
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// One index file, several kc-secretd: two session buses of one user (two ssh logins,
/// two `dbus-run-session`s) each start a daemon over the same vault. Every save of the
/// index applies the daemon's change to the file as it is on disk, and no daemon writes
/// over a file it cannot read (the vault locked, a format it does not know): an item one
/// daemon stored is never lost to the other's older copy.
final class SecretIndexFreshnessTests: VaultTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requireSecretTool()
        try SecretServiceClients.requirePython()
    }

    /// `secret-tool store` on `bus` of an item of `service` whose attribute `kept` only
    /// the index holds (items kc-secretd did not make show with `service` and `username`
    /// alone, so a lost record is not found by `kept`).
    private func store(on bus: SessionBus, service: String, username: String, value: String,
                       file: StaticString = #filePath, line: UInt = #line) throws {
        let stored = try bus.secretTool("store", "--label", username, "service", service, "username", username, "kept", service, input: value)
        XCTAssertEqual(stored.status, 0, "secret-tool store \(username): \(stored)", file: file, line: line)
    }

    /// The values of every item a fresh daemon (on a bus of its own, which read nothing
    /// before) finds by the index-only attribute `kept`, sorted, and how many it finds
    /// locked.
    private func valuesFoundByAFreshDaemon(of vault: VaultFixture, service: String,
                                           file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        let fresh = try startSecretServiceBus(vault: vault)
        defer { fresh.stop() }
        return try fresh.python("""
            c = Client()
            s = c.open('plain')
            unlocked, locked = c.search({'kept': sys.argv[1]})
            emit(values=sorted(text(v) for v in c.secrets(s, unlocked).values()), locked=len(locked))
            """, arguments: [service], file: file, line: line)
    }

    /// Two daemons storing in turn (each store made to a file the other changed since
    /// this daemon last read it): a third daemon finds every item of both by attributes.
    func testTwoDaemonsStoringInTurnKeepEveryItemOfBoth() throws {
        let service = uniqueService()
        let vault = try makeVault()
        let first = try startSecretServiceBus(vault: vault)
        let second = try startSecretServiceBus(vault: vault)
        var expected: [String] = []
        for round in 1...5 {
            try store(on: first, service: service, username: "first-\(round)", value: "value-first-\(round)")
            try store(on: second, service: service, username: "second-\(round)", value: "value-second-\(round)")
            expected += ["value-first-\(round)", "value-second-\(round)"]
        }
        XCTAssertNotEqual(first.owner(), second.owner(), "two daemons, one per bus")
        // Both still running: the third daemon reads the file they both wrote.
        let found = try valuesFoundByAFreshDaemon(of: vault, service: service)
        XCTAssertEqual(found["values"]?.strings, expected.sorted(), "every item of both daemons, by an attribute only the index holds: \(found)")
        XCTAssertEqual(found["locked"], 0)
    }

    /// `kc lock` while two daemons run, then a third daemon started while the vault is
    /// locked (it never read the index): none of them changes the index (each store and
    /// delete is refused with IsLocked, naming `kc unlock`), and after `kc unlock` every
    /// record stored before is found by attributes. The first daemon's copy lacks the
    /// second's last item: written over the locked file, that item's record would be lost.
    func testWhileTheVaultIsLockedNoDaemonChangesTheIndexAndEveryRecordSurvivesKCUnlock() throws {
        let service = uniqueService()
        let vault = try makeVault()
        let first = try startSecretServiceBus(vault: vault)
        let second = try startSecretServiceBus(vault: vault)
        try store(on: first, service: service, username: "first", value: "value-first")
        try store(on: second, service: service, username: "second", value: "value-second")

        let locked = try vault.lock()
        XCTAssertEqual(locked.status, 0, "kc lock: \(locked)")
        XCTAssertFalse(vault.isStashed, "the vault is locked")
        let started = try startSecretServiceBus(vault: vault)

        // What each daemon answers to a store, to a delete of the first item (by its path,
        // which names its kc item), and to a search, as one python client sees it.
        let attempts = """
            c = Client()
            s = c.open('plain')
            store = c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b',
                              {ITEM + '.Label': ('s', 'while locked'),
                               ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': sys.argv[2], 'kept': sys.argv[1]})},
                              (s.object_path, b'', b'refused', 'text/plain'), True)
            delete = c.attempt(sys.argv[3], ITEM, 'Delete')
            emit(store=store, delete=delete)
            """
        let firstPath = try first.python("""
            c = Client()
            unlocked, locked = c.search({'kept': sys.argv[1], 'username': 'first'})
            emit(paths=list(unlocked) + list(locked))
            """, arguments: [service])["paths"]?.strings.first
        let itemPath = try XCTUnwrap(firstPath, "the first daemon still finds its item")
        // The daemon with the older copy goes last: the file it would write over then
        // holds the second daemon's record.
        for (name, bus) in [("the second daemon (its copy is the file's)", second),
                            ("a daemon started while the vault was locked", started),
                            ("the first daemon (its copy is older than the file)", first)] {
            let answer = try bus.python(attempts, arguments: [service, "while-locked", itemPath])
            for call in ["store", "delete"] {
                XCTAssertEqual(answer[call]?["error"], "org.freedesktop.Secret.Error.IsLocked", "\(name): the \(call) is refused: \(answer)")
                XCTAssertTrue(answer[call]?["message"]?.string?.contains("kc unlock") ?? false, "\(name): the error names kc unlock: \(answer)")
            }
            let refused = try bus.secretTool("store", "--label", "refused", "service", service, "username", "while-locked", "kept", service, input: "refused")
            XCTAssertNotEqual(refused.status, 0, "\(name): secret-tool store fails: \(refused)")
        }
        XCTAssertNotEqual(try vault.get(service, "while-locked").status, 0, "no refused store left a value in the kernel")
        XCTAssertEqual(try vault.get(service, "first").output, "value-first", "no refused delete removed the value")

        let (unlocked, _) = try vault.unlock()
        XCTAssertEqual(unlocked.status, 0, "kc unlock: \(unlocked)")
        let found = try valuesFoundByAFreshDaemon(of: vault, service: service)
        XCTAssertEqual(found["values"]?.strings, ["value-first", "value-second"], "every record from before the lock, by an attribute only the index holds: \(found)")

        // Unlocked again, the daemons that were refused store and merge as before.
        try store(on: first, service: service, username: "first-after", value: "value-first-after")
        try store(on: started, service: service, username: "started-after", value: "value-started-after")
        let after = try valuesFoundByAFreshDaemon(of: vault, service: service)
        XCTAssertEqual(after["values"]?.strings, ["value-first", "value-first-after", "value-second", "value-started-after"], "\(after)")
    }

    /// An index file this daemon cannot decode (a newer kc's format, say) is refused, not
    /// replaced by the daemon's own copy: the file stays byte for byte.
    func testAnIndexTheDaemonCannotDecodeIsNeverWrittenOver() throws {
        try requireRealAge()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/age") else { throw XCTSkip("age is not installed (/usr/bin/age)") }
        let service = uniqueService()
        let vault = try makeVault()
        let bus = try startSecretServiceBus(vault: vault)
        try store(on: bus, service: service, username: "before", value: "value-before")

        let index = vault.path + "/documents/secret-service.age"
        let recipient = try String(contentsOfFile: vault.path + "/recipient", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let newer = try runCommand("/usr/bin/age", ["-r", recipient, "-o", index + ".newer"], input: Array("kc-secret-service-index 3\nfrom a newer kc".utf8))
        XCTAssertEqual(newer.status, 0, "age: \(newer)")
        XCTAssertEqual(chmod(index + ".newer", 0o600), 0, "owner-only, as kc keeps every vault file (else it is refused as unsafe)")
        XCTAssertEqual(rename(index + ".newer", index), 0, "the newer index replaces the file")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: index))

        let refused = try bus.secretTool("store", "--label", "refused", "service", service, "username", "refused", "kept", service, input: "refused")
        XCTAssertNotEqual(refused.status, 0, "the store is refused: \(refused)")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: index)), bytes, "the index this daemon cannot read is left as it was")
        XCTAssertNotEqual(try vault.get(service, "refused").status, 0, "the refused store left no value in the kernel")
    }
}
