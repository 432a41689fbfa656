import Foundation
import KCTestSupport
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// With a vault, what clients store over D-Bus outlives the daemon and a reboot: the
/// values as kc items saved in the vault, the attributes, labels and content types in
/// the daemon's index, kept encrypted in the vault.
final class SecretServicePersistenceTests: VaultTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requireSecretTool()
        try SecretServiceClients.requirePython()
    }

    /// Stores, on `bus`, a secret-tool item with a label and an extra attribute, an empty
    /// `data/null` secret and a `text/html` one, all under `service`.
    private func storeItems(on bus: SessionBus, service: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let stored = try bus.secretTool("store", "--label", "Persisted ✓", "service", service, "username", "alice", "note", "kept too ✓",
                                        input: "p3rsist")
        XCTAssertEqual(stored.status, 0, "\(stored)", file: file, line: line)
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            c.create(s, {'service': sys.argv[1], 'username': 'empty'}, b'', content_type='data/null', label='empty one')
            c.create(s, {'service': sys.argv[1], 'username': 'html'}, b'<i>x</i>', content_type='text/html', label='html one')
            emit(ok=True)
            """, arguments: [service], file: file, line: line)
        XCTAssertEqual(out["ok"], true, file: file, line: line)
    }

    /// Checks, on `bus`, that every item of ``storeItems(on:service:)`` is back whole.
    private func assertItemsBack(on bus: SessionBus, service: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let looked = try bus.secretTool("lookup", "service", service, "username", "alice")
        XCTAssertEqual(looked.status, 0, "\(looked)", file: file, line: line)
        XCTAssertEqual(looked.output, "p3rsist", file: file, line: line)
        let byNote = try bus.secretTool("lookup", "note", "kept too ✓")
        XCTAssertEqual(byNote.output, "p3rsist", "found by an attribute only the index holds: \(byNote)", file: file, line: line)
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            found = {}
            for user in ('alice', 'empty', 'html'):
                items, locked = c.search({'service': sys.argv[1], 'username': user})
                item = items[0]
                value, content_type = c.secret(s, item)
                found[user] = [text(value), content_type, c.get(item, ITEM, 'Label'), c.get(item, ITEM, 'Attributes'), len(items) + len(locked)]
            emit(**found)
            """, arguments: [service], file: file, line: line)
        XCTAssertEqual(out["alice"], ["p3rsist", "text/plain", "Persisted ✓", .object(["service": .string(service), "username": "alice", "note": "kept too ✓"]), 1],
                       "\(out)", file: file, line: line)
        XCTAssertEqual(out["empty"], ["", "data/null", "empty one", .object(["service": .string(service), "username": "empty"]), 1], file: file, line: line)
        XCTAssertEqual(out["html"], ["<i>x</i>", "text/html", "html one", .object(["service": .string(service), "username": "html"]), 1], file: file, line: line)
    }

    func testANewDaemonReloadsTheIndexFromTheVault() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let first = try startSecretServiceBus(vault: vault)
        try storeItems(on: first, service: service)
        let firstDaemon = try XCTUnwrap(first.owner())
        first.stop()
        XCTAssertFalse(SessionBus.isRunning(firstDaemon), "kc-secretd leaves with its bus")

        let index = vault.path + "/documents/secret-service.age"
        XCTAssertTrue(FileManager.default.fileExists(atPath: index), "the index is a document of the vault")
        let sealed = try Data(contentsOf: URL(fileURLWithPath: index))
        XCTAssertTrue(sealed.starts(with: Data("age-encryption.org/v1".utf8)), "an age file")
        for clear in [service, "kept too", "Persisted", "data/null"] {
            XCTAssertNil(sealed.range(of: Data(clear.utf8)), "the index keeps '\(clear)' encrypted")
        }

        let second = try startSecretServiceBus(vault: vault)
        try assertItemsBack(on: second, service: service)
        XCTAssertNotEqual(second.owner(), firstDaemon)
        XCTAssertEqual(try vault.get(service, "alice").output, "p3rsist")
    }

    func testSecretsAndAttributesComeBackAfterARebootAndKCUnlock() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let before = try startSecretServiceBus(vault: vault)
        try storeItems(on: before, service: service)
        before.stop()

        simulateReboot()
        let beforeUnlock = try vault.get(service, "alice")
        XCTAssertNotEqual(beforeUnlock.status, 0, "after the reboot the vault is locked and the kernel empty: \(beforeUnlock)")

        // Locked: kc-secretd never prompts; Unlock answers with a prompt whose Prompt
        // says the vault is locked, and the items wait for `kc unlock`.
        let after = try startSecretServiceBus(vault: vault)
        let locked = try after.python("""
            c = Client()
            search = c.attempt(ROOT, SERVICE, 'SearchItems', 'a{ss}', {'service': sys.argv[1]})
            unlocked, prompt = c.call(ROOT, SERVICE, 'Unlock', 'ao', [DEFAULT])
            prompted = c.attempt(prompt, PROMPT, 'Prompt', 's', '') if prompt != '/' else None
            s = c.open('plain')
            store = c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b',
                              {ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': 'while-locked'})},
                              (s.object_path, b'', b'nope', 'text/plain'), True)
            emit(search=search, unlocked=unlocked, prompt=prompt, prompted=prompted, locked=c.get(DEFAULT, COLLECTION, 'Locked'), store=store)
            """, arguments: [service])
        XCTAssertEqual(locked["unlocked"], [], "\(locked)")
        XCTAssertNotEqual(locked["prompt"], "/", "a locked vault cannot be opened without kc unlock: \(locked)")
        XCTAssertEqual(locked["prompted"]?["error"], "org.freedesktop.Secret.Error.IsLocked", "the prompt says why at once: \(locked)")
        XCTAssertTrue(locked["prompted"]?["message"]?.string?.hasPrefix("the vault is locked: run 'kc unlock'") ?? false, "\(locked)")
        XCTAssertEqual(locked["locked"], true)
        let search = locked["search"]
        XCTAssertTrue(search?["error"] == "org.freedesktop.Secret.Error.IsLocked" || search?["reply"]?[0] == [],
                      "no secret is offered as unlocked while the vault is locked: \(locked)")

        XCTAssertEqual(locked["store"]?["error"], "org.freedesktop.Secret.Error.IsLocked", "nothing is stored while the vault is locked: \(locked)")
        XCTAssertNotEqual(try vault.get(service, "while-locked").status, 0)

        let (unlocked, _) = try vault.unlock()
        XCTAssertEqual(unlocked.status, 0, "\(unlocked)")
        // The same daemon, without a restart, now serves everything again.
        try assertItemsBack(on: after, service: service)
        XCTAssertEqual(try vault.get(service, "alice").output, "p3rsist")
        XCTAssertEqual(try after.secretTool("lookup", "service", service, "username", "while-locked").status, 1, "the refused store left nothing")
    }

    /// Two session buses of one user (two ssh logins), each with its kc-secretd, over one
    /// vault: each daemon sees what the other stores.
    func testTwoDaemonsOverOneVaultSeeEachOthersItems() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let first = try startSecretServiceBus(vault: vault)
        let second = try startSecretServiceBus(vault: vault)
        XCTAssertEqual(try first.secretTool("store", "--label", "from first", "service", service, "username", "one", "origin", "first", input: "1st").status, 0)
        XCTAssertEqual(try second.secretTool("store", "--label", "from second", "service", service, "username", "two", "origin", "second", input: "2nd").status, 0)
        XCTAssertNotEqual(first.owner(), second.owner(), "two daemons")
        // Each daemon reads the index file again when it changed (at most every half second).
        var seenByFirst = "", seenBySecond = ""
        for _ in 0..<30 {
            seenByFirst = try first.secretTool("lookup", "origin", "second").output
            seenBySecond = try second.secretTool("lookup", "origin", "first").output
            if seenByFirst == "2nd" && seenBySecond == "1st" { break }
            usleep(200_000)
        }
        XCTAssertEqual(seenByFirst, "2nd", "the first daemon finds the second's item by an attribute only the index holds")
        XCTAssertEqual(seenBySecond, "1st")
        first.stop()
        second.stop()
        let third = try startSecretServiceBus(vault: vault)
        XCTAssertEqual(try third.secretTool("lookup", "origin", "first").output, "1st", "neither daemon's save lost the other's item")
        XCTAssertEqual(try third.secretTool("lookup", "origin", "second").output, "2nd")
    }

    /// Clients of two daemons over one vault storing at once: every save merges with the
    /// index file under the vault's lock, so none is lost.
    func testConcurrentStoresThroughTwoDaemonsAllReachTheVaultsIndex() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let first = try startSecretServiceBus(vault: vault)
        let second = try startSecretServiceBus(vault: vault)
        let stored = try first.script("""
            for n in $(seq 1 12); do
              for bus in first second; do
                if [ $bus = first ]; then address='\(first.address)'; else address='\(second.address)'; fi
                ( printf 'value-%s-%s' $bus $n | DBUS_SESSION_BUS_ADDRESS="$address" timeout 60 secret-tool store --label "$bus $n" \\
                    service '\(service)' username "$bus-$n" batch both || echo "store $bus $n failed" ) &
              done
            done
            wait
            """)
        XCTAssertEqual(stored.output, "", "\(stored)")
        first.stop()
        second.stop()
        let third = try startSecretServiceBus(vault: vault)
        let out = try third.python("""
            c = Client()
            s = c.open('plain')
            unlocked, locked = c.search({'service': sys.argv[1], 'batch': 'both'})
            emit(values=sorted(text(v) for v in c.secrets(s, unlocked).values()), locked=len(locked))
            """, arguments: [service])
        let expected = ["first", "second"].flatMap { bus in (1...12).map { "value-\(bus)-\($0)" } }.sorted()
        XCTAssertEqual(out["values"]?.strings, expected, "every item of both daemons, found by an attribute only the index holds: \(out)")
    }

    func testPythonKeyringAndGitCredentialsSurviveTheReboot() throws {
        let keyring = try SecretServiceClients.requireKeyringCommand()
        let helper = try SecretServiceClients.gitCredentialLibsecret()
        let vault = try makeVault()
        let service = uniqueService()
        let host = service.replacingOccurrences(of: ".", with: "-").lowercased() + ".example.com"
        servicesToRemove.append(KeyName("https:" + host))
        let home = SecretServiceClients.folder + "/git-home-persistence"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "[credential]\n\thelper = \(helper)\n".write(toFile: home + "/.gitconfig", atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let git = ["HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"]

        let before = try startSecretServiceBus(vault: vault)
        XCTAssertEqual(try before.client(keyring, ["set", service, "bob"], input: Array("py-s3cret\n".utf8), extraEnvironment: SecretServiceClients.keyringBackend).status, 0)
        XCTAssertEqual(try before.client("/usr/bin/git", ["credential", "approve"], input: Array("protocol=https\nhost=\(host)\nusername=carol\npassword=g1t\n\n".utf8),
                                         extraEnvironment: git).status, 0)
        before.stop()
        _ = try rebootAndUnlock(vault)

        let after = try startSecretServiceBus(vault: vault)
        let got = try after.client(keyring, ["get", service, "bob"], extraEnvironment: SecretServiceClients.keyringBackend)
        XCTAssertEqual(got.output, "py-s3cret\n", "\(got)")
        let filled = try after.client("/usr/bin/git", ["credential", "fill"], input: Array("protocol=https\nhost=\(host)\n\n".utf8), extraEnvironment: git)
        XCTAssertEqual(filled.output, "protocol=https\nhost=\(host)\nusername=carol\npassword=g1t\n", "\(filled)")
        XCTAssertEqual(try vault.get("https:" + host, "carol").output, "g1t")
        XCTAssertEqual(try vault.get(service, "bob").output, "py-s3cret")
    }
}
