import Foundation
import KCTestSupport
import XCTest

/// libsecret (0.20.5, through PyGObject) keeps its objects up to date from the daemon's
/// signals: a collection's `Items` and the service's `Collections` from
/// `PropertiesChanged` (it reads the new value there, and looks the list up in its cache
/// when `ItemCreated` or `CollectionCreated` comes), an item's label from its own. Every
/// long-lived libsecret client relies on it: seahorse lists items this way. Here one
/// libsecret client watches while other clients (secret-tool, python SecretStorage)
/// create, relabel and delete items and collections.
final class LibsecretChangeTrackingTests: KeyringTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
        try SecretServiceClients.requireSecretTool()
        let probe = try runCommand(SecretServiceClients.python, ["-c", "import gi; gi.require_version('Secret', '1'); from gi.repository import Secret"])
        guard probe.status == 0 else {
            throw XCTSkip("python3 has no libsecret through PyGObject (Debian: python3-gi, gir1.2-secret-1): \(probe.standardError.split(separator: "\n").last ?? "")")
        }
    }

    /// Runs `steps` (python, with `run(...)` for another client and `seen()` recording
    /// what the watching libsecret client sees) and returns the recorded `views` (and
    /// what `steps` put in `extra`).
    private func watch(_ steps: String, service: String, on bus: SessionBus, file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        try bus.python(#"""
            import subprocess
            import gi
            gi.require_version('Secret', '1')
            from gi.repository import Secret, GLib

            def spin():
                loop = GLib.MainLoop()
                GLib.timeout_add(700, loop.quit)
                loop.run()

            def run(*command, input=b''):
                subprocess.run(list(command), input=input, check=True)
                spin()

            def secretstorage(code):
                run(sys.executable, '-c', 'import secretstorage, sys\nc = secretstorage.dbus_init()\n' + code, SERVICE)

            SERVICE = sys.argv[1]
            service = Secret.Service.get_sync(Secret.ServiceFlags.OPEN_SESSION | Secret.ServiceFlags.LOAD_COLLECTIONS, None)
            login = next(c for c in service.get_collections() if c.get_object_path().endswith('/login'))
            views = []
            extra = {}

            def seen():
                items = sorted(i.get_label() or '(none)' for i in login.get_items()
                               if (i.get_attributes() or {}).get('service') == SERVICE)
                collections = sorted(c.get_label() or '(none)' for c in service.get_collections())
                views.append({'items': items, 'collections': collections})

            seen()
            """# + "\n" + steps + "\nemit(views=views, **extra)\n", arguments: [service], file: file, line: line)
    }

    func testItemsCreatedRelabelledAndDeletedByOtherClientsShowInALibsecretClient() throws {
        try itemChangesShow(on: try startSecretServiceBus())
    }

    /// The same against gnome-keyring: what libsecret clients are used to.
    func testItemChangesShowTheSameWayWithGnomeKeyring() throws {
        let reference = try GnomeKeyringReference()
        defer { reference.stop() }
        try itemChangesShow(on: reference.bus)
    }

    private func itemChangesShow(on bus: SessionBus, file: StaticString = #filePath, line: UInt = #line) throws {
        let service = uniqueService()
        let out = try watch("""
            for n in range(3):
                run('secret-tool', 'store', '--label', 'item %d' % n, 'service', SERVICE, 'username', 'u%d' % n, input=b'x')
                seen()
            secretstorage("item, = secretstorage.search_items(c, {'service': sys.argv[1], 'username': 'u1'})\\nitem.set_label('item 1 renamed')")
            seen()
            run('secret-tool', 'clear', 'service', SERVICE, 'username', 'u0')
            seen()
            """, service: service, on: bus, file: file, line: line)
        XCTAssertEqual(out["views"]?.array.map { $0["items"] ?? [] }, [
            [], ["item 0"], ["item 0", "item 1"], ["item 0", "item 1", "item 2"],
            ["item 0", "item 1 renamed", "item 2"], ["item 1 renamed", "item 2"],
        ], "\(out)", file: file, line: line)
        _ = try bus.secretTool("clear", "service", service)
    }

    /// `Lock` and `Unlock` by another client: the collection's and its items' `Locked`
    /// follow (seahorse shows them), as gnome-keyring announces them.
    func testALockAndUnlockByAnotherClientShowInALibsecretClient() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        XCTAssertEqual(try bus.secretTool("store", "--label", "locked with login", "service", service, "username", "u", input: "x").status, 0)
        let out = try watch("""
            item = next(i for i in login.get_items() if (i.get_attributes() or {}).get('service') == SERVICE)
            states = [(login.get_locked(), item.get_locked())]
            for method in ['lock', 'unlock']:
                secretstorage("secretstorage.get_default_collection(c).%s()" % method)
                states.append((login.get_locked(), item.get_locked()))
            extra['states'] = states
            """, service: service, on: bus)
        XCTAssertEqual(out["states"], [[false, false], [true, true], [false, false]], "(collection, item) Locked: \(out)")
    }

    func testCollectionsCreatedAndDeletedByOtherClientsShowInALibsecretClient() throws {
        let bus = try startSecretServiceBus()
        let out = try watch("""
            for label in ['Work', 'Play']:
                secretstorage("secretstorage.create_collection(c, %r)" % label)
                seen()
            secretstorage("[x.delete() for x in secretstorage.get_all_collections(c) if x.get_label() == 'Work']")
            seen()
            secretstorage("[x.delete() for x in secretstorage.get_all_collections(c) if x.get_label() == 'Play']")
            seen()
            """, service: uniqueService(), on: bus)
        let collections = out["views"]?.array.map { $0["collections"]?.strings ?? [] } ?? []
        XCTAssertEqual(collections.count, 5, "\(out)")
        guard let before = collections.first else { return }
        XCTAssertEqual(collections, [before, (before + ["Work"]).sorted(), (before + ["Work", "Play"]).sorted(),
                                     (before + ["Play"]).sorted(), before], "\(out)")
    }
}
