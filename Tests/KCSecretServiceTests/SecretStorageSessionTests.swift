import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Sessions as clients use them. python SecretStorage's documented pattern,
/// `collection.search_items(...)` then `item.get_secret()` for each item, opens a new
/// Secret Service session for every `get_secret()` and never closes one, all on one
/// connection: kc-secretd serves every round, and its memory stays bounded because a
/// connection's least recently used sessions close when it holds too many, and the
/// sessions of all connections together are bounded too, taken first from the
/// connection that holds the most, so one client's flood never closes another's.
///
/// The default run makes 10,000 rounds in plain sessions and 1,000 in DH sessions, whose
/// two 1024-bit exponentiations cost this debug build about 20 ms a round;
/// `KC_SECRETSTORAGE_ROUNDS=10000` (what `Tools/test.sh --long` runs) makes 10,000 of each.
final class SecretStorageSessionTests: KeyringTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
    }

    /// The rounds of the pattern: `KC_SECRETSTORAGE_ROUNDS`, else `standard`.
    private func rounds(_ standard: Int) -> Int {
        ProcessInfo.processInfo.environment["KC_SECRETSTORAGE_ROUNDS"].flatMap(Int.init) ?? standard
    }

    /// Runs SecretStorage's search-then-get pattern `rounds` times on one connection
    /// (`secretstorage.dbus_init()`), with SecretStorage's own DH sessions or, for
    /// `transport` "plain", the plain sessions it falls back to when a service has no
    /// DH; then checks which of the connection's sessions are still open, and the
    /// daemon's resident memory after a warm-up and at the end.
    private func runLookupPattern(transport: String, rounds: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let out = try bus.python("""
            import time
            import secretstorage, secretstorage.item, secretstorage.collection
            from secretstorage.util import DBusAddressWrapper
            from jeepney.wrappers import DBusErrorResponse
            S, rounds, transport = sys.argv[1], int(sys.argv[2]), sys.argv[3]

            if transport == 'plain':
                # What SecretStorage's open_session does when the service answers NotSupported for DH.
                class PlainSession:
                    encrypted = False
                    aes_key = None
                def open_plain_session(connection):
                    session = PlainSession()
                    session.object_path = DBusAddressWrapper(ROOT, SERVICE, connection).call('OpenSession', 'sv', 'plain', ('s', ''))[1]
                    return session
                secretstorage.item.open_session = secretstorage.collection.open_session = open_plain_session

            def resident_kib(pid):
                with open('/proc/%d/status' % pid) as status:
                    return next(int(l.split()[1]) for l in status if l.startswith('VmRSS:'))

            connection = secretstorage.dbus_init()
            secretstorage.get_default_collection(connection).create_item('pattern', {'service': S, 'username': 'pattern'}, b'pattern-value')
            # A collection object that has not stored anything holds no session, so each
            # item it finds opens its own for get_secret(), as in SecretStorage's documentation.
            collection = secretstorage.get_default_collection(connection)
            daemon = Client().owner_pid()
            failures, sessions, warm = [], [], None
            started = time.monotonic()
            for n in range(rounds):
                try:
                    items = list(collection.search_items({'service': S, 'username': 'pattern'}))
                    values = [item.get_secret() for item in items]
                    if values != [b'pattern-value']:
                        failures.append('round %d: %r' % (n, values))
                    sessions.append(items[0].session.object_path)
                except Exception as error:
                    failures.append('round %d: %s: %s' % (n, type(error).__name__, error))
                    if len(failures) >= 5:
                        break
                if n == min(500, rounds - 1):
                    warm = resident_kib(daemon)
            elapsed = time.monotonic() - started
            end = resident_kib(daemon)

            service = DBusAddressWrapper(ROOT, SERVICE, connection)
            def is_open(path):
                try:
                    service.call('GetSecrets', 'aoo', [], path)
                    return True
                except DBusErrorResponse:
                    return False
            oldest = [is_open(path) for path in sessions[:100]]
            newest = [is_open(path) for path in sessions[-200:]]
            emit(failures=failures, done=len(sessions), distinct=len(set(sessions)), seconds=round(elapsed, 1), warm_kib=warm, end_kib=end,
                 oldest_open=sum(oldest), newest_open=sum(newest), last_open=all(newest[-64:]),
                 encrypted=items[0].session.encrypted if failures == [] else None)
            """, arguments: [service, String(rounds), transport], timeLimit: 60 + rounds / 20, file: file, line: line)
        print("SecretStorage's pattern, \(transport): \(out["done"] ?? "?") rounds in \(out["seconds"] ?? "?") s; "
              + "kc-secretd's resident memory \(out["warm_kib"] ?? "?") KiB after 500 rounds, \(out["end_kib"] ?? "?") KiB at the end")
        XCTAssertEqual(out["failures"], [], "every lookup is served: \(out)", file: file, line: line)
        XCTAssertEqual(out["done"]?.int, rounds, file: file, line: line)
        XCTAssertEqual(out["distinct"]?.int, rounds, "each get_secret() opened a session of its own", file: file, line: line)
        XCTAssertEqual(out["encrypted"], .bool(transport == "dh"), "the transport used", file: file, line: line)
        XCTAssertEqual(out["oldest_open"], 0, "the connection's least recently used sessions were closed: \(out)", file: file, line: line)
        XCTAssertEqual(out["last_open"], true, "its newest sessions are open: \(out)", file: file, line: line)
        XCTAssertLessThanOrEqual(out["newest_open"]?.int ?? .max, 64, "at most 64 sessions stay open on one connection: \(out)", file: file, line: line)
        if let warm = out["warm_kib"]?.int, let end = out["end_kib"]?.int {
            XCTAssertLessThan(end - warm, 4096, "memory does not grow with the rounds: \(warm) KiB after 500 rounds, \(end) KiB after \(rounds)",
                              file: file, line: line)
        }
    }

    func testSecretStoragesSearchThenGetPatternServesEveryRoundOnOneConnectionInPlainSessions() throws {
        try runLookupPattern(transport: "plain", rounds: rounds(10_000))
    }

    func testSecretStoragesSearchThenGetPatternServesEveryRoundOnOneConnectionInItsDHSessions() throws {
        try runLookupPattern(transport: "dh", rounds: rounds(1_000))
    }

    /// 70 connections each opening 64 sessions (4,480) pass the bound on all sessions:
    /// the flood's own oldest sessions close, a quiet client's one session stays and
    /// serves, and a new client is served.
    func testAFloodOfSessionsFromManyConnectionsClosesTheFloodsOwnAndNeverAQuietClients() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let out = try bus.python("""
            quiet = Client()
            session = quiet.open('dh')
            item = quiet.create(session, {'service': sys.argv[1], 'username': 'quiet'}, b'quiet-value')
            flood = [Client() for n in range(70)]
            opened = [(client, client.call(ROOT, SERVICE, 'OpenSession', 'sv', 'plain', ('s', ''))[1]) for client in flood for n in range(64)]
            still_open = sum('error' not in client.attempt(ROOT, SERVICE, 'GetSecrets', 'aoo', [], path) for client, path in opened)
            newcomer = Client()
            fresh = newcomer.open('dh')
            emit(opened=len(opened), still_open=still_open, quiet=text(quiet.secret(session, item)[0]),
                 newcomer=text(newcomer.secret(fresh, item)[0]))
            """, arguments: [service], timeLimit: 180)
        XCTAssertEqual(out["opened"], 4480, "\(out)")
        XCTAssertEqual(out["quiet"], "quiet-value", "the quiet client's session was not closed for the flood: \(out)")
        XCTAssertEqual(out["newcomer"], "quiet-value", "a new client is served: \(out)")
        let stillOpen = out["still_open"]?.int ?? .max
        XCTAssertLessThan(stillOpen, 4480, "the sessions of all connections together are bounded: \(out)")
        XCTAssertGreaterThanOrEqual(stillOpen, 4000, "only as many of the flood's sessions close as the bound needs: \(out)")
    }
}
