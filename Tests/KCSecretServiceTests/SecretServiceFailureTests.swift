import Foundation
import KCTestSupport
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A call that fails changes nothing it reports as not done, and a failure of the moment
/// (a full key quota, a full disk, a daemon killed mid-save) costs no item its value,
/// its attributes or the vault's room.
final class SecretServiceFailureTests: VaultTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requireSecretTool()
        try SecretServiceClients.requirePython()
    }

    /// The JSON lines the python clients of one account script printed, in order.
    private func emittedLines(_ result: CommandResult) -> [JSONValue] {
        result.output.split(separator: "\n").compactMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) }
    }

    /// The vault keeps items the kernel lacks (a new boot whose unlock had no room for
    /// them), and the user's key quota is full: a search cannot load them. It must not
    /// take that for their removal: when room comes back the items are found by the
    /// attributes their client gave, not only by `service` and `username`.
    func testASearchWithTheKeyQuotaFullKeepsTheRecordsOfItemsItCannotLoad() throws {
        _ = try VaultAccount.require()
        UnprivilegedUser.waitForKeyCollection(of: VaultAccount.uid)
        defer { VaultAccount.reset() }
        let vault = try makeVault(owner: VaultAccount.name)
        let service = "kc-test-quota-index.\(getpid())"
        let (store, storeFile) = try SecretServiceClients.sessionBusCommand(running: """
            c = Client()
            s = c.open('plain')
            for n in range(3):
                c.create(s, {'service': sys.argv[1], 'username': 'u%d' % n, 'kept': sys.argv[1]}, b'value-%d-' % n + b'x' * 200)
            emit(stored=3)
            """, arguments: [service])
        let (search, searchFile) = try SecretServiceClients.sessionBusCommand(running: """
            c = Client()
            s = c.open('plain')
            unlocked, locked = c.search({'kept': sys.argv[1]})
            values = c.attempt(ROOT, SERVICE, 'GetSecrets', 'aoo', unlocked, s.object_path)
            got = sorted(text(bytes(secret[2]))[:7] for secret in values['reply'][0].values()) if 'reply' in values else values
            emit(found=len(unlocked) + len(locked), values=got)
            """, arguments: [service])
        defer { for file in [storeFile, searchFile] { try? FileManager.default.removeItem(atPath: file) } }
        let result = try VaultAccount.run("""
            set -e
            printf '%s\\n' "$PASSPHRASE" | "$KC" vault init --work-factor 10 >/dev/null 2>&1
            \(store)
            # The items leave the kernel; the vault keeps them, and stays unlocked.
            keyctl unlink "$(keyctl search @u keyring 'kc:\(service)')" @u >/dev/null
            # The quota fills up (keys in a keyring of this shell's session keyring, which
            # also links the user keyring: clearing it would lose the vault's key).
            junk=$(keyctl newring junk @s)
            n=0
            for size in 4000 1000 250 60 16 4 1; do
                while head -c $size /dev/zero | tr '\\0' x | keyctl padd user "j$n" "$junk" >/dev/null 2>&1; do n=$((n+1)); done
            done
            grep "^ *$(id -u):" /proc/key-users >&2
            \(search)
            keyctl unlink "$junk" @s >/dev/null
            # Room again, once the kernel collected the keys.
            for i in $(seq 50); do
                used=$(awk -v u="$(id -u):" '$1 == u { split($5, b, "/"); print b[1] }' /proc/key-users)
                [ "${used:-0}" -lt 10000 ] && break
                sleep 0.1
            done
            \(search)
            """, vault: vault)
        let lines = emittedLines(result)
        XCTAssertEqual(lines.count, 3, "store, a search with the quota full, a search with room: \(result)")
        guard lines.count == 3 else { return }
        XCTAssertEqual(lines[0]["stored"], 3)
        XCTAssertEqual(lines[1]["found"], 3, "with the quota full the items are still there (unreadable for now): \(result)")
        XCTAssertEqual(lines[2]["found"], 3, "with room again, every item is found by the attributes its client gave: \(result)")
        XCTAssertEqual(lines[2]["values"], ["value-0", "value-1", "value-2"], "\(result)")
    }

    /// The vault's disk has room for an item's file but not for the index: a SetSecret,
    /// a Delete and a CreateItem are refused, and each leaves the item as it was, in the
    /// kernel and in the vault. With room again they succeed.
    func testACallRefusedForAFullDiskChangesNothingInTheKernelOrTheVault() throws {
        let vault = try makeVault(create: false)
        try mountTmpfs(on: vault, options: "size=2m")
        try vault.create()
        let service = uniqueService()
        let bus = try startSecretServiceBus(vault: vault)
        let made = try bus.python("""
            c = Client()
            s = c.open('plain')
            item = c.create(s, {'service': sys.argv[1], 'username': 'a', 'kept': sys.argv[1]}, b'old-value')
            # Neighbours with large attributes: the index grows past the room left below.
            for n in range(6):
                c.create(s, {'service': sys.argv[1], 'username': 'big%d' % n, 'blob': 'z' * 60000}, b'v')
            emit(item=item)
            """, arguments: [service])
        let item = try XCTUnwrap(made["item"]?.string, "\(made)")
        let items = try vault.itemDigest()
        // Room for a small file (an item's), not for the index (about 360 kB).
        var info = statvfs()
        XCTAssertEqual(statvfs(vault.dataHome, &info), 0)
        let free = Int(info.f_bavail) * Int(info.f_frsize)
        let keep = 128 * 1024
        XCTAssertGreaterThan(free, keep)
        let filled = try runShell("dd if=/dev/zero of='\(vault.dataHome)/fill' bs=4096 count=\((free - keep) / 4096) 2>&1")
        XCTAssertEqual(filled.status, 0, "\(filled)")

        let refused = try bus.python("""
            c = Client()
            s = c.open('plain')
            item = sys.argv[2]
            def value():
                got = c.attempt(item, ITEM, 'GetSecret', 'o', s.object_path)
                return text(bytes(got['reply'][0][2])) if 'reply' in got else got
            set_secret = c.attempt(item, ITEM, 'SetSecret', '(oayays)', (s.object_path, b'', b'new-value', 'text/plain'))
            after_set = value()
            delete = c.attempt(item, ITEM, 'Delete')
            after_delete = value()
            create = c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b',
                               {ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': 'new'})},
                               (s.object_path, b'', b'new-item', 'text/plain'), True)
            emit(set_secret=set_secret, delete=delete, create=create, after_set=after_set, after_delete=after_delete,
                 found=len(c.search({'kept': sys.argv[1]})[0]))
            """, arguments: [service, item])
        for call in ["set_secret", "delete", "create"] {
            XCTAssertNotNil(refused[call]?["error"], "\(call) is refused on a full disk: \(refused)")
        }
        XCTAssertEqual(refused["after_set"], "old-value", "the refused SetSecret left the value as it was: \(refused)")
        XCTAssertEqual(refused["after_delete"], "old-value", "the refused Delete left the item: \(refused)")
        XCTAssertEqual(refused["found"], 1)
        XCTAssertEqual(try vault.get(service, "a").output, "old-value", "in the kernel too")
        XCTAssertNotEqual(try vault.get(service, "new").status, 0, "the refused CreateItem stored nothing")
        XCTAssertEqual(try vault.itemDigest(), items, "no item file changed")

        _ = try runShell("rm -f '\(vault.dataHome)/fill'")
        let later = try bus.python("""
            c = Client()
            s = c.open('plain')
            c.call(sys.argv[1], ITEM, 'SetSecret', '(oayays)', (s.object_path, b'', b'new-value', 'text/plain'))
            emit(value=text(c.secret(s, sys.argv[1])[0]))
            """, arguments: [item])
        XCTAssertEqual(later["value"], "new-value", "with room again the same call succeeds")
        XCTAssertEqual(try vault.get(service, "a").output, "new-value")
    }

    /// Runs `secret-tool store` on `bus` in the background, kills the daemon with SIGKILL
    /// the moment a large staged file (the index; an item's is a few kB) is in the
    /// vault's `tmp/`, and returns whether one was left there.
    private func killDaemonMidSave(on bus: SessionBus, vault: VaultFixture, service: String, username: String) throws -> Bool {
        let daemon = try XCTUnwrap(bus.activatedOwner())
        let client = Process()
        client.executableURL = URL(fileURLWithPath: SecretServiceClients.secretTool)
        client.arguments = ["store", "--label", username, "service", service, "username", username]
        client.environment = bus.environment
        let input = Pipe()
        client.standardInput = input
        client.standardOutput = FileHandle.nullDevice
        client.standardError = FileHandle.nullDevice
        try client.run()
        input.fileHandleForWriting.write(Data("value".utf8))
        try input.fileHandleForWriting.close()
        let tmp = vault.path + "/tmp"
        var killed = false
        let deadline = Date().addingTimeInterval(20)
        while !killed && Date() < deadline {
            for name in vault.stagedFiles() {
                var info = stat()
                if stat(tmp + "/" + name, &info) == 0, info.st_size > 256 * 1024 {
                    kill(daemon, SIGKILL)
                    killed = true
                    break
                }
            }
            if !killed && !client.isRunning { break }
        }
        client.waitUntilExit()
        if !killed { kill(daemon, SIGKILL) }
        while SessionBus.isRunning(daemon) { usleep(10_000) }
        return killed && vault.stagedFiles().contains { name in
            var info = stat()
            return stat(tmp + "/" + name, &info) == 0 && info.st_size > 256 * 1024
        }
    }

    /// A kill -9 while the index is being saved leaves its staged copy (up to 64 MiB) in
    /// the vault's `tmp/`: the next save of the index by another daemon, and the next
    /// daemon's first load, remove it; the index stays whole.
    func testAStagedIndexLeftByADaemonKilledMidSaveIsRemovedByTheNextSaveAndTheNextLoad() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let builder = try startSecretServiceBus(vault: vault)
        // An index of about 2.5 MB: each save takes a while to write.
        let built = try builder.python("""
            c = Client()
            s = c.open('plain')
            for n in range(40):
                c.create(s, {'service': sys.argv[1], 'username': 'big%d' % n, 'kept': sys.argv[1], 'blob': 'z' * 63000}, b'v')
            emit(count=len(c.search({'kept': sys.argv[1]})[0]))
            """, arguments: [service])
        XCTAssertEqual(built["count"], 40)
        builder.stop()

        // The next save: a daemon that was running when another was killed.
        var left = false
        let survivor = try startSecretServiceBus(vault: vault)
        XCTAssertEqual(try survivor.secretTool("lookup", "service", service, "username", "big0").output, "v")
        for attempt in 0..<5 where !left {
            let victim = try startSecretServiceBus(vault: vault)
            left = try killDaemonMidSave(on: victim, vault: vault, service: service, username: "killed-\(attempt)")
        }
        guard left else { throw XCTSkip("the save finished before the daemon could be killed in it, five times") }
        let stored = try survivor.secretTool("store", "--label", "after", "service", service, "username", "after-kill", input: "after")
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(vault.stagedFiles(), [], "the next save removed the staged index")
        XCTAssertEqual(try survivor.secretTool("lookup", "service", service, "username", "after-kill").output, "after")

        // The next load: a daemon that only searches.
        left = false
        let before = Set(vault.stagedFiles())
        for attempt in 0..<5 where !left {
            let victim = try startSecretServiceBus(vault: vault)
            left = try killDaemonMidSave(on: victim, vault: vault, service: service, username: "killed-again-\(attempt)")
                && !Set(vault.stagedFiles()).subtracting(before).isEmpty
        }
        guard left else { throw XCTSkip("the save finished before the daemon could be killed in it, five times") }
        let reader = try startSecretServiceBus(vault: vault)
        let found = try reader.python("""
            c = Client()
            emit(count=len(c.search({'kept': sys.argv[1]})[0]))
            """, arguments: [service])
        XCTAssertEqual(found["count"], 40, "the index is whole")
        XCTAssertEqual(vault.stagedFiles(), [], "the next daemon's first load removed the staged index")
    }
}
