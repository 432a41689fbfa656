import Foundation
import KCTestSupport
import XCTest

/// As an ordinary user, under the kernel's default quota (200 keys, 20000 bytes).
/// Run as root, the suite creates the `kc-test` user and runs these as that user; run
/// unprivileged, the user tests run as the caller.
final class UnprivilegedTests: KeyringTestCase {
    private func runUnprivileged(_ script: String) throws -> CommandResult {
        if UnprivilegedUser.available { return try UnprivilegedUser.run(script) }
        guard getuid() != 0 else { throw XCTSkip("running as root but the test user could not be created") }
        return try runCommand("/usr/bin/env", ["keyctl", "session", "-", "/bin/sh", "-c", "KC=\(builtKC); export KC; \(script)"])
    }

    func testEverythingWorksForAnOrdinaryUser() throws {
        let service = "kc-test.\(getpid()).unpriv"
        let result = try runUnprivileged("""
            set -e
            svc=\(service)
            printf 'abc' | "$KC" set $svc token
            printf 'u' | "$KC" set --access after-first-unlock $svc user-item
            printf 'p' | "$KC" set --access always --timeout 1h $svc persistent-item
            "$KC" get $svc token; echo
            "$KC" ls $svc
            "$KC" rm $svc user-item
            "$KC" rm $svc persistent-item
            "$KC" doctor >/dev/null || true
            id -u
            # The emptied service keyrings stay (kc rm removes items); leave nothing behind.
            for anchor in @u "$(keyctl get_persistent @s)"; do
                ring=$(keyctl search "$anchor" keyring "kc:$svc" 2>/dev/null) && keyctl unlink "$ring" "$anchor" >/dev/null
            done
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        let lines = result.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(Array(lines.prefix(4)), ["abc", "persistent-item", "token", "user-item"], "\(result)")
        if UnprivilegedUser.available { XCTAssertNotEqual(lines.last, "0") }
    }

    func testFullQuotaIsAClearErrorAndLosesNothing() throws {
        // Fill the quota with small items until the kernel refuses, then check the
        // message and that every item stored before it is intact.
        let result = try runUnprivileged("""
            i=0
            while [ $i -lt 400 ]; do
                if ! printf "value-$i" | "$KC" set svc.quota "item-$i" 2>/tmp/kc-quota-err.$$; then break; fi
                i=$((i + 1))
            done
            echo "stored=$i"
            echo "status-line=$(cat /tmp/kc-quota-err.$$)"
            rm -f /tmp/kc-quota-err.$$
            bad=0; j=0
            while [ $j -lt $i ]; do
                [ "$("$KC" get svc.quota "item-$j")" = "value-$j" ] || bad=$((bad + 1))
                j=$((j + 1))
            done
            echo "damaged=$bad"
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        let output = result.output
        guard getuid() == 0 || UnprivilegedUser.available || !output.contains("stored=400") else {
            throw XCTSkip("this uid's key quota is larger than 400 keys")
        }
        XCTAssertFalse(output.contains("stored=400"), "the quota stopped the writes: \(output)")
        XCTAssertTrue(output.contains("status-line=kc: key quota exceeded (add_key: Disk quota exceeded): uid "), output)
        XCTAssertTrue(output.contains("sysctl -w kernel.keys.maxkeys="), output)
        XCTAssertTrue(output.contains("damaged=0"), output)
        if UnprivilegedUser.available { UnprivilegedUser.waitForKeyCollection() }
    }

    func testAnotherUidCannotReadTheItems() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root to act as a second user") }
        let service = uniqueService()
        try kc("set", service, "secret", input: Array("root-only".utf8))
        let ring = try XCTUnwrap(keyctlSearch("@s", "keyring", "kc:" + service))
        let item = try XCTUnwrap(keyctlSearch(ring, "user", "secret"))
        let result = try UnprivilegedUser.run("""
            keyctl print \(item) 2>&1; echo "print=$?"
            keyctl search \(ring) user secret 2>&1; echo "search=$?"
            "$KC" get \(service) secret; echo "get=$?"
            """)
        XCTAssertTrue(result.output.contains("Permission denied"), "\(result)")
        XCTAssertTrue(result.output.contains("print=1"), "\(result)")
        XCTAssertTrue(result.output.contains("search=1"), "\(result)")
        XCTAssertTrue(result.output.contains("get=1"), "another uid sees no such item: \(result)")
        XCTAssertFalse(result.output.contains("root-only"), "\(result)")
        XCTAssertEqual(try kc("get", service, "secret").output, "root-only")
    }
}
