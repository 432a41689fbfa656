import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// Backups out of the kernel and back: `kc export` and `kc import`.
final class ExportImportTests: KeyringTestCase {
    private func temporaryFile(_ name: String) -> String {
        NSTemporaryDirectory() + "kc-test-\(getpid())-\(UUID().uuidString.prefix(8))-\(name)"
    }

    private func fill(_ first: String, _ second: String) throws {
        try Keychain(service: first).set([0, 1, 2, 255, 10], forKey: "blob")
        try Keychain(service: first, accessibility: .afterFirstUnlock).set("user-level", forKey: "token")
        try Keychain(service: second, accessibility: .always, timeout: .seconds(7200)).set("persistent", forKey: "otp")
        try Keychain(service: second, accessibility: .whenUnlockedThisDeviceOnly).set("stays here", forKey: "local")
    }

    func testExportThenImportRestoresBytesLevelsAndTimeoutsButNotDeviceOnlyItems() throws {
        let first = uniqueService(), second = uniqueService()
        try fill(first, second)
        let backup = temporaryFile("backup.json")
        defer { try? FileManager.default.removeItem(atPath: backup) }
        let exported = try runShell("'\(builtKC)' export --service '\(first)' --service '\(second)' > '\(backup)'")
        XCTAssertEqual(exported.status, 0, "\(exported)")
        XCTAssertTrue(exported.standardError.contains("left out 1 device-only item"), exported.standardError)

        try Keychain(service: first).removeAll()
        try Keychain(service: second).removeAll()
        let imported = try runShell("'\(builtKC)' import < '\(backup)'")
        XCTAssertEqual(imported.status, 0, "\(imported)")
        XCTAssertTrue(imported.standardError.contains("imported 3 item(s): 3 added, 0 replaced, 0 kept"), imported.standardError)

        XCTAssertEqual(try Keychain(service: first).data(forKey: "blob"), [0, 1, 2, 255, 10])
        XCTAssertEqual(try Keychain(service: first).item("token")?.accessibility, .afterFirstUnlock)
        let otp = try XCTUnwrap(Keychain(service: second).item("otp"))
        XCTAssertEqual(otp.accessibility, .always)
        XCTAssertTrue((3600...7200).contains(otp.secondsLeft ?? 0), "the time left is restored: \(String(describing: otp.secondsLeft))")
        XCTAssertNil(try Keychain(service: second).string(forKey: "local"), "device-only items are never exported")
    }

    func testExistingItemsAreKeptUnlessOverwriteAndDryRunChangesNothing() throws {
        let service = uniqueService()
        try Keychain(service: service).set("old", forKey: "a")
        let archive = KeychainArchive.encodeJSON([
            ExportedItem(service: KeyName(service), name: "a", level: .whenUnlocked, secondsLeft: nil, value: Array("new".utf8)),
            ExportedItem(service: KeyName(service), name: "b", level: .whenUnlocked, secondsLeft: nil, value: Array("added".utf8)),
        ])
        let dry = try kc(["import", "--dry-run"], input: archive)
        XCTAssertEqual(dry.output, "keep\t\(service)/a\nadd\t\(service)/b\n")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["a"], "a dry run changes nothing")

