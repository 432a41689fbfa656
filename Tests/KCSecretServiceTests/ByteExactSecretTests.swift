import Foundation
import KCTestSupport
import XCTest

/// Secrets are bytes (issue 37): random binary values (256 as root; as an ordinary user
/// what its key quota holds), invalid UTF-8, the empty secret, one NUL byte and lengths
/// up from there, each with its own content type, stored through D-Bus with python
/// SecretStorage over its DH session, come back byte for byte with their content type
/// over D-Bus, through `kc get` and through `cat` in the mount; and many lookups in a
/// row over DH never fail.
final class ByteExactSecretTests: KeyringTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
    }

    func testRandomBinarySecretsComeBackByteForByteWithTheirContentTypes() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        // An ordinary user's key quota (200 keys, 20,000 bytes) holds fewer and shorter ones.
        let count = getuid() == 0 ? 256 : 40, longest = getuid() == 0 ? 700 : 150
        let out = try bus.python("""
            import os, secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(connection)
            rng = __import__('random').Random(36)
            made = []
            for i in range(int(sys.argv[2])):
                length = 1 + (i * 37) % int(sys.argv[4])
                value = bytes(rng.getrandbits(8) for _ in range(length))
                if i % 5 == 0:
                    value = b'\\xff\\xfe' + value  # never valid UTF-8
                if i == 1:
                    value = b''
                if i == 2:
                    value = b'\\x00'  # not the empty secret
                kind = ['application/octet-stream', 'text/plain', 'application/x-kc-test; charset=binary'][i % 3]
                item = collection.create_item(f'binary {i}', {'service': sys.argv[1], 'username': f'b{i}'}, value,
                                              replace=True, content_type=kind)
                made.append((item, value, kind))
            wrong, kinds = [], []
            for item, value, kind in made:
                if item.get_secret() != value:
                    wrong.append(item.get_label())
                if item.get_secret_content_type() != kind:
                    kinds.append(item.get_label())
            with open(sys.argv[3], 'wb') as f:
                for item, value, kind in made:
                    f.write(value.hex().encode() + b'\\n')
            emit(encrypted=made[0][0].session.encrypted, wrong=wrong, kinds=kinds, count=len(made))
            """, arguments: [service, String(count), scratchFile(), String(longest)])
        XCTAssertEqual(out["count"], .number(Double(count)), "\(out)")
        XCTAssertEqual(out["encrypted"], true, "SecretStorage's own (DH) session")
        XCTAssertEqual(out["wrong"], .array([]), "every secret byte for byte over D-Bus")
        XCTAssertEqual(out["kinds"], .array([]), "every content type kept")
        // The same bytes through kc.
        let expected = (readWholeFile(lastScratch) ?? "").split(separator: "\n", omittingEmptySubsequences: false)
            .dropLast().map(String.init)
        XCTAssertEqual(expected.count, count)
        XCTAssertEqual(Array(expected.prefix(3).dropFirst()), ["", "00"], "the empty secret and one NUL byte are among them")
        var differing: [Int] = []
        for (index, hex) in expected.enumerated() {
            let got = try bus.kc("get", service, "b\(index)")
            if got.status != 0 || got.standardOutput.map({ String(format: "%02x", $0) }).joined() != hex { differing.append(index) }
        }
        XCTAssertEqual(differing, [], "kc get prints each secret's exact bytes")
        // And `cat` in the mount, where FUSE is there.
        guard (try? MountFixture.requireFUSE()) != nil else { return }
        let mount = try MountFixture()
        defer { mount.unmount() }
        var differingInMount: [Int] = []
        for (index, hex) in expected.enumerated() {
            let got = try runCommand("/bin/cat", [mount.file(service, "b\(index)")])
            if got.status != 0 || got.standardOutput.map({ String(format: "%02x", $0) }).joined() != hex { differingInMount.append(index) }
        }
        XCTAssertEqual(differingInMount, [], "cat reads each secret's exact bytes")
    }

    /// 2,000 DH lookups in a row over one connection (the issue asks 10,000 with KC_LONG=1):
    /// each its own session, none fails.
    func testConsecutiveDHLookupsNeverFail() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let rounds = ProcessInfo.processInfo.environment["KC_LONG"] == "1" ? 10_000 : 2_000
        let out = try bus.python("""
            import secretstorage
            connection = secretstorage.dbus_init()
            collection = secretstorage.get_default_collection(connection)
            collection.create_item('dh', {'service': sys.argv[1], 'username': 'dh'}, b'dh-value \\x00\\x01', replace=True)
            failures = 0
            for _ in range(int(sys.argv[2])):
                items = list(collection.search_items({'service': sys.argv[1]}))
                if len(items) != 1 or items[0].get_secret() != b'dh-value \\x00\\x01':
                    failures += 1
            emit(failures=failures)
            """, arguments: [service, String(rounds)])
        XCTAssertEqual(out["failures"], 0, "\(out)")
    }

    private var lastScratch = ""

    private func scratchFile() -> String {
        lastScratch = FileManager.default.temporaryDirectory.appendingPathComponent("kc-bytes-\(getpid())-\(UUID().uuidString.prefix(6))").path
        let path = lastScratch
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }
}
