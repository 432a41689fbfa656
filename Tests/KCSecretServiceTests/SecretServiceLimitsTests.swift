import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// No client can wedge kc-secretd for the others: what one call may ask is bounded
/// (labels, attribute sets, alias names) and checked before any work, and a locked
/// vault's index is not read again for every object a call names.
final class SecretServiceLimitsTests: VaultTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
    }

    /// A 70 kB collection label used to make a 70 kB object path that broke the
    /// `Collections` property for every client, for good: it is refused, and a long
    /// label that is allowed makes a short path.
    func testACollectionLabelIsBoundedAndNeverBreaksTheCollectionsProperty() throws {
        let bus = try startSecretServiceBus()
        let out = try bus.python("""
            c = Client()
            huge = c.attempt(ROOT, SERVICE, 'CreateCollection', 'a{sv}s', {'org.freedesktop.Secret.Collection.Label': ('s', 'x' * 70000)}, '')
            long_label = 'y' * 4000
            collection, prompt = c.call(ROOT, SERVICE, 'CreateCollection', 'a{sv}s', {'org.freedesktop.Secret.Collection.Label': ('s', long_label)}, '')
            relabel = c.attempt(collection, PROPERTIES, 'Set', 'ssv', COLLECTION, 'Label', ('s', 'z' * 70000))
            listed = c.get(ROOT, SERVICE, 'Collections')
            label = c.get(collection, COLLECTION, 'Label')
            deleted = c.attempt(collection, COLLECTION, 'Delete')
            emit(huge=huge, relabel=relabel, path_length=len(collection), listed=collection in listed, label_kept=label == long_label,
                 deleted=deleted, after=c.get(ROOT, SERVICE, 'Collections'))
            """)
        XCTAssertEqual(out["huge"]?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(out)")
        XCTAssertTrue(out["huge"]?["message"]?.string?.contains("4096") ?? false, "the error names the limit: \(out)")
        XCTAssertEqual(out["relabel"]?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(out)")
        XCTAssertLessThanOrEqual(out["path_length"]?.int ?? .max, 200, "a long label makes a short object path: \(out)")
        XCTAssertEqual(out["listed"], true)
        XCTAssertEqual(out["label_kept"], true, "the label itself is kept whole")
        XCTAssertNotNil(out["deleted"]?["reply"], "the collection can be deleted: \(out)")
        XCTAssertEqual(out["after"]?.array.count, 2, "login and session: \(out)")
    }

    /// A search for more attributes than any item may have is refused before any look
    /// at an item; an alias that is not an object path element is refused, so it never
    /// reaches the introspection XML or an object path.
    func testASearchAndAnAliasBeyondWhatAnItemOrAPathCanHoldAreRefused() throws {
        let bus = try startSecretServiceBus()
        let out = try bus.python("""
            c = Client()
            many = {'a%03d' % n: 'v' for n in range(300)}
            search = c.attempt(ROOT, SERVICE, 'SearchItems', 'a{ss}', many)
            big = c.attempt(ROOT, SERVICE, 'SearchItems', 'a{ss}', {'blob': 'z' * 70000})
            login = ROOT + '/collection/login'
            odd = c.attempt(ROOT, SERVICE, 'SetAlias', 'so', 'x"/><node name="evil', login)
            plain = c.attempt(ROOT, SERVICE, 'SetAlias', 'so', 'work_2', login)
            read = c.call(ROOT, SERVICE, 'ReadAlias', 's', 'work_2')[0]
            c.call(ROOT, SERVICE, 'SetAlias', 'so', 'work_2', '/')
            emit(search=search, big=big, odd=odd, plain=plain, read=read)
            """)
        XCTAssertEqual(out["search"]?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(out)")
        XCTAssertEqual(out["big"]?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(out)")
        XCTAssertEqual(out["odd"]?["error"], "org.freedesktop.DBus.Error.InvalidArgs", "\(out)")
        XCTAssertNotNil(out["plain"]?["reply"], "\(out)")
        XCTAssertEqual(out["read"], "/org/freedesktop/secrets/collection/login")
    }

    /// While the vault is locked, each object an `Unlock` names is answered without
    /// reading the index again: it used to be opened and read whole once per path (37 ms
    /// a path with a 24 MB index), while every other client waited. Counted with inotify:
    /// the opens of the index's file during one Unlock of 3000 paths.
    func testUnlockingManyPathsWhileTheVaultIsLockedDoesNotReadTheIndexForEach() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let bus = try startSecretServiceBus(vault: vault)
        let built = try bus.python("""
            c = Client()
            s = c.open('plain')
            for n in range(5):
                c.create(s, {'service': sys.argv[1], 'username': 'big%d' % n, 'blob': 'z' * 63000}, b'v')
            emit(ok=True)
            """, arguments: [service])
        XCTAssertEqual(built["ok"], true)
        XCTAssertEqual(try vault.lock().status, 0)
        let locked = try startSecretServiceBus(vault: vault)
        XCTAssertNotNil(locked.activatedOwner(), "the daemon runs before the count starts")

        let watch = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        XCTAssertGreaterThanOrEqual(watch, 0)
        defer { close(watch) }
        // Opens and closes alternate, so the kernel never merges two opens into one event.
        XCTAssertGreaterThanOrEqual(inotify_add_watch(watch, vault.path + "/documents/secret-service.age", UInt32(IN_OPEN | IN_CLOSE_NOWRITE)), 0)
        let out = try locked.python("""
            import time
            c = Client(timeout=300)
            paths = [ROOT + '/collection/login/x__%d' % n for n in range(3000)]
            started = time.monotonic()
            unlocked, prompt = c.call(ROOT, SERVICE, 'Unlock', 'ao', paths)
            emit(seconds=round(time.monotonic() - started, 3), unlocked=len(unlocked), prompt=prompt != '/')
            """)
        var opens = 0
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(watch, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            var offset = 0
            while offset + 16 <= count {
                let mask = buffer.withUnsafeBytes { $0.load(fromByteOffset: offset + 4, as: UInt32.self) }
                let length = buffer.withUnsafeBytes { $0.load(fromByteOffset: offset + 12, as: UInt32.self) }
                if mask & UInt32(IN_OPEN) != 0 { opens += 1 }
                offset += 16 + Int(length)
            }
        }
        XCTAssertEqual(out["unlocked"], 0, "\(out)")
        XCTAssertEqual(out["prompt"], true, "the locked vault needs kc unlock: \(out)")
        XCTAssertLessThan(opens, 10, "the index's file was opened \(opens) times for one Unlock of 3000 paths (\(out))")
    }

    /// `Unlock`, `Lock` and `GetSecrets` of more object paths than one call may name are
    /// refused before any of them is looked at, naming the limit; at the limit they are
    /// answered, and the daemon still serves the next call.
    func testUnlockLockAndGetSecretsOfTooManyPathsAreRefusedBeforeAnyWork() throws {
        let bus = try startSecretServiceBus()
        let out = try bus.python("""
            c = Client(timeout=120)
            s = c.open('plain')
            over = [ROOT + '/collection/login/x__%d' % n for n in range(10001)]
            at = over[:10000]
            emit(unlock=c.attempt(ROOT, SERVICE, 'Unlock', 'ao', over),
                 lock=c.attempt(ROOT, SERVICE, 'Lock', 'ao', over),
                 get=c.attempt(ROOT, SERVICE, 'GetSecrets', 'aoo', over, s.object_path),
                 get_at=c.attempt(ROOT, SERVICE, 'GetSecrets', 'aoo', at, s.object_path),
                 unlock_at=c.attempt(ROOT, SERVICE, 'Unlock', 'ao', at),
                 after=c.get(ROOT, SERVICE, 'Collections'))
            """)
        for call in ["unlock", "lock", "get"] {
            XCTAssertEqual(out[call]?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(call): \(out)")
            XCTAssertTrue(out[call]?["message"]?.string?.contains("10001 object paths") ?? false, "\(call): \(out)")
        }
        XCTAssertNotNil(out["get_at"]?["reply"], "10,000 paths are answered: \(out)")
        XCTAssertNotNil(out["unlock_at"]?["reply"], "\(out)")
        XCTAssertEqual(out["after"]?.array.count, 2, "login and session: \(out)")
    }
}
