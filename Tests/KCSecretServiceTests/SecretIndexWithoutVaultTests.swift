import Foundation
import KCTestSupport
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Without a vault the values live in the kernel until reboot, and so do their attributes:
/// kc-secretd keeps its index in `$XDG_STATE_HOME/kc/secret-service-index` (0600), a
/// file that names the boot it belongs to. A daemon on a new bus (a second login, a new
/// `dbus-run-session`, a restart) reads it back; after a reboot it is discarded with
/// the items it described. Two daemons at once (two session buses of one user) change
/// it under a lock, each applying its change to the file as it is on disk.
final class SecretIndexWithoutVaultTests: VaultTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requireSecretTool()
        try SecretServiceClients.requirePython()
    }

    nonisolated(unsafe) private static var counter = 0

    /// A fresh `XDG_STATE_HOME` of this test's (0700), removed at tearDown.
    private func makeStateHome() throws -> String {
        Self.counter += 1
        let path = "/tmp/kc-test-state-\(getpid())-\(Self.counter)"
        _ = try runCommand("/bin/rm", ["-rf", path])
        XCTAssertEqual(mkdir(path, 0o700), 0, "mkdir \(path)")
        addCleanup { _ = try? runCommand("/bin/rm", ["-rf", path]) }
        return path
    }

    /// A session bus whose kc-secretd has no vault and keeps its index under `stateHome`.
    private func startBus(stateHome: String) throws -> SessionBus {
        var environment = environmentWithoutVault()
        environment["XDG_STATE_HOME"] = stateHome
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        let bus = try SessionBus(environment: environment)
        addTeardownBlock { bus.stop() }
        return bus
    }

    private func indexFile(_ stateHome: String) -> String { stateHome + "/kc/secret-service-index" }

    private var bootID: String {
        ((try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func store(on bus: SessionBus, service: String, username: String, value: String, extra: [String] = [],
                       file: StaticString = #filePath, line: UInt = #line) throws {
        let arguments = ["store", "--label", "label of \(username) ✓", "service", service, "username", username, "kept", service] + extra
        let stored = try bus.client(SecretServiceClients.secretTool, arguments, input: Array(value.utf8))
        XCTAssertEqual(stored.status, 0, "secret-tool store \(username): \(stored)", file: file, line: line)
    }

    /// The values of the items a daemon on `bus` finds by the attribute `kept` only the
    /// index holds (items kc-secretd did not make show with `service` and `username`
    /// alone), sorted.
    private func valuesFound(on bus: SessionBus, service: String, file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        try bus.python("""
            c = Client()
            s = c.open('plain')
            unlocked, locked = c.search({'kept': sys.argv[1]})
            emit(values=sorted(text(v) for v in c.secrets(s, unlocked).values()), locked=len(locked))
            """, arguments: [service], file: file, line: line)
    }

    func testWithoutAVaultANewBusFindsWhatSecretToolPythonKeyringAndGitStoredByTheirAttributes() throws {
        let keyring = try SecretServiceClients.requireKeyringCommand()
        let helper = try? SecretServiceClients.gitCredentialLibsecret()
        let stateHome = try makeStateHome()
        let service = uniqueService()
        let host = service.replacingOccurrences(of: ".", with: "-").lowercased() + ".example.com"
        servicesToRemove.append(KeyName("https:" + host))
        let home = SecretServiceClients.folder + "/git-home-\(service)"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        if let helper { try "[credential]\n\thelper = \(helper)\n".write(toFile: home + "/.gitconfig", atomically: true, encoding: .utf8) }
        let git = ["HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"]

        let first = try startBus(stateHome: stateHome)
        try store(on: first, service: service, username: "alice", value: "v4lue", extra: ["note", "kept too ✓"])
        let set = try first.client(keyring, ["set", service, "bob"], input: Array("py-s3cret\n".utf8), extraEnvironment: SecretServiceClients.keyringBackend)
        XCTAssertEqual(set.status, 0, "keyring set: \(set)")
        if helper != nil {
            let approved = try first.client("/usr/bin/git", ["credential", "approve"],
                                            input: Array("protocol=https\nhost=\(host)\nusername=carol\npassword=g1t\n\n".utf8), extraEnvironment: git)
            XCTAssertEqual(approved.status, 0, "git credential approve: \(approved)")
        }
        let firstDaemon = try XCTUnwrap(first.owner())
        first.stop()
        XCTAssertFalse(SessionBus.isRunning(firstDaemon), "kc-secretd leaves with its bus")

        // The file: the user's own, 0600 in a 0700 folder, naming this boot.
        let file = indexFile(stateHome)
        var info = stat()
        XCTAssertEqual(lstat(file, &info), 0, "the index is kept in \(file)")
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFREG)
        XCTAssertEqual(info.st_mode & 0o777, 0o600, "only the user reads the index")
        XCTAssertEqual(info.st_uid, geteuid())
        XCTAssertEqual(lstat(stateHome + "/kc", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        XCTAssertNotNil(bytes.range(of: Data(bootID.utf8)), "the file names the boot it belongs to")
        XCTAssertNil(bytes.range(of: Data("v4lue".utf8)), "no secret in the index")
        XCTAssertNil(bytes.range(of: Data("py-s3cret".utf8)))

        let second = try startBus(stateHome: stateHome)
        let byNote = try second.secretTool("lookup", "note", "kept too ✓")
        XCTAssertEqual(byNote.output, "v4lue", "found by an attribute only the index holds: \(byNote)")
        let out = try second.python("""
            c = Client()
            items, locked = c.search({'note': 'kept too ✓'})
            emit(label=c.get(items[0], ITEM, 'Label'), attributes=c.get(items[0], ITEM, 'Attributes'), count=len(items) + len(locked))
            """)
        XCTAssertEqual(out["label"], "label of alice ✓", "\(out)")
        XCTAssertEqual(out["attributes"], .object(["service": .string(service), "username": "alice", "kept": .string(service), "note": "kept too ✓"]))
        XCTAssertEqual(out["count"], 1, "one item, not a copy per bus")
        let got = try second.client(keyring, ["get", service, "bob"], extraEnvironment: SecretServiceClients.keyringBackend)
        XCTAssertEqual(got.output, "py-s3cret\n", "python keyring finds its item: \(got)")
        if helper != nil {
            let filled = try second.client("/usr/bin/git", ["credential", "fill"], input: Array("protocol=https\nhost=\(host)\n\n".utf8), extraEnvironment: git)
            XCTAssertEqual(filled.output, "protocol=https\nhost=\(host)\nusername=carol\npassword=g1t\n",
                           "git's libsecret helper finds its item by the network schema: \(filled)")
        }
        // A store of the same attributes replaces, as on the first bus: no "(2)" copy.
        try store(on: second, service: service, username: "alice", value: "v4lue-2", extra: ["note", "kept too ✓"])
        XCTAssertEqual(try second.kc("ls", service).output, "alice\nbob\n", "no second key for the same item")
    }

    /// Two daemons at once over one file (two session buses of one user): storing in
    /// turn, each store made to a file the other changed since this daemon last read it,
    /// and at once; a third daemon finds every item of both by attributes.
    func testTwoDaemonsWithoutAVaultStoringInTurnAndAtOnceKeepEveryItemOfBoth() throws {
        let stateHome = try makeStateHome()
        let service = uniqueService()
        let first = try startBus(stateHome: stateHome)
        let second = try startBus(stateHome: stateHome)
        var expected: [String] = []
        for round in 1...4 {
            try store(on: first, service: service, username: "first-\(round)", value: "value-first-\(round)")
            try store(on: second, service: service, username: "second-\(round)", value: "value-second-\(round)")
            expected += ["value-first-\(round)", "value-second-\(round)"]
        }
        XCTAssertNotEqual(first.owner(), second.owner(), "two daemons, one per bus")
        let stored = try first.script("""
            for n in $(seq 1 8); do
              for bus in first second; do
                if [ $bus = first ]; then address='\(first.address)'; else address='\(second.address)'; fi
                ( printf 'value-%s-at-once-%s' $bus $n | DBUS_SESSION_BUS_ADDRESS="$address" timeout 60 secret-tool store --label "$bus $n" \\
                    service '\(service)' username "$bus-at-once-$n" kept '\(service)' || echo "store $bus $n failed" ) &
              done
            done
            wait
            """)
        XCTAssertEqual(stored.output, "", "\(stored)")
        expected += ["first", "second"].flatMap { bus in (1...8).map { "value-\(bus)-at-once-\($0)" } }
        // Both still running: the third daemon reads the file they both wrote.
        let third = try startBus(stateHome: stateHome)
        let found = try valuesFound(on: third, service: service)
        XCTAssertEqual(found["values"]?.strings, expected.sorted(), "every item of both daemons, by an attribute only the index holds: \(found)")
        // And each of the two sees the other's items.
        var seen = JSONValue.null
        for _ in 0..<20 {
            seen = try valuesFound(on: first, service: service)
            if seen["values"]?.strings == expected.sorted() { break }
            usleep(200_000)
        }
        XCTAssertEqual(seen["values"]?.strings, expected.sorted(), "the first daemon reads the file again when it changed")
    }

    /// A reboot empties the kernel, and the file of the boot before is discarded with
    /// them: an item of the same name stored after the reboot (`kc set`) is not given the
    /// attributes and label of the one before.
    func testARebootForgetsTheItemsAndTheirIndexTogether() throws {
        let stateHome = try makeStateHome()
        let service = uniqueService()
        let before = try startBus(stateHome: stateHome)
        try store(on: before, service: service, username: "alice", value: "before", extra: ["note", "from before the reboot"])
        before.stop()

        simulateReboot()
        // The file of the boot before, as a real reboot would leave it: this test cannot
        // change the kernel's boot id, so the file is made to name another one.
        let file = indexFile(stateHome)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        let current = try XCTUnwrap(bytes.range(of: Data(bootID.utf8)), "the file names this boot")
        let earlier = "00000000-1111-2222-3333-444444444444"
        XCTAssertEqual(earlier.utf8.count, bootID.utf8.count)
        bytes.replaceSubrange(current, with: Data(earlier.utf8))
        try bytes.write(to: URL(fileURLWithPath: file))
        XCTAssertEqual(chmod(file, 0o600), 0)

        let after = try startBus(stateHome: stateHome)
        XCTAssertEqual(try after.secretTool("lookup", "service", service, "username", "alice").status, 1, "the item went with the reboot")
        XCTAssertEqual(try after.kc("set", service, "alice", input: Array("after".utf8)).status, 0)
        let out = try after.python("""
            c = Client()
            s = c.open('plain')
            by_note, _ = c.search({'note': 'from before the reboot'})
            items, _ = c.search({'service': sys.argv[1], 'username': 'alice'})
            emit(by_note=by_note, attributes=c.get(items[0], ITEM, 'Attributes'), label=c.get(items[0], ITEM, 'Label'),
                 value=text(c.secret(s, items[0])[0]))
            """, arguments: [service])
        XCTAssertEqual(out["by_note"], [], "no record of the boot before: \(out)")
        XCTAssertEqual(out["attributes"], .object(["service": .string(service), "username": "alice"]), "the new item is kc's, with kc's attributes: \(out)")
        XCTAssertEqual(out["value"], "after")
        XCTAssertNotEqual(out["label"], "label of alice ✓")
        // The new daemon discarded it when it first looked (no record of this boot was
        // saved since, so there may be no file at all).
        let now = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
        XCTAssertNil(now.range(of: Data(earlier.utf8)), "the file of the boot before is gone")
    }

    /// The file is kc-secretd's only where no other user can reach it: a file there that
    /// is another user's, a link in its place, or a folder others can write in is never
    /// read nor written through; the daemon keeps its index in memory or refuses the
    /// change, saying why, and whatever is there stays as it was.
    func testTheIndexIsNeverReadOrWrittenWhereAnotherUserOrALinkCouldReachIt() throws {
        let service = uniqueService()
        func fresh(_ stateHome: String) throws -> String {
            let bus = try startBus(stateHome: stateHome)
            try store(on: bus, service: service, username: "planted", value: "planted", extra: ["note", "planted"])
            bus.stop()
            return indexFile(stateHome)
        }
        // A link in the file's place, to a valid index: not followed, not replaced.
        let linked = try makeStateHome()
        let target = try fresh(linked)
        XCTAssertEqual(rename(target, linked + "/target"), 0)
        XCTAssertEqual(symlink(linked + "/target", target), 0)
        let targetBytes = try Data(contentsOf: URL(fileURLWithPath: linked + "/target"))
        let overLink = try startBus(stateHome: linked)
        XCTAssertEqual(try overLink.secretTool("lookup", "note", "planted").status, 1, "the index behind a link is not read")
        let refused = try overLink.secretTool("store", "--label", "x", "service", service, "username", "through-link", input: "x")
        XCTAssertNotEqual(refused.status, 0, "a store is refused rather than writing over what it cannot read: \(refused)")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: linked + "/target")), targetBytes, "the link's target is untouched")
        var info = stat()
        XCTAssertEqual(lstat(target, &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFLNK, "the link stays")
        XCTAssertNotEqual(try overLink.kc("get", service, "through-link").status, 0, "the refused store left no value in the kernel")

        // A folder others can write in (not sticky): nothing is kept there.
        let open = try makeStateHome()
        XCTAssertEqual(chmod(open, 0o777), 0)
        let inOpen = try startBus(stateHome: open)
        try store(on: inOpen, service: service, username: "open", value: "open", extra: ["note", "open"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: open + "/kc"), "nothing is written under a folder others can write in")
        XCTAssertEqual(try inOpen.secretTool("lookup", "note", "open").output, "open", "the daemon still serves, from memory")

        // A file of another user's (only root can put one in the folder): not read, not replaced.
        guard getuid() == 0, UnprivilegedUser.available else { return }
        let foreign = try makeStateHome()
        let file = try fresh(foreign)
        XCTAssertEqual(try runCommand("/bin/chown", [UnprivilegedUser.name, file]).status, 0)
        let foreignBytes = try Data(contentsOf: URL(fileURLWithPath: file))
        let overForeign = try startBus(stateHome: foreign)
        XCTAssertEqual(try overForeign.secretTool("lookup", "note", "planted").status, 1, "another user's index is not read")
        XCTAssertNotEqual(try overForeign.secretTool("store", "--label", "x", "service", service, "username", "foreign", input: "x").status, 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), foreignBytes, "another user's file is not written over")
    }
}
