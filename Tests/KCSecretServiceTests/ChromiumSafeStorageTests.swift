import Foundation
import KCTestSupport
import Keyrings
import XCTest

/// Chromium (Debian 12's 156) keeps the key its cookies are encrypted with, "Chromium
/// Safe Storage", in the Secret Service (`--password-store=gnome-libsecret`, through
/// libsecret). A cookie set in one run must come back in the next, which starts a new
/// kc-secretd on a new bus: the same key found by its attributes, not a second one made
/// (which would leave the old cookies unreadable). Chromium runs headless, as root
/// without its sandbox, in a network namespace of its own where only 127.0.0.1 exists,
/// against a small HTTP server there that sets the cookie and echoes the Cookie header
/// it is sent. `Tools/test.sh --long` only.
final class ChromiumSafeStorageTests: VaultTestCase {
    static let chromium = "/usr/bin/chromium"
    /// Where Chromium's libsecret schema puts its key in kc: the `xdg:schema` names the
    /// service, the label the item.
    static let keyService = "chrome_libsecret_os_crypt_password_v2"
    static let keyItem = "Chromium Safe Storage"
    static let port = 8337

    private var folder = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        try LongRun.require()
        try LongRun.requireProgram(Self.chromium, package: "chromium")
        try LongRun.requireProgram("/usr/bin/unshare", package: "util-linux")
        try SecretServiceClients.requirePython()
        let isolated = try runCommand("/usr/bin/unshare", ["--net", "/usr/sbin/ip", "link", "set", "lo", "up"])
        guard isolated.status == 0 else {
            throw XCTSkip("cannot give Chromium a network namespace of its own (unshare --net, as root): \(isolated.standardError)")
        }
        // The key lives in the uid's keyrings; a real one there must not be replaced.
        let listed = try runCommand(builtKC, ["ls"], environment: environmentWithoutVault()).output.split(separator: "\n")
        guard !listed.contains(Substring(Self.keyService)) else {
            throw XCTSkip("this uid's keyrings already hold Chromium's key (kc service \(Self.keyService)): the test would replace it")
        }
        servicesToRemove.append(KeyName(Self.keyService))
        folder = SecretServiceClients.folder + "/chromium-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/home", withIntermediateDirectories: true)
        try Self.server.write(toFile: folder + "/server.py", atomically: true, encoding: .utf8)
        addTeardownBlock { [folder] in try? FileManager.default.removeItem(atPath: folder) }
    }

    /// One headless Chromium run on `bus` with the test's profile, loading `path` from the
    /// server; what the page showed as the Cookie header Chromium sent ("none" if none).
    private func browse(_ path: String, cookie: String, on bus: SessionBus, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let script = """
            set -u
            ip link set lo up
            python3 '\(folder)/server.py' \(Self.port) '\(cookie)' 2>>'\(folder)/server.log' &
            server=$!
            for _ in $(seq 100); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", \(Self.port)))' 2>/dev/null && break; sleep 0.05; done
            HOME='\(folder)/home' XDG_CONFIG_HOME='\(folder)/home/.config' XDG_CACHE_HOME='\(folder)/home/.cache' \
              timeout -k 5 120 \(Self.chromium) --headless --no-sandbox --password-store=gnome-libsecret \
              --user-data-dir='\(folder)/profile' --no-first-run --disable-gpu --disable-background-networking \
              --disable-component-update --dump-dom 'http://127.0.0.1:\(Self.port)/\(path)' 2>>'\(folder)/chromium.log'
            status=$?
            kill $server
            exit $status
            """
        let result = try bus.client("/usr/bin/unshare", ["--net", "/bin/bash", "-c", script], timeLimit: 180)
        XCTAssertEqual(result.status, 0, "chromium: \(result) \((try? String(contentsOfFile: folder + "/chromium.log", encoding: .utf8))?.suffix(2000) ?? "")",
                       file: file, line: line)
        guard let start = result.output.range(of: "<pre id=\"seen\">"),
              let end = result.output.range(of: "</pre>", range: start.upperBound..<result.output.endIndex) else {
            XCTFail("the page did not load: \(result.output.suffix(1000))", file: file, line: line)
            return ""
        }
        return String(result.output[start.upperBound..<end.lowerBound])
    }

    /// The items of Chromium's key the daemon on `bus` offers, by label.
    private func keyItems(on bus: SessionBus) throws -> [String] {
        let out = try bus.python("""
            c = Client()
            unlocked, locked = c.search({'xdg:schema': 'chrome_libsecret_os_crypt_password_v2'})
            emit(labels=sorted(c.get(path, ITEM, 'Label') for path in unlocked + locked))
            """)
        return out["labels"]?.strings ?? []
    }

    /// The first bytes of the stored cookie's encrypted value: `v11` is Chromium's
    /// encryption with the key from the Secret Service, `v10` with its built-in one.
    private func cookieEncryption() throws -> String {
        let read = try runCommand(SecretServiceClients.python, ["-c", """
            import sqlite3, sys
            rows = sqlite3.connect(sys.argv[1]).execute("select encrypted_value from cookies where name = 'kc37'").fetchall()
            print(','.join(bytes(row[0][:3]).decode('ascii', 'replace') for row in rows))
            """, folder + "/profile/Default/Cookies"])
        return read.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func cookieComesBackThroughANewDaemon(vault: VaultFixture?, file: StaticString = #filePath, line: UInt = #line) throws {
        let value = "kc-cookie-\(UInt32.random(in: 0...UInt32.max))"
        let first = try startSecretServiceBus(vault: vault)
        XCTAssertEqual(try browse("set", cookie: value, on: first), "none", "a new profile sends no cookie", file: file, line: line)
        XCTAssertEqual(try keyItems(on: first), [Self.keyItem], "Chromium stored its key over D-Bus", file: file, line: line)
        let key = try first.kc("get", Self.keyService, Self.keyItem)
        XCTAssertEqual(key.status, 0, "the key is a kc item: \(key)", file: file, line: line)
        XCTAssertFalse(key.standardOutput.isEmpty, file: file, line: line)
        XCTAssertEqual(try cookieEncryption(), "v11", "the cookie is encrypted with the key from the Secret Service", file: file, line: line)
        first.stop()

        let second = try startSecretServiceBus(vault: vault)
        XCTAssertNotNil(second.activatedOwner(), file: file, line: line)
        XCTAssertEqual(try browse("echo", cookie: "unused", on: second), "kc37=" + value,
                       "the second run decrypted the cookie with the key the new daemon found", file: file, line: line)
        XCTAssertEqual(try keyItems(on: second), [Self.keyItem], "one key, no \"(2)\" copy", file: file, line: line)
        XCTAssertEqual(try second.kc("get", Self.keyService, Self.keyItem).standardOutput, key.standardOutput,
                       "the same key", file: file, line: line)
        let listed = try second.kc("ls", Self.keyService).output
        XCTAssertEqual(listed, Self.keyItem + "\n", "kc holds one item of Chromium's", file: file, line: line)
        if let vault {
            XCTAssertTrue(vault.itemFiles().contains { $0.hasSuffix("/\(Self.keyService)/\(Self.keyItem)") },
                          "the key is saved in the vault: \(vault.itemFiles())", file: file, line: line)
        } else if let stateHome = second.environment["XDG_STATE_HOME"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: stateHome + "/kc/secret-service-index"),
                          "without a vault the index (the key's attributes) is kept in $XDG_STATE_HOME/kc", file: file, line: line)
        }
    }

    func testACookieSetInOneRunIsReadInTheNextThroughANewDaemonWithAVault() throws {
        try cookieComesBackThroughANewDaemon(vault: try makeVault())
    }

    func testACookieSetInOneRunIsReadInTheNextThroughANewDaemonWithoutAVault() throws {
        try cookieComesBackThroughANewDaemon(vault: nil)
    }

    /// The test's HTTP server: `/set` sets the persistent cookie `kc37=VALUE`; every page
    /// shows the Cookie header it was sent.
    static let server = #"""
        import http.server, sys

        class Page(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = '<html><body><pre id="seen">%s</pre></body></html>' % (self.headers.get('Cookie') or 'none')
                self.send_response(200)
                if self.path == '/set':
                    self.send_header('Set-Cookie', 'kc37=%s; Max-Age=86400; Path=/' % sys.argv[2])
                self.send_header('Content-Type', 'text/html')
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format, *arguments):
                sys.stderr.write(self.requestline + '\n')

        http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), Page).serve_forever()
        """#
}
