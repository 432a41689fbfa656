import Foundation
import KCTestSupport
import XCTest

/// The Secret Service API as clients rely on it, call by call (python on jeepney, plain
/// sessions unless a test says otherwise): attributes, replace, delete, empty secrets,
/// content types, labels, searches, locking, signals, aliases and collections.
final class ConformanceTests: KeyringTestCase {
    private var bus: SessionBus!

    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
        bus = try startSecretServiceBus()
    }

    func testNonASCIIAttributesAreKeptExactlyAndFindTheItem() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            attributes = {'service': sys.argv[1], 'username': 'jürgen', 'ключ': 'значение ✓', 'emoji 🔑': '🗝 ü', 'empty': ''}
            item = c.create(s, attributes, 'wert ✓'.encode(), label='Schlüssel ✓')
            emit(attributes=c.get(item, ITEM, 'Attributes'), label=c.get(item, ITEM, 'Label'),
                 byKey=c.search({'ключ': 'значение ✓'})[0] == [item], byEmoji=c.search({'emoji 🔑': '🗝 ü', 'service': sys.argv[1]})[0] == [item],
                 wrong=c.search({'ключ': 'значение', 'service': sys.argv[1]})[0], value=text(c.secret(s, item)[0]))
            """, arguments: [service])
        XCTAssertEqual(out["attributes"], .object(["service": .string(service), "username": "jürgen", "ключ": "значение ✓", "emoji 🔑": "🗝 ü", "empty": ""]), "\(out)")
        XCTAssertEqual(out["label"], "Schlüssel ✓")
        XCTAssertEqual(out["byKey"], true)
        XCTAssertEqual(out["byEmoji"], true)
        XCTAssertEqual(out["wrong"], [], "a value that differs does not match")
        XCTAssertEqual(out["value"], "wert ✓")
        XCTAssertEqual(try bus.kc("get", service, "jürgen").output, "wert ✓")
    }

    /// Chromium stores about 20-30 attributes per password, with no `service`: the kc item
    /// is named by its `xdg:schema` and label.
    func testThirtyAttributesLikeChromiumAreKeptAndEachFindsTheItem() throws {
        let label = uniqueService()
        addTeardownBlock { [bus] in _ = try? bus?.kc("rm", "chrome_libsecret_password_schema", label) }
        // The service is named by the schema, not by this test: its emptied keyring goes too.
        servicesToRemove.append("chrome_libsecret_password_schema")
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            attributes = {'xdg:schema': 'chrome_libsecret_password_schema', 'application': 'chrome-kc-test',
                          'origin_url': 'https://login.example.com/', 'action_url': 'https://login.example.com/session',
                          'username_element': 'login', 'username_value': 'grace', 'password_element': 'pw',
                          'submit_element': '', 'signon_realm': 'https://login.example.com/', 'preferred': '1',
                          'date_created': '13300000000000000', 'blacklisted_by_user': '0', 'scheme': '0', 'type': '0',
                          'times_used': '3', 'date_synced': '0', 'display_name': 'Grace Ü', 'avatar_url': '',
                          'federation_url': '', 'should_skip_zero_click': '0', 'generation_upload_status': '0',
                          'form_data': 'AAAA' * 40, 'moving_blocked_for': '', 'date_last_used': '13300000000000001',
                          'date_password_modified': '13300000000000002', 'is_relying_party': '0',
                          'password_value_hash': 'x', 'sender_email': '', 'sender_name': '', 'kc_test_label': sys.argv[1]}
            item = c.create(s, attributes, b'chr0me', label=sys.argv[1])
            every = all(c.search({k: v, 'kc_test_label': sys.argv[1]})[0] == [item] for k, v in attributes.items())
            emit(count=len(attributes), back=c.get(item, ITEM, 'Attributes') == attributes, every=every,
                 all=c.search(attributes)[0] == [item], wrong=c.search(dict(attributes, times_used='4'))[0],
                 value=text(c.secret(s, item)[0]), type=c.get(item, ITEM, 'Type'))
            """, arguments: [label])
        XCTAssertEqual(out["count"], 30)
        XCTAssertEqual(out["back"], true, "all 30 attributes come back exactly: \(out)")
        XCTAssertEqual(out["every"], true, "each attribute alone finds the item")
        XCTAssertEqual(out["all"], true)
        XCTAssertEqual(out["wrong"], [])
        XCTAssertEqual(out["value"], "chr0me")
        XCTAssertEqual(try bus.kc("get", "chrome_libsecret_password_schema", label).output, "chr0me",
                       "named by the xdg:schema and the label, as the README says")
    }

    func testReplaceTrueChangesTheItemAndReplaceFalseAddsAnother() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            attributes = {'service': sys.argv[1], 'username': 'heidi'}
            first = c.create(s, attributes, b'one', label='first')
            replaced = c.create(s, attributes, b'two', label='second', replace=True)
            after_replace = c.search(attributes)[0]
            added = c.create(s, attributes, b'three', label='third', replace=False)
            emit(first=first, replaced=replaced, after_replace=after_replace, added=added,
                 both=sorted(c.search(attributes)[0]), values=sorted(text(v) for v in c.secrets(s, [first, added]).values()),
                 label=c.get(first, ITEM, 'Label'))
            """, arguments: [service])
        XCTAssertEqual(out["replaced"], out["first"], "replace=true gives the same item a new value: \(out)")
        XCTAssertEqual(out["after_replace"], .array(out["first"].map { [$0] } ?? []))
        XCTAssertEqual(out["label"], "second", "and the replacing call's label")
        XCTAssertNotEqual(out["added"], out["first"], "replace=false makes a second item")
        XCTAssertEqual(out["both"]?.strings.count, 2)
        XCTAssertEqual(out["values"], ["three", "two"])
        XCTAssertEqual(try bus.kc("ls", service).output, "heidi\nheidi (2)\n", "the second takes the next free kc name")
        XCTAssertEqual(try bus.kc("get", service, "heidi").output, "two")
        XCTAssertEqual(try bus.kc("get", service, "heidi (2)").output, "three")
    }

    func testDeleteRemovesTheItemAndItsKCItem() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            item = c.create(s, {'service': sys.argv[1], 'username': 'ivan'}, b'doomed')
            prompt = c.delete(item)
            emit(prompt=prompt, search=c.search({'service': sys.argv[1]})[0], get=c.attempt(item, ITEM, 'GetSecret', 'o', s.object_path),
                 again=c.attempt(item, ITEM, 'Delete'), items=item in c.get(DEFAULT, COLLECTION, 'Items'))
            """, arguments: [service])
        XCTAssertEqual(out["prompt"], "/", "deleting needs no prompt")
        XCTAssertEqual(out["search"], [])
        XCTAssertEqual(out["get"]?["error"], "org.freedesktop.Secret.Error.NoSuchObject", "\(out)")
        XCTAssertEqual(out["again"]?["error"], "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(out["items"], false)
        XCTAssertEqual(try bus.kc("get", service, "ivan").status, 1)
    }

    /// SecretStorage's own tests store `''` as `data/null` and read `b''` back; the kernel
    /// refuses empty keys, so the daemon keeps it as index metadata.
    func testAnEmptySecretComesBackEmptyWithItsContentType() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            results = {}
            for algorithm in ('plain', 'dh'):
                s = c.open(algorithm)
                item = c.create(s, {'service': sys.argv[1], 'username': algorithm}, b'', content_type='data/null')
                value, content_type = c.secret(s, item)
                results[algorithm] = [value.hex(), content_type, c.search({'service': sys.argv[1], 'username': algorithm})[0] == [item],
                                      [v.hex() for v in c.secrets(s, [item]).values()]]
                c.call(item, ITEM, 'SetSecret', '(oayays)', format_secret(s, b'now-full', 'text/plain'))
                results[algorithm].append(text(c.secret(s, item)[0]))
            emit(**results)
            """, arguments: [service])
        for algorithm in ["plain", "dh"] {
            XCTAssertEqual(out[algorithm], ["", "data/null", true, [""], "now-full"], "\(algorithm): \(out)")
            XCTAssertEqual(try bus.kc("get", service, algorithm).output, "now-full")
        }
    }

    func testContentTypesAreKept() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            html = c.create(s, {'service': sys.argv[1], 'username': 'html'}, b'<b>bold</b>', content_type='text/html')
            binary = c.create(s, {'service': sys.argv[1], 'username': 'bin'}, bytes(range(256)), content_type='application/octet-stream')
            emit(html=c.secret(s, html)[1], binary=c.secret(s, binary)[1], bytes=c.secret(s, binary)[0] == bytes(range(256)))
            """, arguments: [service])
        XCTAssertEqual(out["html"], "text/html", "kc keeps content types (gnome-keyring drops them)")
        XCTAssertEqual(out["binary"], "application/octet-stream")
        XCTAssertEqual(out["bytes"], true)
        XCTAssertEqual(try bus.kc("get", service, "bin").standardOutput, Array(0...255))
    }

    func testLabelsAndAttributesCanBeChanged() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            item = c.create(s, {'service': sys.argv[1], 'username': 'judy'}, b'v', label='old label')
            before = c.get(item, ITEM, 'Label')
            c.set(item, ITEM, 'Label', 's', 'new label ✓')
            c.set(item, ITEM, 'Attributes', 'a{ss}', {'service': sys.argv[1], 'username': 'judy', 'added': 'yes'})
            wrong_type = c.attempt(item, PROPERTIES, 'Set', 'ssv', ITEM, 'Label', ('u', 7))
            emit(before=before, after=c.get(item, ITEM, 'Label'), found=c.search({'added': 'yes', 'service': sys.argv[1]})[0] == [item],
                 attributes=c.get(item, ITEM, 'Attributes'), wrong_type=wrong_type.get('error'),
                 all=c.call(item, PROPERTIES, 'GetAll', 's', ITEM)[0].keys().__repr__())
            """, arguments: [service])
        XCTAssertEqual(out["before"], "old label")
        XCTAssertEqual(out["after"], "new label ✓")
        XCTAssertEqual(out["found"], true)
        XCTAssertEqual(out["attributes"], .object(["service": .string(service), "username": "judy", "added": "yes"]))
        XCTAssertEqual(out["wrong_type"], "org.freedesktop.DBus.Error.InvalidArgs")
        for property in ["Locked", "Attributes", "Label", "Created", "Modified"] {
            XCTAssertTrue(out["all"]?.string?.contains("'\(property)'") ?? false, "GetAll lists \(property): \(out)")
        }
        XCTAssertEqual(try bus.kc("get", service, "judy").output, "v", "the kc item keeps its name")
    }

    func testSearchItemsWithNoAttributesReturnsEveryItem() throws {
        let service = uniqueService()
        XCTAssertEqual(try bus.kc("set", "--access", "after-first-unlock", service, "from-kc", input: Array("k".utf8)).status, 0)
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            a = c.create(s, {'service': sys.argv[1], 'username': 'a'}, b'1')
            b = c.create(s, {'service': sys.argv[1], 'username': 'b', 'other': 'x'}, b'2', collection=SESSION_COLLECTION)
            unlocked, locked = c.search({})
            mine = sorted(p for p in unlocked + locked if p.rsplit('/', 1)[1].startswith(sys.argv[2]))
            emit(mine=mine, a=a, b=b)
            """, arguments: [service, encodedPathElement(service)])
        let mine = out["mine"]?.strings ?? []
        XCTAssertEqual(mine.count, 3, "SearchItems({}) returns every item, kc's own too: \(out)")
        XCTAssertTrue(mine.contains(out["a"]?.string ?? "?"))
        XCTAssertTrue(mine.contains(out["b"]?.string ?? "?"))
        XCTAssertTrue(mine.contains { $0.hasSuffix("__from_2dkc") }, "\(mine)")
    }

    /// Clients sort and show items by their times; an item `kc set` stored has no record
    /// in the index yet, but is not from 1970 (secretd-bugs.md B4, minor).
    func testItemsStoredWithKCSetHaveTimes() throws {
        let service = uniqueService()
        XCTAssertEqual(try bus.kc("set", service, "dated", input: Array("d".utf8)).status, 0)
        let out = try bus.python("""
            import time
            c = Client()
            item = c.search({'service': sys.argv[1], 'username': 'dated'})[0][0]
            emit(created=c.get(item, ITEM, 'Created'), modified=c.get(item, ITEM, 'Modified'), now=int(time.time()))
            """, arguments: [service])
        let now = out["now"]?.int ?? 0
        for name in ["created", "modified"] {
            let time = out[name]?.int ?? 0
            XCTAssertTrue(time > 1_600_000_000 && time <= now + 5, "\(name) is a time, not \(time): \(out)")
        }
    }

    func testLockRefusesSecretsAndUnlockNeedsNoPromptWhileTheVaultIsOpen() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            item = c.create(s, {'service': sys.argv[1], 'username': 'kim'}, b'l0cked')
            locked, prompt = c.call(ROOT, SERVICE, 'Lock', 'ao', [DEFAULT])
            states = [c.get(DEFAULT, COLLECTION, 'Locked'), c.get(item, ITEM, 'Locked')]
            refused = c.attempt(item, ITEM, 'GetSecret', 'o', s.object_path)
            search = c.search({'service': sys.argv[1]})
            bulk = c.secrets(s, [item])
            unlocked, unlock_prompt = c.call(ROOT, SERVICE, 'Unlock', 'ao', [DEFAULT])
            emit(locked=locked, prompt=prompt, states=states, refused=refused, search=list(search), bulk=len(bulk),
                 unlocked=unlocked, unlock_prompt=unlock_prompt, state_after=c.get(item, ITEM, 'Locked'),
                 value=text(c.secret(s, item)[0]), item=item)
            """, arguments: [service])
        XCTAssertEqual(out["locked"], ["/org/freedesktop/secrets/aliases/default"], "\(out)")
        XCTAssertEqual(out["prompt"], "/")
        XCTAssertEqual(out["states"], [true, true])
        XCTAssertEqual(out["refused"]?["error"], "org.freedesktop.Secret.Error.IsLocked", "a locked item's secret is refused: \(out)")
        XCTAssertEqual(out["search"], [[], .array(out["item"].map { [$0] } ?? [])], "a locked item is listed as locked")
        XCTAssertEqual(out["bulk"], 0, "GetSecrets leaves locked items out")
        XCTAssertEqual(out["unlocked"], ["/org/freedesktop/secrets/aliases/default"])
        XCTAssertEqual(out["unlock_prompt"], "/", "no prompt while the vault is unlocked")
        XCTAssertEqual(out["state_after"], false)
        XCTAssertEqual(out["value"], "l0cked")
        XCTAssertEqual(try bus.kc("get", service, "kim").output, "l0cked", "Lock over D-Bus hides secrets from D-Bus clients only")
    }

    func testSignalsAnnounceItemsCreatedChangedAndDeleted() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            seen = []
            with c.subscribe(interface=COLLECTION) as collection_signals, c.subscribe(interface=PROPERTIES, member='PropertiesChanged') as changes:
                item = c.create(s, {'service': sys.argv[1], 'username': 'leo'}, b'1')
                c.call(item, ITEM, 'SetSecret', '(oayays)', format_secret(s, b'2', 'text/plain'))
                c.set(item, ITEM, 'Label', 's', 'relabelled')
                c.delete(item)
                c.get(ROOT, SERVICE, 'Collections')  # a round trip: every signal sent before it has arrived
                seen = [(m.header.fields[HeaderFields.member], m.header.fields[HeaderFields.path], list(m.body)) for m in collection_signals]
                changed = [(m.header.fields[HeaderFields.path], m.body[0], {name: value for name, (_, value) in m.body[1].items()}, m.body[2])
                           for m in changes]
            emit(seen=seen, changed=changed, item=item)
            """, arguments: [service])
        let item = out["item"] ?? ""
        let login: JSONValue = "/org/freedesktop/secrets/collection/login"
        let seen = out["seen"]?.array ?? []
        XCTAssertEqual(seen.first, [ "ItemCreated", login, [item]], "\(out)")
        XCTAssertTrue(seen.contains([ "ItemChanged", login, [item]]), "SetSecret and Label announce ItemChanged: \(out)")
        XCTAssertEqual(seen.last, [ "ItemDeleted", login, [item]])
        let changed = out["changed"]?.array ?? []
        // With the new values, as gnome-keyring sends them: libsecret reads nothing else
        // (LibsecretChangeTrackingTests).
        XCTAssertTrue(changed.contains([item, "org.freedesktop.Secret.Item", ["Label": "relabelled"], []]), "PropertiesChanged for the label: \(out)")
        let items = changed.filter { $0[0] == login }.map { $0[2]?["Items"]?.strings ?? [] }
        XCTAssertEqual(items.count, 2, "the collection's Items changed, at the create and the delete: \(out)")
        XCTAssertEqual(items.first?.contains(item.string ?? ""), true, "\(out)")
        XCTAssertEqual(items.last?.contains(item.string ?? ""), false, "\(out)")
    }

    func testTheDefaultAliasNamesTheLoginCollectionAndAnswersAsAnObject() throws {
        let out = try bus.python("""
            c = Client()
            properties, = c.call(DEFAULT, PROPERTIES, 'GetAll', 's', COLLECTION)
            xml, = c.call(DEFAULT, 'org.freedesktop.DBus.Introspectable', 'Introspect')
            root_xml, = c.call(ROOT, 'org.freedesktop.DBus.Introspectable', 'Introspect')
            emit(default=c.call(ROOT, SERVICE, 'ReadAlias', 's', 'default')[0], none=c.call(ROOT, SERVICE, 'ReadAlias', 's', 'kc-no-such-alias')[0],
                 keys=sorted(properties), label=properties['Label'][1], locked=properties['Locked'][1],
                 types=sorted(v[0] for v in properties.values()), collection_interface=COLLECTION in xml, service_interface=SERVICE in root_xml,
                 collections=c.get(ROOT, SERVICE, 'Collections'), session=c.get(SESSION_COLLECTION, COLLECTION, 'Label'))
            """)
        XCTAssertEqual(out["default"], "/org/freedesktop/secrets/collection/login", "\(out)")
        XCTAssertEqual(out["none"], "/", "an alias that names nothing reads as /")
        XCTAssertEqual(out["keys"], ["Created", "Items", "Label", "Locked", "Modified"])
        XCTAssertEqual(out["types"], ["ao", "b", "s", "t", "t"])
        XCTAssertEqual(out["label"], "Login")
        XCTAssertEqual(out["locked"], false)
        XCTAssertEqual(out["collection_interface"], true)
        XCTAssertEqual(out["service_interface"], true)
        XCTAssertTrue(out["collections"]?.strings.contains("/org/freedesktop/secrets/collection/login") ?? false, "\(out)")
        XCTAssertTrue(out["collections"]?.strings.contains("/org/freedesktop/secrets/collection/session") ?? false, "\(out)")
        XCTAssertEqual(out["session"], "Session")
    }

    func testTheSessionCollectionStoresWhenUnlockedAndLoginAfterFirstUnlock() throws {
        let service = uniqueService()
        _ = try bus.python("""
            c = Client()
            s = c.open('plain')
            c.create(s, {'service': sys.argv[1], 'username': 'in-session'}, b'1', collection=SESSION_COLLECTION)
            c.create(s, {'service': sys.argv[1], 'username': 'in-login'}, b'2')
            emit(ok=True)
            """, arguments: [service])
        let listing = try bus.kc("ls", "--long", service).output
        XCTAssertTrue(listing.contains("in-login\tafter-first-unlock\t"), listing)
        XCTAssertTrue(listing.contains("in-session\twhen-unlocked\t"), listing)
    }

    /// libsecret's `SECRET_COLLECTION_SESSION` is the alias `session`
    /// (`/org/freedesktop/secrets/aliases/session`), as gnome-keyring serves it
    /// (secretd-bugs.md B3).
    func testTheSessionAliasNamesTheSessionCollectionAsLibsecretExpects() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            emit(alias=c.call(ROOT, SERVICE, 'ReadAlias', 's', 'session')[0],
                 label=c.attempt(ROOT + '/aliases/session', PROPERTIES, 'Get', 'ss', COLLECTION, 'Label'))
            """)
        XCTAssertEqual(out["alias"], "/org/freedesktop/secrets/collection/session", "\(out)")
        XCTAssertEqual(out["label"]?["reply"], [["s", "Session"]], "\(out)")
        if FileManager.default.isExecutableFile(atPath: SecretServiceClients.secretTool) {
            let stored = try bus.secretTool("store", "--collection=session", "--label", "session item", "service", service, "username", "s", input: "in session")
            XCTAssertEqual(stored.status, 0, "\(stored)")
            XCTAssertEqual(try bus.secretTool("lookup", "service", service, "username", "s").output, "in session")
            XCTAssertTrue(try bus.kc("ls", "--long", service).output.hasPrefix("s\twhen-unlocked\t"), "the session collection's level")
        }
    }

    func testCreateCollectionAddsAnAfterFirstUnlockCollectionItsAliasAndItsItems() throws {
        let service = uniqueService()
        let alias = "kc-test-alias-\(getpid())"
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            with c.subscribe(interface=SERVICE) as announced:
                path, prompt = c.call(ROOT, SERVICE, 'CreateCollection', 'a{sv}s', {COLLECTION + '.Label': ('s', 'Work Ünïcode')}, sys.argv[2])
                again, _ = c.call(ROOT, SERVICE, 'CreateCollection', 'a{sv}s', {COLLECTION + '.Label': ('s', 'other')}, sys.argv[2])
                item = c.create(s, {'service': sys.argv[1], 'username': 'work'}, b'w0rk', collection=path)
                c.get(ROOT, SERVICE, 'Collections')
                signals = [(m.header.fields[HeaderFields.member], list(m.body)) for m in announced]
            result = dict(path=path, prompt=prompt, again=again, alias=c.call(ROOT, SERVICE, 'ReadAlias', 's', sys.argv[2])[0],
                          listed=path in c.get(ROOT, SERVICE, 'Collections'), label=c.get(path, COLLECTION, 'Label'),
                          items=c.get(path, COLLECTION, 'Items') == [item], value=text(c.secret(s, item)[0]),
                          in_default=item in c.get(DEFAULT, COLLECTION, 'Items'), signals=signals, item=item)
            c.call(path, PROPERTIES, 'Set', 'ssv', COLLECTION, 'Label', ('s', 'Renamed'))
            result['renamed'] = c.get(path, COLLECTION, 'Label')
            result['deleted'] = c.call(path, COLLECTION, 'Delete')[0]
            result['gone'] = path in c.get(ROOT, SERVICE, 'Collections')
            result['item_gone'] = c.attempt(item, ITEM, 'GetSecret', 'o', s.object_path).get('error')
            result['login_delete'] = c.attempt(ROOT + '/collection/login', COLLECTION, 'Delete').get('error')
            emit(**result)
            """, arguments: [service, alias])
        let path = out["path"]?.string ?? "?"
        XCTAssertTrue(path.hasPrefix("/org/freedesktop/secrets/collection/"), "\(out)")
        XCTAssertEqual(out["prompt"], "/", "no prompt to create a collection")
        XCTAssertEqual(out["again"], out["path"], "CreateCollection with a taken alias returns that collection")
        XCTAssertEqual(out["alias"], out["path"])
        XCTAssertEqual(out["listed"], true)
        XCTAssertEqual(out["label"], "Work Ünïcode")
        XCTAssertEqual(out["items"], true)
        XCTAssertEqual(out["value"], "w0rk")
        XCTAssertEqual(out["in_default"], false, "an item of another collection is not in login")
        XCTAssertTrue(out["signals"]?.array.contains(["CollectionCreated", [.string(path)]]) ?? false, "\(out)")
        XCTAssertEqual(out["renamed"], "Renamed")
        XCTAssertEqual(out["deleted"], "/")
        XCTAssertEqual(out["gone"], false)
        XCTAssertEqual(out["item_gone"], "org.freedesktop.Secret.Error.NoSuchObject", "its items go with it")
        XCTAssertNotNil(out["login_delete"]?.string, "login is one of kc's levels, not deleted: \(out)")
        XCTAssertEqual(try bus.kc("get", service, "work").status, 1, "the kc item went with the collection")
    }

    /// Tools that walk a service's objects (`busctl tree`, `gdbus introspect --recurse`)
    /// find the collections and items, and read properties by their introspected types.
    func testBusctlAndGdbusWalkTheObjectTreeAndReadProperties() throws {
        let service = uniqueService()
        _ = try bus.python("""
            c = Client()
            c.create(c.open('plain'), {'service': sys.argv[1], 'username': 'walker'}, b'v', label='walked')
            emit(ok=True)
            """, arguments: [service])
        let item = "/org/freedesktop/secrets/collection/login/" + encodedPathElement(service) + "walker"
        var checked = 0
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/busctl") {
            let tree = try bus.client("/usr/bin/busctl", ["--address=" + bus.address, "tree", "org.freedesktop.secrets"])
            XCTAssertEqual(tree.status, 0, "\(tree)")
            XCTAssertTrue(tree.output.contains("/org/freedesktop/secrets/collection/session"), tree.output)
            XCTAssertTrue(tree.output.contains(item), "the item in the tree: \(tree.output)")
            let label = try bus.client("/usr/bin/busctl", ["--address=" + bus.address, "get-property", "org.freedesktop.secrets", item,
                                                          "org.freedesktop.Secret.Item", "Label"])
            XCTAssertEqual(label.output, "s \"walked\"\n", "\(label)")
            checked += 1
        }
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/gdbus") {
            let walked = try bus.client("/usr/bin/gdbus", ["introspect", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/", "--recurse"])
            XCTAssertEqual(walked.status, 0, "\(walked)")
            XCTAssertTrue(walked.output.contains("interface org.freedesktop.Secret.Item"), "gdbus reaches an item: \(walked.output.prefix(2000))")
            XCTAssertTrue(walked.output.contains("readonly o Items") || walked.output.contains("readonly ao Items"), "the collection's properties: \(walked.output.prefix(2000))")
            checked += 1
        }
        guard checked > 0 else { throw XCTSkip("neither busctl (systemd) nor gdbus (libglib2.0-bin) is installed") }
    }

    func testGetSecretsReturnsEachItemsSecretAndSkipsWhatIsMissing() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            items = [c.create(s, {'service': sys.argv[1], 'username': 'u%d' % n}, ('value %d' % n).encode()) for n in range(3)]
            missing = ROOT + '/collection/login/nothing__here'
            got = c.secrets(s, items + [missing, '/'])
            emit(got={k.rsplit('__', 1)[1]: text(v) for k, v in got.items()})
            """, arguments: [service])
        XCTAssertEqual(out["got"], ["u0": "value 0", "u1": "value 1", "u2": "value 2"], "\(out)")
    }

    /// The python client encodes a service name the way kc-secretd names items' paths
    /// (letters and digits, every other byte `_XX`).
    private func encodedPathElement(_ name: String) -> String {
        name.utf8.map { byte -> String in
            let scalar = Unicode.Scalar(byte)
            if byte < 0x80, CharacterSet.alphanumerics.contains(scalar) { return String(Character(scalar)) }
            return "_" + String(format: "%02x", byte)
        }.joined() + "__"
    }
}
