import Foundation
import KCTestSupport
import XCTest

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
    /// reading the index again (it used to be read whole per path: seconds for a large
    /// index, while every other client waited).
    func testUnlockingManyPathsWhileTheVaultIsLockedDoesNotReadTheIndexForEach() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let bus = try startSecretServiceBus(vault: vault)
        // An index of about 2.5 MB.
        let built = try bus.python("""
            c = Client()
            s = c.open('plain')
            for n in range(40):
                c.create(s, {'service': sys.argv[1], 'username': 'big%d' % n, 'blob': 'z' * 63000}, b'v')
            emit(ok=True)
            """, arguments: [service])
        XCTAssertEqual(built["ok"], true)
        XCTAssertEqual(try vault.lock().status, 0)
        let locked = try startSecretServiceBus(vault: vault)
        let out = try locked.python("""
            import time
            c = Client(timeout=120)
            paths = [ROOT + '/collection/login/x__%d' % n for n in range(3000)]
            started = time.monotonic()
            unlocked, prompt = c.call(ROOT, SERVICE, 'Unlock', 'ao', paths)
            emit(seconds=time.monotonic() - started, unlocked=len(unlocked), prompt=prompt != '/')
            """)
        XCTAssertEqual(out["unlocked"], 0, "\(out)")
        XCTAssertEqual(out["prompt"], true)
        let seconds = out["seconds"].flatMap { if case .number(let value) = $0 { value } else { nil } } ?? .infinity
        // Read per path, 3000 reads of 2.5 MB take tens of seconds here; without, well under one.
        XCTAssertLessThan(seconds, 5, "Unlock of 3000 paths while the vault is locked: \(out)")
    }
}
