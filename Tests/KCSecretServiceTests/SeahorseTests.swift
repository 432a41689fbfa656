import Foundation
import KCTestSupport
import XCTest

/// seahorse (Debian 12's 43, "Passwords and Keys"), the desktop's keyring window, under
/// Xvfb against kc-secretd: it must list kc's items in its Login keyring, both one a
/// libsecret client stored over D-Bus and one `kc set` stored, follow items other
/// clients store and delete while it is open, and stay up. The check
/// reads the window through the accessibility tree (AT-SPI, as a screen reader does):
/// the test selects Login in the sidebar and reads the rows' labels. It also saves a
/// screenshot (`upstream-clients/seahorse.png` in the build folder). `Tools/test.sh
/// --long` only.
final class SeahorseTests: KeyringTestCase {
    static let seahorse = "/usr/bin/seahorse"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try LongRun.require()
        try LongRun.requireProgram(Self.seahorse, package: "seahorse")
        try LongRun.requireProgram("/usr/bin/xvfb-run", package: "xvfb")
        try LongRun.requireProgram("/usr/bin/xwd", package: "x11-apps")
        try LongRun.requireProgram("/usr/libexec/at-spi-bus-launcher", package: "at-spi2-core")
        try SecretServiceClients.requirePython(["pyatspi"])
        try SecretServiceClients.requireSecretTool()
    }

    func testSeahorseListsKCsItemsInItsLoginKeyring() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let stored = try bus.secretTool("store", "--label", "Stored by secret-tool", "service", service, "username", "alice", input: "s3cret")
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try bus.kc("set", "--access", "after-first-unlock", service, "bob", input: Array("kc-s3cret".utf8)).status, 0)
        let daemon = try XCTUnwrap(bus.owner(), "kc-secretd answers")

        let folder = SecretServiceClients.folder + "/seahorse-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/home", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Self.driver.write(toFile: folder + "/driver.py", atomically: true, encoding: .utf8)
        let screenshot = builtFolder + "/upstream-clients/seahorse.png"
        try FileManager.default.createDirectory(atPath: builtFolder + "/upstream-clients", withIntermediateDirectories: true)
        // The accessibility bus (at-spi-bus-launcher, on the test's bus), seahorse, then
        // the driver; the desktop's settings (dconf) are not on this bus, so seahorse keeps
        // them in memory.
        let script = """
            export HOME='\(folder)/home' XDG_CONFIG_HOME='\(folder)/home/.config' XDG_CACHE_HOME='\(folder)/home/.cache' XDG_RUNTIME_DIR='\(folder)/home'
            /usr/libexec/at-spi-bus-launcher 2>>'\(folder)/log' &
            launcher=$!
            for _ in $(seq 100); do
                dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.a11y.Bus | grep -q true && break
                sleep 0.1
            done
            \(Self.seahorse) 2>>'\(folder)/log' &
            seahorse=$!
            /usr/bin/python3 '\(folder)/driver.py' '\(screenshot)' '\(service)'
            if kill -0 $seahorse 2>/dev/null; then echo 'seahorse: running'; else echo 'seahorse: gone'; fi
            kill $seahorse $launcher
            wait $seahorse $launcher
            exit 0
            """
        let result = try bus.client("/usr/bin/xvfb-run", ["-a", "-s", "-screen 0 1024x768x24", "/bin/bash", "-c", script], timeLimit: 120)
        let log = (try? String(contentsOfFile: folder + "/log", encoding: .utf8)) ?? ""
        XCTAssertEqual(result.status, 0, "\(result) \(log.suffix(2000))")
        let lines = result.output.split(separator: "\n")
        XCTAssertEqual(lines.last, "seahorse: running", "seahorse stayed up: \(log.suffix(2000))")
        guard let report = lines.dropLast().last, let out = try? JSONDecoder().decode(JSONValue.self, from: Data(report.utf8)) else {
            return XCTFail("the driver printed no report: \(result) \(log.suffix(2000))")
        }
        XCTAssertEqual(out["error"], nil, "\(out)")
        XCTAssertEqual(out["selected"], true, "Login selected in the sidebar: \(out)")
        XCTAssertTrue(out["sidebar"]?.strings.contains("Login") ?? false, "kc-secretd's default collection is the keyring Login: \(out)")
        // A row reads its kind, the item's label, then its user.
        let rows = out["rows"]?.strings ?? []
        XCTAssertTrue(rows.contains("Password or Secret\nStored by secret-tool\nalice"), "the item stored over D-Bus, by its label: \(rows)")
        XCTAssertTrue(rows.contains("Password or Secret\n\(service): bob\nbob"), "the item kc set stored: \(rows)")
        // While it was open secret-tool stored one item and cleared another: seahorse
        // follows kc-secretd's signals (it crashed on the second change while kc-secretd's
        // PropertiesChanged carried no values).
        let later = out["rows_later"]?.strings ?? []
        XCTAssertTrue(later.contains("Password or Secret\nStored while seahorse was open\ncarol"), "a new item appears: \(later)")
        XCTAssertFalse(later.contains("Password or Secret\nStored by secret-tool\nalice"), "a deleted item goes: \(later)")
        XCTAssertTrue(later.contains("Password or Secret\n\(service): bob\nbob"), "the others stay: \(later)")
        XCTAssertEqual(out["screenshot"], .string(screenshot))
        XCTAssertEqual(bus.owner(), daemon, "the same kc-secretd answered throughout")
    }

    /// Waits for seahorse on the accessibility bus, selects Login in its sidebar, reads the
    /// item rows, has secret-tool store one item and clear another of the service (argv[2]),
    /// reads the rows again, and prints one JSON line: the sidebar's labels, the rows'
    /// labels before and after, and where the screenshot (the X screen, from xwd, as PNG)
    /// was saved.
    static let driver = #"""
        import json, struct, subprocess, sys, time, zlib
        import pyatspi


        def application(name, seconds):
            deadline = time.time() + seconds
            while time.time() < deadline:
                for app in pyatspi.Registry.getDesktop(0):
                    if app is not None and app.name == name:
                        return app
                time.sleep(0.2)
            return None


        def nodes(node, depth=0):
            if node is None or depth > 60:
                return
            yield node
            for child in node:
                yield from nodes(child, depth + 1)


        def rows_of(list_box):
            """The label of each row of a list box (a row's labels joined by newlines)."""
            rows = []
            for row in list_box:
                texts = [n.name for n in nodes(row) if n.getRoleName() == 'label' and n.name]
                if texts:
                    rows.append('\n'.join(texts))
            return rows


        def png_of_xwd(data):
            """The PNG of an xwd dump of a TrueColor screen (24 or 32 bits a pixel)."""
            header = struct.unpack('>25I', data[:100])
            header_size, width, height = header[0], header[4], header[5]
            byte_order, bits_per_pixel, bytes_per_line = header[7], header[11], header[12]
            masks, colors = header[14:17], header[19]
            step = bits_per_pixel // 8
            assert step in (3, 4), bits_per_pixel
            pixels = data[header_size + 12 * colors:]
            shifts = [(mask & -mask).bit_length() - 1 for mask in masks]
            order = 'little' if byte_order == 0 else 'big'
            raw = bytearray()
            for y in range(height):
                line = pixels[y * bytes_per_line:y * bytes_per_line + step * width]
                raw.append(0)
                for x in range(0, len(line), step):
                    value = int.from_bytes(line[x:x + step], order)
                    raw += bytes(((value & mask) >> shift) for mask, shift in zip(masks, shifts))

            def chunk(kind, body):
                return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body))
            return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
                    + chunk(b'IDAT', zlib.compress(bytes(raw), 6)) + chunk(b'IEND', b''))


        app = application('seahorse', 30)
        if app is None:
            print(json.dumps({'error': 'seahorse did not appear on the accessibility bus'}))
            sys.exit(0)
        time.sleep(2)
        boxes = [n for n in nodes(app) if n.getRoleName() == 'list box']
        sidebar = next((box for box in boxes if any(row.endswith('Login') or row == 'Login' for row in rows_of(box))), None)
        selected = False
        if sidebar is not None:
            for index, row in enumerate(sidebar):
                if 'Login' in [n.name for n in nodes(row)]:
                    selected = bool(sidebar.querySelection().selectChild(index))
                    break
        time.sleep(2)


        def item_rows():
            return [row for box in [n for n in nodes(app) if n.getRoleName() == 'list box'] if box != sidebar for row in rows_of(box)]


        rows = item_rows()
        subprocess.run(['secret-tool', 'store', '--label', 'Stored while seahorse was open', 'service', sys.argv[2], 'username', 'carol'],
                       input=b'x', check=True)
        subprocess.run(['secret-tool', 'clear', 'service', sys.argv[2], 'username', 'alice'], check=True)
        time.sleep(3)
        rows_later = item_rows()
        with open(sys.argv[1], 'wb') as screenshot:
            screenshot.write(png_of_xwd(subprocess.run(['/usr/bin/xwd', '-root', '-silent'], capture_output=True, check=True).stdout))
        print(json.dumps({'selected': selected, 'sidebar': rows_of(sidebar) if sidebar is not None else [], 'rows': rows,
                          'rows_later': rows_later, 'screenshot': sys.argv[1]}))
        """#
}
