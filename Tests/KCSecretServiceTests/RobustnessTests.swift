import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What a client cannot do to kc-secretd: malformed calls each get a D-Bus error and the
/// same daemon goes on serving; clients that vanish mid-call, many clients at once,
/// secrets too large for a key and a full key quota leave what is stored as it was.
final class RobustnessTests: KeyringTestCase {
    private var bus: SessionBus!

    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
        bus = try startSecretServiceBus()
    }

    /// The daemon's pid, started if it was not.
    private func daemonPID(file: StaticString = #filePath, line: UInt = #line) throws -> pid_t {
        try XCTUnwrap(bus.activatedOwner(), "kc-secretd does not answer", file: file, line: line)
    }

    /// A store and a read by a new client, after whatever the test did.
    private func assertStillServes(_ pid: pid_t, file: StaticString = #filePath, line: UInt = #line) throws {
        let service = uniqueService("stillServes")
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            item = c.create(s, {'service': sys.argv[1], 'username': 'after'}, b'still here')
            emit(value=text(c.secret(s, item)[0]), pid=c.owner_pid())
            """, arguments: [service], file: file, line: line)
        XCTAssertEqual(out["value"], "still here", "\(out)", file: file, line: line)
        XCTAssertEqual(out["pid"]?.int, Int(pid), "the same kc-secretd answers (it did not crash and restart)", file: file, line: line)
    }

    /// A logout (or dbus-run-session's end) takes the bus away: kc-secretd leaves by
    /// itself, at once, and nothing outlives the session.
    func testKCSecretdLeavesWhenItsBusGoesAway() throws {
        let pid = try daemonPID()
        kill(bus.daemonPID, SIGTERM)
        var waited = 0
        while SessionBus.isRunning(pid), waited < 300 {
            usleep(10_000)
            waited += 1
        }
        XCTAssertFalse(SessionBus.isRunning(pid), "kc-secretd still runs 3 s after its bus went away")
        bus.stop()
    }

    func testMalformedCallsEachGetAnErrorAndTheDaemonKeepsServing() throws {
        let pid = try daemonPID()
        let service = uniqueService()
        let out = try bus.python(#"""
            c = Client()
            s = c.open('plain')
            dh = c.open('dh')
            item = c.create(s, {'service': sys.argv[1], 'username': 'target'}, b'intact')
            p = int.from_bytes(bytes.fromhex(
                'FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD'
                'EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED'
                'EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF'), 'big')
            attributes = {ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': 'bad'})}
            # Two blocks of zeros encrypted under the session's key without padding: they
            # decrypt to a last byte of 0, never valid PKCS#7. (Random bytes would decrypt
            # to valid padding one time in 256.)
            unpadded = Cipher(algorithms.AES(dh.aes_key), modes.CBC(bytes(16))).encryptor().update(bytes(32))
            calls = {
                'OpenSession wrong signature': (ROOT, SERVICE, 'OpenSession', 'ss', 'plain', ''),
                'OpenSession no arguments': (ROOT, SERVICE, 'OpenSession'),
                'OpenSession plain with a number': (ROOT, SERVICE, 'OpenSession', 'sv', 'plain', ('u', 3)),
                'OpenSession unknown algorithm': (ROOT, SERVICE, 'OpenSession', 'sv', 'rot13', ('s', '')),
                'OpenSession DH with a string': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('s', 'abc')),
                'DH public key 0': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', b'\x00')),
                'DH public key 1': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', b'\x01')),
                'DH public key empty': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', b'')),
                'DH public key 128 zero bytes': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', bytes(128))),
                'DH public key p-1': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', (p - 1).to_bytes(128, 'big'))),
                'DH public key p': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', p.to_bytes(128, 'big'))),
                'DH public key of 200 bytes': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', b'\xff' * 200)),
                'DH public key of 129 bytes': (ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', (p + 5).to_bytes(129, 'big'))),
                'unknown method': (ROOT, SERVICE, 'NoSuchMethod'),
                'unknown interface': (ROOT, 'org.example.Nothing', 'Frob', 's', 'x'),
                'unknown path': (ROOT + '/nothing/here', SERVICE, 'SearchItems', 'a{ss}', {}),
                'unknown collection': (ROOT + '/collection/nothing', COLLECTION, 'SearchItems', 'a{ss}', {}),
                'undecodable item path': (ROOT + '/collection/login/_zz__x', ITEM, 'GetSecret', 'o', s.object_path),
                'item path without separator': (ROOT + '/collection/login/abc', ITEM, 'GetSecret', 'o', s.object_path),
                'missing item': (ROOT + '/collection/login/no_2ditem__here', ITEM, 'GetSecret', 'o', s.object_path),
                'unknown property': (ROOT, PROPERTIES, 'Get', 'ss', SERVICE, 'NoSuchProperty'),
                'property of an unknown interface': (ROOT, PROPERTIES, 'Get', 'ss', 'org.example.Nothing', 'X'),
                'Properties.Get wrong signature': (ROOT, PROPERTIES, 'Get', 's', SERVICE),
                'set a read-only property': (ROOT, PROPERTIES, 'Set', 'ssv', SERVICE, 'Collections', ('ao', [])),
                'Properties.Set wrong signature': (item, PROPERTIES, 'Set', 'ss', ITEM, 'Label'),
                'garbage session path': (item, ITEM, 'GetSecret', 'o', ROOT + '/session/garbage'),
                'session path /': (item, ITEM, 'GetSecret', 'o', '/'),
                'GetSecrets with a garbage session': (ROOT, SERVICE, 'GetSecrets', 'aoo', [item], ROOT + '/session/s999999'),
                'Close an unknown session': (ROOT + '/session/s999999', 'org.freedesktop.Secret.Session', 'Close'),
                'CreateItem without replace': (DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)', attributes, (s.object_path, b'', b'x', 'text/plain')),
                'CreateItem label of the wrong type': (DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', {ITEM + '.Label': ('u', 5)}, (s.object_path, b'', b'x', 'text/plain'), True),
                'CreateItem attributes of the wrong type': (DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', {ITEM + '.Attributes': ('as', ['a'])}, (s.object_path, b'', b'x', 'text/plain'), True),
                'CreateItem in a garbage session': (DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', attributes, (ROOT + '/session/zzz', b'', b'x', 'text/plain'), True),
                'DH secret not whole blocks': (DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', attributes, (dh.object_path, bytes(16), b'x' * 5, 'text/plain'), True),
                'DH secret with a 3-byte IV': (DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', attributes, (dh.object_path, b'abc', bytes(16), 'text/plain'), True),
                'DH secret with bad padding': (DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', attributes, (dh.object_path, bytes(16), unpadded, 'text/plain'), True),
                'SetSecret wrong signature': (item, ITEM, 'SetSecret', 's', 'x'),
                'Unlock with a string': (ROOT, SERVICE, 'Unlock', 's', DEFAULT),
                'SetAlias to an unknown collection': (ROOT, SERVICE, 'SetAlias', 'so', 'x', ROOT + '/collection/nothing'),
                'Prompt that does not exist': (ROOT + '/prompt/p424242', PROMPT, 'Prompt', 's', ''),
            }
            outcomes = {name: c.attempt(*call) for name, call in calls.items()}
            emit(outcomes=outcomes, intact=text(c.secret(s, item)[0]), bad=c.search({'service': sys.argv[1], 'username': 'bad'})[0])
            """#, arguments: [service])
        let outcomes = out["outcomes"]?.object ?? [:]
        XCTAssertEqual(outcomes.count, 40, "every malformed call was made: \(out)")
        for (name, outcome) in outcomes.sorted(by: { $0.key < $1.key }) {
            let error = outcome["error"]?.string ?? ""
            XCTAssertTrue(error.hasPrefix("org.freedesktop."), "\(name): an error reply, not \(outcome)")
            XCTAssertFalse(outcome["message"]?.string?.isEmpty ?? true, "\(name): the error says why: \(outcome)")
        }
        for name in ["DH public key 0", "DH public key 1", "DH public key empty", "DH public key p-1", "DH public key p", "DH public key of 200 bytes"] {
            XCTAssertEqual(outcomes[name]?["error"], "org.freedesktop.DBus.Error.InvalidArgs", "\(name): \(outcomes[name] ?? nil)")
        }
        XCTAssertEqual(outcomes["OpenSession wrong signature"]?["error"], "org.freedesktop.DBus.Error.InvalidArgs")
        XCTAssertEqual(outcomes["OpenSession unknown algorithm"]?["error"], "org.freedesktop.DBus.Error.NotSupported",
                       "what makes SecretStorage fall back to plain")
        XCTAssertEqual(outcomes["unknown method"]?["error"], "org.freedesktop.DBus.Error.UnknownMethod")
        XCTAssertEqual(outcomes["unknown property"]?["error"], "org.freedesktop.DBus.Error.UnknownProperty")
        XCTAssertEqual(outcomes["set a read-only property"]?["error"], "org.freedesktop.DBus.Error.PropertyReadOnly")
        XCTAssertEqual(outcomes["garbage session path"]?["error"], "org.freedesktop.Secret.Error.NoSession")
        XCTAssertEqual(outcomes["missing item"]?["error"], "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(out["intact"], "intact", "the item the calls aimed at is unchanged")
        XCTAssertEqual(out["bad"], [], "no malformed CreateItem stored anything")
        try assertStillServes(pid)
    }

    /// Calls that dbus-send makes with the wrong argument types, as a shell user would.
    func testWrongArgumentTypesFromDBusSendAreRefused() throws {
        let pid = try daemonPID()
        let calls: [[String]] = [
            ["/org/freedesktop/secrets", "org.freedesktop.Secret.Service.OpenSession", "int32:5"],
            ["/org/freedesktop/secrets", "org.freedesktop.Secret.Service.SearchItems", "string:x"],
            ["/org/freedesktop/secrets", "org.freedesktop.Secret.Service.GetSecrets", "array:string:a,b", "objpath:/"],
            ["/org/freedesktop/secrets/aliases/default", "org.freedesktop.Secret.Collection.CreateItem", "boolean:true"],
            ["/org/freedesktop/secrets/aliases/nothing", "org.freedesktop.Secret.Collection.SearchItems", "dict:string:string:a,b"],
            ["/org/freedesktop/secrets/session/x", "org.freedesktop.Secret.Session.Close"],
            ["/org/freedesktop/secrets", "org.freedesktop.DBus.Properties.GetAll", "uint64:7"],
        ]
        for call in calls {
            let result = try bus.client("/usr/bin/dbus-send", ["--session", "--print-reply", "--reply-timeout=10000", "--dest=org.freedesktop.secrets"] + call)
            XCTAssertEqual(result.status, 1, "\(call): \(result)")
            XCTAssertTrue(result.standardError.hasPrefix("Error org.freedesktop."), "\(call): a D-Bus error reply: \(result.standardError)")
            XCTAssertFalse(result.standardError.contains("NoReply"), "\(call): answered, not timed out: \(result.standardError)")
        }
        try assertStillServes(pid)
    }

    func testAClientThatDisconnectsMidCallLeavesTheDaemonServingAndTheStoreWhole() throws {
        let pid = try daemonPID()
        let service = uniqueService()
        // A python client sends CreateItem and GetSecret and exits without reading the replies.
        let abandoned = try bus.client(SecretServiceClients.python, ["-c", """
            import sys, os
            sys.path.insert(0, \(SecretServiceClients.pythonPath.debugDescription))
            from sstest import *
            c = Client()
            s = c.open('plain')
            item = c.create(s, {'service': sys.argv[1], 'username': 'first'}, b'v1')
            properties = {ITEM + '.Label': ('s', 'x'), ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': 'abandoned'})}
            c.conn.send(new_method_call(DBusAddress(DEFAULT, NAME, COLLECTION), 'CreateItem', 'a{sv}(oayays)b',
                                        (properties, (s.object_path, b'', b'v2', 'text/plain'), True)))
            for n in range(50):
                c.conn.send(new_method_call(DBusAddress(item, NAME, ITEM), 'GetSecret', 'o', (s.object_path,)))
            os._exit(0)
            """, service])
        XCTAssertEqual(abandoned.status, 0, "\(abandoned)")
        // dbus-send killed while it waits for its reply.
        let killed = try bus.script("""
            dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \
              org.freedesktop.Secret.Service.SearchItems dict:string:string:service,\(service) & sleep 0.01; kill -9 $!; wait
            exit 0
            """)
        XCTAssertEqual(killed.status, 0, "\(killed)")
        try assertStillServes(pid)

        // What was stored is whole: an item is in the kernel and in the index, or in neither.
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            found = {}
            for user in ('first', 'abandoned'):
                unlocked, locked = c.search({'service': sys.argv[1], 'username': user})
                found[user] = [text(c.secret(s, i)[0]) for i in unlocked]
            emit(**found)
            """, arguments: [service])
        XCTAssertEqual(out["first"], ["v1"])
        let abandonedValue = try bus.kc("get", service, "abandoned")
        if abandonedValue.status == 0 {
            XCTAssertEqual(abandonedValue.output, "v2")
            XCTAssertEqual(out["abandoned"], ["v2"], "an item in the kernel is found by its attributes")
        } else {
            XCTAssertEqual(out["abandoned"], [], "an item not in the kernel is not in the index")
        }
    }

    /// A client that opens sessions without closing them is never refused one: past 64
    /// on its connection, its least recently used sessions close (and answer NoSession),
    /// and a new client is served.
    func testAConnectionThatKeepsOpeningSessionsLosesItsOldestAndANewClientIsServed() throws {
        let pid = try daemonPID()
        let out = try bus.python("""
            c = Client()
            paths = []
            refused = None
            for n in range(100):
                outcome = c.attempt(ROOT, SERVICE, 'OpenSession', 'sv', 'plain', ('s', ''))
                if 'error' in outcome:
                    refused = outcome
                    break
                paths.append(outcome['reply'][1])
            open_now = [c.attempt(ROOT, SERVICE, 'GetSecrets', 'aoo', [], path).get('error', 'open') for path in paths]
            emit(opened=len(paths), refused=refused, oldest=sorted(set(open_now[:36])), newest=sorted(set(open_now[36:])))
            """)
        XCTAssertEqual(out["refused"], .null, "no OpenSession is refused: \(out)")
        XCTAssertEqual(out["opened"], 100)
        XCTAssertEqual(out["oldest"], ["org.freedesktop.Secret.Error.NoSession"], "the 36 least recently used closed: \(out)")
        XCTAssertEqual(out["newest"], ["open"], "the 64 newest are open: \(out)")
        try assertStillServes(pid)
    }

    /// A session is its client's: another connection can neither use it nor close it
    /// (secretd-bugs.md B2; gnome-keyring answers AccessDenied).
    func testAnotherClientCannotCloseMySession() throws {
        let service = uniqueService()
        let out = try bus.python("""
            mine, other = Client(), Client()
            s = mine.open('dh')
            item = mine.create(s, {'service': sys.argv[1], 'username': 'owner'}, b'still mine')
            emit(use=other.attempt(item, ITEM, 'GetSecret', 'o', s.object_path),
                 close=other.attempt(s.object_path, 'org.freedesktop.Secret.Session', 'Close'),
                 after=text(mine.secret(s, item)[0]) if 'error' not in mine.attempt(item, ITEM, 'GetSecret', 'o', s.object_path) else 'session gone')
            """, arguments: [service])
        XCTAssertEqual(out["use"]?["error"], "org.freedesktop.Secret.Error.NoSession", "\(out)")
        XCTAssertNotNil(out["close"]?["error"], "closing another client's session is refused: \(out)")
        XCTAssertEqual(out["after"], "still mine", "the owner's session still works: \(out)")
    }

    func testTwentyFourConcurrentClientsAllStoreAndReadTheirOwnItems() throws {
        try SecretServiceClients.requireSecretTool()
        let pid = try daemonPID()
        let service = uniqueService()
        // 16 secret-tool clients (DH) and 8 python clients (plain, 10 items each), all at once.
        let result = try bus.script("""
            service='\(service)'
            mkdir -p "$TMPDIR_"
            for n in $(seq 1 16); do
              ( printf 'tool-value-%s' "$n" | secret-tool store --label "tool $n" service "$service" username "tool-$n" &&
                secret-tool lookup service "$service" username "tool-$n" > "$TMPDIR_/tool-$n" ) &
            done
            for n in $(seq 1 8); do
              ( /usr/bin/python3 -c '
            import sys
            sys.path.insert(0, sys.argv[3])
            from sstest import *
            c = Client()
            s = c.open("plain")
            wrong = 0
            for k in range(10):
                user = "py-%s-%d" % (sys.argv[2], k)
                item = c.create(s, {"service": sys.argv[1], "username": user}, ("py-value-" + user).encode())
                if c.secret(s, item)[0] != ("py-value-" + user).encode(): wrong += 1
            print(wrong)
            ' "$service" "$n" '\(SecretServiceClients.pythonPath)' > "$TMPDIR_/py-$n" ) &
            done
            wait
            for n in $(seq 1 16); do printf '%s\\n' "$(cat "$TMPDIR_/tool-$n")"; done
            for n in $(seq 1 8); do printf 'wrong %s\\n' "$(cat "$TMPDIR_/py-$n")"; done
            rm -rf "$TMPDIR_"
            """.replacingOccurrences(of: "$TMPDIR_", with: SecretServiceClients.folder + "/concurrent-\(getpid())"))
        let expected = (1...16).map { "tool-value-\($0)" } + (1...8).map { _ in "wrong 0" }
        XCTAssertEqual(result.output.split(separator: "\n").map(String.init), expected, "\(result)")
        for n in 1...16 {
            XCTAssertEqual(try bus.kc("get", service, "tool-\(n)").output, "tool-value-\(n)")
        }
        let listed = try bus.kc("ls", service).output.split(separator: "\n")
        XCTAssertEqual(listed.count, 16 + 80, "every client's items, none lost or doubled")
        for n in 1...8 {
            for k in 0..<10 {
                XCTAssertEqual(try bus.kc("get", service, "py-\(n)-\(k)").output, "py-value-py-\(n)-\(k)")
            }
        }
        try assertStillServes(pid)
    }

    func testAnOversizeSecretIsRefusedClearlyAndLeavesThePreviousValue() throws {
        let pid = try daemonPID()
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            results = {}
            for algorithm in ('plain', 'dh'):
                s = c.open(algorithm)
                item = c.create(s, {'service': sys.argv[1], 'username': 'kept-' + algorithm}, b'small value')
                big = b'x' * 40000
                over_existing = c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b',
                                          {ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': 'kept-' + algorithm})},
                                          format_secret(s, big, 'text/plain'), True)
                set_secret = c.attempt(item, ITEM, 'SetSecret', '(oayays)', format_secret(s, big, 'text/plain'))
                new = c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b',
                                {ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': 'new-' + algorithm})},
                                format_secret(s, big, 'text/plain'), True)
                results[algorithm] = dict(over_existing=over_existing, set_secret=set_secret, new=new,
                                          kept=text(c.secret(s, item)[0]),
                                          new_found=c.search({'service': sys.argv[1], 'username': 'new-' + algorithm})[0])
            emit(**results)
            """, arguments: [service])
        for algorithm in ["plain", "dh"] {
            let result = out[algorithm]
            for call in ["over_existing", "set_secret", "new"] {
                let outcome = result?[call]
                XCTAssertEqual(outcome?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(algorithm) \(call): \(String(describing: outcome))")
                let message = outcome?["message"]?.string ?? ""
                XCTAssertTrue(message.contains("40000") && message.contains("32767"), "\(algorithm) \(call): names the size and the limit: \(message)")
            }
            XCTAssertEqual(result?["kept"], "small value", "\(algorithm): the previous value is unharmed")
            XCTAssertEqual(result?["new_found"], [], "\(algorithm): nothing stored")
            XCTAssertEqual(try bus.kc("get", service, "kept-" + algorithm).output, "small value")
            XCTAssertEqual(try bus.kc("get", service, "new-" + algorithm).status, 1)
        }
        try assertStillServes(pid)
    }

    /// secret-tool reads at most 8192 bytes of a password itself ("password is too long"),
    /// so the daemon's limit is met through D-Bus calls above; what secret-tool sends is
    /// kept whole.
    func testSecretToolsLargestPasswordIsKeptWhole() throws {
        try SecretServiceClients.requireSecretTool()
        let service = uniqueService()
        let value = String((0..<8192).map { Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8($0 % 26))) })
        let stored = try bus.secretTool("store", "--label", "big", "service", service, "username", "big", input: value)
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try bus.secretTool("lookup", "service", service, "username", "big").output, value)
        XCTAssertEqual(try bus.kc("get", service, "big").output, value)
    }

    func testTheLargestValueAKeyHoldsRoundTrips() throws {
        guard TestQuota.hasRoom(forValueOf: 32767) else { throw XCTSkip("this uid's key quota has no room for a 32767-byte value") }
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('dh')
            value = bytes((n * 7 + 3) % 256 for n in range(32767))
            item = c.create(s, {'service': sys.argv[1], 'username': 'largest'}, value, content_type='application/octet-stream')
            emit(same=c.secret(s, item)[0] == value)
            """, arguments: [service])
        XCTAssertEqual(out["same"], true)
        XCTAssertEqual(try bus.kc("get", service, "largest").standardOutput.count, 32767)
    }

    func testTooManyOrTooLargeAttributesAreRefusedClearly() throws {
        let service = uniqueService()
        let out = try bus.python("""
            c = Client()
            s = c.open('plain')
            many = {'service': sys.argv[1], 'username': 'many'}
            many.update({'a%03d' % n: 'v' for n in range(300)})
            big = {'service': sys.argv[1], 'username': 'big', 'blob': 'z' * 70000}
            emit(many=c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', {ITEM + '.Attributes': ('a{ss}', many)}, (s.object_path, b'', b'v', 'text/plain'), True),
                 big=c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', {ITEM + '.Attributes': ('a{ss}', big)}, (s.object_path, b'', b'v', 'text/plain'), True),
                 label=c.attempt(DEFAULT, COLLECTION, 'CreateItem', 'a{sv}(oayays)b', {ITEM + '.Label': ('s', 'L' * 5000), ITEM + '.Attributes': ('a{ss}', {'service': sys.argv[1], 'username': 'label'})}, (s.object_path, b'', b'v', 'text/plain'), True),
                 found=c.search({'service': sys.argv[1]})[0])
            """, arguments: [service])
        for name in ["many", "big", "label"] {
            XCTAssertEqual(out[name]?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(name): \(out)")
        }
        XCTAssertTrue(out["many"]?["message"]?.string?.contains("302 attributes") ?? false, "\(out)")
        XCTAssertEqual(out["found"], [])
        let listing = try bus.kc("ls", service)
        XCTAssertEqual(listing.status, 1, "nothing stored: \(listing)")
    }

    /// An ordinary user's quota is 200 keys and 20,000 bytes: the store that does not fit
    /// is refused with the quota's error (and what to do), and what is stored stays.
    func testAFullKeyQuotaIsAClearErrorAndLeavesStoredItemsUnharmed() throws {
        UnprivilegedUser.waitForKeyCollection()
        defer { UnprivilegedUser.waitForKeyCollection() }
        let out = try SecretServiceClients.pythonAsTestUser("""
            c = Client()
            s = c.open('dh')
            stored = []
            refused = None
            for n in range(200):
                value = os.urandom(750).hex().encode()
                attributes = {'service': 'kc-test-quota', 'username': 'u%d' % n}
                try:
                    stored.append((c.create(s, attributes, value, collection=SESSION_COLLECTION), value))
                except BusError as error:
                    refused = dict(name=error.name, message=error.message, n=n)
                    break
            unharmed = all(c.secret(s, item)[0] == value for item, value in stored)
            absent = c.search({'service': 'kc-test-quota', 'username': 'u%d' % refused['n']})[0] if refused else None
            first, first_value = stored[0]
            grow = c.attempt(first, ITEM, 'SetSecret', '(oayays)', format_secret(s, os.urandom(6000).hex().encode(), 'text/plain'))
            emit(stored=len(stored), refused=refused, unharmed=unharmed, absent=absent, grow=grow,
                 first_after=c.secret(s, first)[0] == first_value)
            """)
        XCTAssertEqual(out["refused"]?["name"], "org.freedesktop.DBus.Error.LimitsExceeded", "\(out)")
        let message = out["refused"]?["message"]?.string ?? ""
        XCTAssertTrue(message.contains("quota"), "the error names the quota: \(message)")
        XCTAssertTrue(message.contains("sysctl"), "and how to raise it: \(message)")
        XCTAssertGreaterThan(out["stored"]?.int ?? 0, 5, "some items fit first: \(out)")
        XCTAssertEqual(out["unharmed"], true, "every stored item reads back as stored")
        XCTAssertEqual(out["absent"], [], "the refused item is not there")
        XCTAssertEqual(out["grow"]?["error"], "org.freedesktop.DBus.Error.LimitsExceeded", "a new value over the quota: \(out)")
        XCTAssertEqual(out["first_after"], true, "the item keeps its old value")
    }
}