        let kept = try kc(["import"], input: archive)
        XCTAssertTrue(kept.standardError.contains("kept existing \(service)/a; --overwrite replaces it"), kept.standardError)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "a"), "old")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "b"), "added")

        XCTAssertEqual(try kc(["import", "--overwrite"], input: archive).status, 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "a"), "new")
    }

    func testAMalformedArchiveIsRejectedWholeAndWritesNothing() throws {
        let service = uniqueService()
        try Keychain(service: service).set("untouched", forKey: "existing")
        let json = """
            {"format": "kc-export", "version": 1, "items": [
              {"service": "\(service)", "name": "fresh", "access": "always", "secondsLeft": null, "value": "dg=="},
              {"service": "\(service)", "name": "existing", "access": "always", "secondsLeft": null, "value": "%%%"}]}
            """
        let result = try kc(["import", "--overwrite"], input: Array(json.utf8))
        XCTAssertEqual(result.status, 2)
        XCTAssertEqual(result.standardError, "kc: nothing imported: items[1].value: is not base64\n")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["existing"])
        XCTAssertEqual(try Keychain(service: service).string(forKey: "existing"), "untouched")

        let env = try kc(["import", "--format", "env", "--service", service], input: Array("GOOD=1\nbad line\n".utf8))
        XCTAssertEqual(env.standardError, "kc: nothing imported: line 2: expected NAME=value\n")
        XCTAssertFalse(try Keychain(service: service).contains("GOOD"))
    }

    func testAServiceNamedTwiceIsExportedOnceAndTheArchiveImports() throws {
        let service = uniqueService(), other = uniqueService()
        try Keychain(service: service).set("v", forKey: "token")
        try Keychain(service: other).set("o", forKey: "other")
        let backup = temporaryFile("twice.json")
        defer { try? FileManager.default.removeItem(atPath: backup) }
        let exported = try runShell("'\(builtKC)' export --service '\(service)' --service '\(other)' --service '\(service)' > '\(backup)'")
        XCTAssertEqual(exported.status, 0, "\(exported)")
        let archive = try KeychainArchive.decodeJSON(Array(try Data(contentsOf: URL(fileURLWithPath: backup))))
        XCTAssertEqual(archive.map { "\($0.service)/\($0.name)" }, ["\(service)/token", "\(other)/other"])
        try Keychain(service: service).removeAll()
        let imported = try runShell("'\(builtKC)' import < '\(backup)'")
        XCTAssertEqual(imported.status, 0, "\(imported)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "v")
    }

    func testANumberOutOfRangeNamesTheFieldAndTheItemAndImportsNothing() throws {
        let service = uniqueService()
        try Keychain(service: service).set("untouched", forKey: "existing")
        let seconds = "a whole number of seconds from 1 to 4294967295"
        let cases: [(field: String, written: String, says: String)] = [
            ("secondsLeft", "-5", "is -5 for item '\(service)/existing'; it must be null or \(seconds)"),
            ("secondsLeft", "0", "is 0 for item '\(service)/existing'; it must be null or \(seconds)"),
            ("secondsLeft", "1.5", "is 1.5 for item '\(service)/existing'; it must be null or \(seconds)"),
            ("secondsLeft", "4294967296", "is 4294967296 for item '\(service)/existing'; it must be null or \(seconds)"),
            ("secondsLeft", "\"60\"", "is not a number for item '\(service)/existing'; it must be null or \(seconds)"),
            ("expiresAt", "-5", "is -5 for item '\(service)/existing'; it must be null or a positive whole number of seconds since the epoch (1970)"),
        ]
        for (field, written, says) in cases {
            // The first item is good: a bad one later must keep it out too.
            let json = """
                {"format": "kc-export", "version": 1, "items": [
                  {"service": "\(service)", "name": "fresh", "access": "when-unlocked", "secondsLeft": 60, "value": "dg=="},
                  {"service": "\(service)", "name": "existing", "access": "when-unlocked", "\(field)": \(written), "value": "bmV3"}]}
                """
            for overwrite in [[], ["--overwrite"]] {
                let result = try kc(["import"] + overwrite, input: Array(json.utf8))
                XCTAssertEqual(result.status, 2, "\(field) \(written): \(result)")
                XCTAssertEqual(result.standardError, "kc: nothing imported: items[1].\(field): \(says)\n")
                XCTAssertEqual(result.standardOutput, [])
                XCTAssertEqual(try Keychain(service: service).allKeys(), ["existing"], "\(field) \(written): nothing imported")
                XCTAssertEqual(try Keychain(service: service).string(forKey: "existing"), "untouched")
            }
        }
        let version = try kc(["import"], input: Array(#"{"format": "kc-export", "version": 1.5, "items": []}"#.utf8))
        XCTAssertEqual(version.status, 2, "\(version)")
        XCTAssertEqual(version.standardError, "kc: nothing imported: version: is 1.5; this kc reads version 1\n")
    }

    func testDotEnvInAndOut() throws {
        let service = uniqueService()
        let input = "export API_KEY=\"k=v==\"\r\n# comment\r\nDB_URL=postgres://x # note\r\n"
        let result = try kc(["import", "--format", "env", "--service", service, "--access", "after-first-unlock"], input: Array(input.utf8))
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "API_KEY"), "k=v==")
        XCTAssertEqual(try Keychain(service: service).item("DB_URL")?.accessibility, .afterFirstUnlock)
        let out = try runShell("'\(builtKC)' export --format env --service '\(service)' | cat")
        XCTAssertEqual(out.output, "API_KEY='k=v=='\nDB_URL='postgres://x'\n")
    }

    func testExportRefusesATerminal() throws {
        guard programExists("script") else { throw XCTSkip("script (bsdutils) is not installed") }
        let result = try runCommand("/usr/bin/script", ["-qec", "'\(builtKC)' export", "/dev/null"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.output.contains("kc: refusing to write secrets to a terminal"), "\(result)")
    }

    func testEncryptedBackupWithAge() throws {
        guard programExists("age"), programExists("age-keygen") else { throw XCTSkip("age is not installed") }
        let service = uniqueService()
        try Keychain(service: service).set([0xde, 0xad, 0xbe, 0xef], forKey: "binary")
        let key = temporaryFile("age.key"), backup = temporaryFile("kc.age")
        defer { for file in [key, backup] { try? FileManager.default.removeItem(atPath: file) } }
        XCTAssertEqual(try runCommand("/usr/bin/env", ["age-keygen", "-o", key]).status, 0)
        let encrypt = try runShell("'\(builtKC)' export --service '\(service)' | age -r \"$(age-keygen -y '\(key)')\" > '\(backup)'")
        XCTAssertEqual(encrypt.status, 0, "\(encrypt)")
        let ciphertext = try Data(contentsOf: URL(fileURLWithPath: backup))
        XCTAssertNil(ciphertext.range(of: Data([0xde, 0xad, 0xbe, 0xef])), "the backup is encrypted")
        try Keychain(service: service).removeAll()
        let decrypt = try runShell("age -d -i '\(key)' '\(backup)' | '\(builtKC)' import")
        XCTAssertEqual(decrypt.status, 0, "\(decrypt)")
        XCTAssertEqual(try Keychain(service: service).data(forKey: "binary"), [0xde, 0xad, 0xbe, 0xef])
    }

    func testALargeServiceRoundTripsWithinTheUnprivilegedQuota() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root to run as the test user") }
        // 180 items: with the session, thread and service keyrings, nearly the 200-key
        // quota (keys of earlier tests may still be awaiting collection: wait for them
        // first); removing the items and waiting for the kernel to free them makes room
        // for the import.
        UnprivilegedUser.waitForKeyCollection()
        let result = try UnprivilegedUser.run("""
            i=0; while [ $i -lt 180 ]; do printf "v-$i" | "$KC" set svc.big "k-$i" || exit 3; i=$((i + 1)); done
            "$KC" export --service svc.big > /tmp/kc-big.$$ || exit 4
            i=0; while [ $i -lt 180 ]; do "$KC" rm svc.big "k-$i" || exit 5; i=$((i + 1)); done
            n=0; while [ $n -lt 100 ]; do
                used=$(awk -v u="$(id -u):" '$1 == u { split($4, q, "/"); print q[1] }' /proc/key-users)
                [ "${used:-0}" -lt 20 ] && break; sleep 0.1; n=$((n + 1))
            done
            "$KC" import < /tmp/kc-big.$$ || exit 6
            rm -f /tmp/kc-big.$$
            echo "count=$("$KC" ls svc.big | wc -l) sample=$("$KC" get svc.big k-123)"
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertTrue(result.output.contains("count=180 sample=v-123"), "\(result)")
        UnprivilegedUser.waitForKeyCollection()
    }

    /// An ordinary user's whole quota is 200 keys and 20,000 bytes: an import bigger than
    /// what is left is refused before it stores anything, with what it needs and how to
    /// raise the limits, and `kc doctor` says how large a new value can be.
    func testAnImportThatCannotFitStoresNothingAndSaysHowToMakeRoom() throws {
        let script = """
            svc=kc-test.$$.quota-import
            i=0; while [ $i -lt 250 ]; do echo "K$i=v$i"; i=$((i + 1)); done > /tmp/kc-test-import.$$
            "$KC" import --format env --service $svc < /tmp/kc-test-import.$$; echo "import=$?"
            rm -f /tmp/kc-test-import.$$
            echo "items=$("$KC" ls $svc 2>/dev/null | wc -l)"
            "$KC" doctor | grep 'key quota'
            """
        let result: CommandResult
        if UnprivilegedUser.available {
            result = try UnprivilegedUser.run(script)
        } else if getuid() != 0 {
            result = try runCommand("/usr/bin/env", ["keyctl", "session", "-", "/bin/sh", "-c", script], environment: ["KC": builtKC, "PATH": "/usr/bin:/bin"])
        } else {
            throw XCTSkip("running as root but the test user could not be created")
        }
        guard let quota = result.output.split(separator: "\n").first(where: { $0.contains("key quota") }),
              quota.contains("/200 keys") else {
            throw XCTSkip("this uid's key quota is not the default 200 keys: \(result.output)")
        }
        XCTAssertTrue(result.output.contains("import=2\n"), "\(result)")
        XCTAssertTrue(result.standardError.contains("\nkc: not enough key quota for this import (250 items; nothing was imported): it needs 251 keys and "), result.standardError)
        XCTAssertTrue(result.standardError.contains("keys and") && result.standardError.contains("bytes free (uses "), result.standardError)
        XCTAssertTrue(result.standardError.contains("raise the limits: sudo sysctl -w kernel.keys.maxkeys="), result.standardError)
        XCTAssertTrue(result.output.contains("items=0\n"), "nothing was imported: \(result)")
        XCTAssertTrue(quota.contains("a new value of at most ") && quota.contains("(the kernel allows 32767)"), String(quota))
        XCTAssertTrue(quota.contains("more: sudo sysctl -w kernel.keys.maxkeys="), String(quota))
    }
}
