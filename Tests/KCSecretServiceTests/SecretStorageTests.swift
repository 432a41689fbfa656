import Foundation
import KCTestSupport
import XCTest

/// python SecretStorage as programs use it (`dbus_init`, the default collection,
/// `create_item`, `get_secret`, searches), over both transports: its own `open_session`
/// (DH, what it always picks first) and a `plain` session handed to its objects.
final class SecretStorageTests: KeyringTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
    }

    /// Stores, reads, searches and deletes with SecretStorage's objects; `session` is the
    /// python expression of the session they use (None: SecretStorage opens its own).
    private func roundTrip(session: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let out = try bus.python("""
            import secretstorage
            c = Client()
            session = \(session)
            collection = secretstorage.Collection(c.conn, DEFAULT, session=session)
            attributes = {'service': sys.argv[1], 'username': 'alice', 'application': 'kc-tests'}
            item = collection.create_item('SecretStorage item', attributes, b'ss-s3cret \\xc3\\xa9', replace=True)
            value = item.get_secret()
            encrypted = item.session.encrypted
            found = [i.get_label() for i in secretstorage.search_items(c.conn, {'service': sys.argv[1]})]
            in_collection = [i.item_path for i in collection.search_items({'username': 'alice', 'service': sys.argv[1]})]
            attributes_back = item.get_attributes()
            content_type = item.get_secret_content_type()
            item.set_secret(b'changed')
            changed = item.get_secret()
            item.delete()
            after = list(secretstorage.search_items(c.conn, {'service': sys.argv[1]}))
            emit(value=text(value), encrypted=encrypted, found=found, path=item.item_path, in_collection=in_collection,
                 attributes=attributes_back, content_type=content_type, changed=text(changed), after=len(after))
            """, arguments: [service], file: file, line: line)
        XCTAssertEqual(out["value"], "ss-s3cret é", "\(out)", file: file, line: line)
        XCTAssertEqual(out["found"], ["SecretStorage item"], file: file, line: line)
        XCTAssertEqual(out["in_collection"]?.strings, out["path"].map { [$0.string ?? ""] }, file: file, line: line)
        XCTAssertEqual(out["attributes"], .object(["service": .string(service), "username": "alice", "application": "kc-tests"]), file: file, line: line)
        XCTAssertEqual(out["content_type"], "text/plain", file: file, line: line)
        XCTAssertEqual(out["changed"], "changed", file: file, line: line)
        XCTAssertEqual(out["after"], 0, "deleted: \(out)", file: file, line: line)
        XCTAssertEqual(try bus.kc("get", service, "alice").status, 1, "the kc item went with it", file: file, line: line)
        XCTAssertEqual(out["encrypted"], .bool(session == "None"), "the transport used", file: file, line: line)
    }

    func testPlainSessionRoundTrip() throws {
        try roundTrip(session: "c.open('plain')")
    }

    func testDHSessionRoundTripAsSecretStorageOpensIt() throws {
        try roundTrip(session: "None")
    }

    func testTheLibraryEntryPointsStoreTheKCItem() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let out = try bus.python("""
            import secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(connection)
            item = collection.create_item('token', {'service': sys.argv[1], 'username': 'api'}, b'from-dbus-init')
            emit(default=collection.collection_path, locked=collection.is_locked(), label=collection.get_label(),
                 value=text(item.get_secret()), any=secretstorage.check_service_availability(connection))
            """, arguments: [service])
        XCTAssertEqual(out["value"], "from-dbus-init", "\(out)")
        XCTAssertEqual(out["default"], "/org/freedesktop/secrets/aliases/default")
        XCTAssertEqual(out["locked"], false)
        XCTAssertEqual(out["any"], true)
        XCTAssertEqual(try bus.kc("get", service, "api").output, "from-dbus-init")
    }

    /// A DH key agreement wrong for some keys (the padding of the shared secret, the KDF)
    /// fails only for some sessions: many sessions, each with its own keys, and values
    /// of every length around the AES block.
    func testManyDHSessionsAllAgreeWithTheDaemon() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            item = None
            wrong = []
            for n in range(60):
                session = c.open('dh')
                value = os.urandom(n % 40 + 1)
                item = c.create(session, {'service': sys.argv[1], 'username': 'dh'}, value)
                back, _ = c.secret(session, item)
                if back != value:
                    wrong.append(n)
                c.call(session.object_path, 'org.freedesktop.Secret.Session', 'Close')
            # What crosses the bus is not the secret: a 16-byte IV and whole AES blocks.
            session = c.open('dh')
            c.create(session, {'service': sys.argv[1], 'username': 'dh'}, b'visible?')
            (path, iv, sealed, ctype), = c.call(item, ITEM, 'GetSecret', 'o', session.object_path)
            emit(wrong=wrong, iv=len(iv), sealed=len(sealed), clear=b'visible?' in bytes(sealed))
            """, arguments: [service])
        XCTAssertEqual(out["wrong"], [], "sessions whose secret came back wrong: \(out)")
        XCTAssertEqual(out["iv"], 16)
        XCTAssertEqual(out["sealed"], 16)
        XCTAssertEqual(out["clear"], false)
        XCTAssertEqual(try bus.kc("get", service, "dh").output, "visible?")
    }

    /// The daemon prepares the next key pair while idle; sessions opened back to back
    /// (40 OpenSession calls sent before any reply is read) still get one each.
    func testSessionsOpenedBackToBackEachGetTheirOwnServerKey() throws {
        let bus = try startSecretServiceBus()
        let out = try bus.python("""
            c = Client()
            serials = []
            for n in range(40):
                serial = next(c.conn.outgoing_serial)
                c.conn.send(new_method_call(DBusAddress(ROOT, NAME, SERVICE), 'OpenSession', 'sv',
                                            (DH, ('ay', int_to_bytes(Session().my_public_key)))), serial=serial)
                serials.append(serial)
            replies = {}
            while len(replies) < len(serials):
                message = c.conn.receive(timeout=20)
                if message.header.fields.get(HeaderFields.reply_serial) in serials:
                    replies[message.header.fields[HeaderFields.reply_serial]] = message
            keys = [bytes(replies[serial].body[0][1]) for serial in serials]
            emit(distinct=len(set(keys)), sizes=sorted(set(len(k) for k in keys)), paths=len(set(replies[s].body[1] for s in serials)))
            """)
        XCTAssertEqual(out["distinct"], 40, "no server key is used twice: \(out)")
        XCTAssertEqual(out["sizes"], [128], "each public key is 128 bytes, left-padded")
        XCTAssertEqual(out["paths"], 40)
    }

    /// The spec's `NoSuchObject` for an item or collection that is not there, which
    /// SecretStorage turns into `ItemNotFoundException` (its own tests expect it): for a
    /// path that names no item, one whose item is missing, and one deleted meanwhile.
    func testAnUnknownItemOrCollectionRaisesSecretStoragesItemNotFoundException() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let out = try bus.python("""
            import secretstorage
            from secretstorage.exceptions import ItemNotFoundException
            from secretstorage.util import DBusAddressWrapper
            connection = secretstorage.dbus_init()

            def outcome(call):
                try:
                    call()
                    return 'no exception'
                except ItemNotFoundException:
                    return 'ItemNotFoundException'
                except Exception as error:
                    return '%s: %s' % (type(error).__name__, error)

            def unread_item(path):
                # An Item as SecretStorage holds one whose path stopped naming an item,
                # without the read of its label that its constructor makes.
                item = secretstorage.Item.__new__(secretstorage.Item)
                item.item_path, item.connection, item.session = path, connection, None
                item._item = DBusAddressWrapper(path, ITEM, connection)
                return item

            collection = secretstorage.get_default_collection(connection)
            deleted = collection.create_item('doomed', {'service': sys.argv[1], 'username': 'doomed'}, b'x')
            deleted.delete()
            results = {}
            for name, path in {'no item name': ROOT + '/collection/login/nosuch',
                               'too deep': ROOT + '/collection/login/a__b/c',
                               'missing item': ROOT + '/collection/login/no_2ditem__here',
                               'missing collection': ROOT + '/collection/nosuch/a__b',
                               'deleted': deleted.item_path}.items():
                results[name] = [outcome(lambda: secretstorage.Item(connection, path)),
                                 outcome(lambda: unread_item(path).get_secret()),
                                 outcome(lambda: unread_item(path).get_label())]
            for name, path in {'collection': ROOT + '/collection/nosuch', 'alias': ROOT + '/aliases/nosuch'}.items():
                results[name] = [outcome(lambda: secretstorage.Collection(connection, path))]
            c = Client()
            emit(results=results, error=c.attempt(ROOT + '/collection/login/nosuch', ITEM, 'GetSecret', 'o', '/').get('error'))
            """, arguments: [service])
        let results = out["results"]?.object ?? [:]
        XCTAssertEqual(results.count, 7, "\(out)")
        for (name, outcomes) in results.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(Set(outcomes.strings), ["ItemNotFoundException"], "\(name): \(outcomes)")
        }
        XCTAssertEqual(out["error"], "org.freedesktop.Secret.Error.NoSuchObject", "\(out)")
    }

    func testAClosedSessionIsRefused() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            session = c.open('dh')
            item = c.create(session, {'service': sys.argv[1], 'username': 'closed'}, b'x')
            c.call(session.object_path, 'org.freedesktop.Secret.Session', 'Close')
            emit(after=c.attempt(item, ITEM, 'GetSecret', 'o', session.object_path))
            """, arguments: [service])
        XCTAssertEqual(out["after"]?["error"], "org.freedesktop.Secret.Error.NoSession", "\(out)")
    }
}
