import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// The vault as an ordinary user lives with it: under the kernel's default key quota
/// (200 keys, 20,000 bytes), and with a persistent keyring that expires when nothing
/// touches it for days. Run as the test account `kc-test-vault` (root needed to act as
/// it and to change the kernel's settings).
final class VaultAccountTests: VaultTestCase {
    override func tearDownWithError() throws {
        try super.tearDownWithError()
        if getuid() == 0 { VaultAccount.reset() }
    }

    /// The account's key quota in bytes, as `/proc/key-users` counts it: a shell function.
    private let quotaFunctions = """
        used_bytes() { awk -v u="$(id -u):" '$1 == u { split($5, q, "/"); print q[1] }' /proc/key-users; }
        wait_for_collection() { n=0; while [ "${1:-0}" -lt "$(used_bytes)" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done; }

        """

    func testAnUnlockThatDoesNotFitTheQuotaSaysWhichItemsDidNotLoadAndHowToRaiseIt() throws {
        _ = try VaultAccount.require()
        VaultAccount.reset()
        let vault = try makeVault(owner: VaultAccount.name)
        let service = "kc-test.\(getpid()).vault-quota"
        // 30 items of 900 bytes (27,000 bytes, more than the 20,000 the quota allows), saved
        // ten at a time, each ten dropped from the kernel (and collected) before the next.
        let saved = try VaultAccount.run(quotaFunctions + """
            printf '%s' "$PASSPHRASE" | "$KC" vault init --work-factor 10 2>/dev/null || echo "init failed"
            for batch in 0 1 2; do
                for i in $(seq $((batch * 10)) $((batch * 10 + 9))); do
                    printf "%0900d" $i | "$KC" set --access after-first-unlock \(service) k$i || echo "set failed: $i"
                done
                "$KC" lock --level after-first-unlock 2>/dev/null || echo "lock failed"
                wait_for_collection 3000
            done
            ls "$VAULT/items/after-first-unlock/\(service)" | wc -l
            """, vault: vault)
        XCTAssertEqual(saved.output, "30\n", "\(saved)")
        VaultAccount.simulateReboot()
        waitForKeys(of: VaultAccount.uid, toDropTo: 2)

        let result = try VaultAccount.run(quotaFunctions + """
            printf '%s' "$PASSPHRASE" | "$KC" unlock; echo "unlock=$?"
            for name in $("$KC" ls \(service)); do
                if [ "$("$KC" get \(service) $name)" = "$(printf '%0900d' ${name#k})" ]; then echo "exact $name"; else echo "wrong $name"; fi
            done
            """, vault: vault)
        XCTAssertTrue(result.output.hasPrefix("unlock=2\n"), "\(result)")
        let loaded = result.output.split(separator: "\n").filter { $0.hasPrefix("exact ") }.map { String($0.dropFirst(6)) }
        XCTAssertFalse(result.output.contains("wrong "), "what loaded reads back exactly: \(result.output)")
        let lines = result.standardError.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "kc: unlocked; loaded \(loaded.count) after-first-unlock", "\(result)")
        let quotaLine = try XCTUnwrap(lines.first { $0.hasPrefix("kc: not loaded, the key quota is full: ") }, "\(result)")
        let listed = quotaLine.dropFirst("kc: not loaded, the key quota is full: ".count).prefix { $0 != ";" }
            .components(separatedBy: ", ").map { $0.replacingOccurrences(of: "\(service)/", with: "") }
        XCTAssertFalse(loaded.isEmpty, "some items fit: \(result)")
        XCTAssertFalse(listed.isEmpty, "some did not: \(result)")
        XCTAssertEqual(Set(loaded + listed), Set((0..<30).map { "k\($0)" }), "each item either loaded or is listed: \(result)")
        XCTAssertEqual(loaded.count + listed.count, 30)
        XCTAssertTrue(quotaLine.contains("; remove unused items, or raise the limits: sudo sysctl -w kernel.keys.maxkeys="), quotaLine)
        XCTAssertTrue(quotaLine.contains(" kernel.keys.maxbytes=") && quotaLine.hasSuffix(", then run 'kc unlock' again"), quotaLine)
    }

    /// A persistent keyring nothing touches expires (after 3 days by default) and the
    /// kernel collects it and its items. With the vault unlocked, a read that misses
    /// brings the item back from the vault; with it locked, the miss says so.
    func testAnExpiredPersistentKeyringIsSurvivedWhileTheVaultIsUnlocked() throws {
        _ = try VaultAccount.require()
        VaultAccount.reset()
        let expiryFile = "/proc/sys/kernel/keys/persistent_keyring_expiry", delayFile = "/proc/sys/kernel/keys/gc_delay"
        let savedExpiry = try String(contentsOfFile: expiryFile, encoding: .utf8)
        let savedDelay = try String(contentsOfFile: delayFile, encoding: .utf8)
        addCleanup {
            try? savedExpiry.write(toFile: expiryFile, atomically: false, encoding: .utf8)
            try? savedDelay.write(toFile: delayFile, atomically: false, encoding: .utf8)
        }
        let vault = try makeVault(owner: VaultAccount.name)
        let service = "kc-test.\(getpid()).vault-expiry"
        let stored = try VaultAccount.run("""
            printf '%s' "$PASSPHRASE" | "$KC" vault init --work-factor 10 2>/dev/null
            printf 'always value' | "$KC" set --access always \(service) token 2>/dev/null
            keyctl get_persistent @s
            """, vault: vault)
        XCTAssertEqual(stored.status, 0, "\(stored)")
        let firstKeyring = stored.output

        // Expire the account's persistent keyring in 3 seconds: the expiry is set when a
        // process asks for the keyring, so the setting is back at once for everyone else.
        // The kernel collects an expired keyring gc_delay (300 s) after it expired and,
        // until then, hands it out again alive: 1 s for the few seconds of the test.
        // Waits (reading /proc/keys as the account, which does not touch the keyring) until
        // the kernel has collected it.
        func expirePersistentKeyring() throws {
            try "1".write(toFile: delayFile, atomically: false, encoding: .utf8)
            try "3".write(toFile: expiryFile, atomically: false, encoding: .utf8)
            let touched = try VaultAccount.run("keyctl get_persistent @s", vault: vault)
            try savedExpiry.write(toFile: expiryFile, atomically: false, encoding: .utf8)
            XCTAssertEqual(touched.status, 0, "\(touched)")
            let serial = String(format: "%08x", Int(touched.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
            sleep(4)
            let collected = try VaultAccount.run("""
                n=0; while grep -q '^\(serial) ' /proc/keys && [ $n -lt 250 ]; do sleep 0.1; n=$((n + 1)); done
                grep -c '^\(serial) ' /proc/keys
                """, vault: vault)
            try savedDelay.write(toFile: delayFile, atomically: false, encoding: .utf8)
            XCTAssertEqual(collected.output, "0\n", "the expired persistent keyring \(serial) was collected: \(collected)")
        }
        try expirePersistentKeyring()
        let reloaded = try VaultAccount.run("""
            echo "listed=$("$KC" ls \(service) 2>/dev/null)"
            echo "keyring=$(keyctl get_persistent @s)"
            "$KC" get \(service) token; echo " get=$?"
            "$KC" ls -l \(service) | cut -f1,2
            """, vault: vault)
        XCTAssertTrue(reloaded.output.hasPrefix("listed=token\nkeyring="), "kc ls brought the item back from the unlocked vault, as a read does: \(reloaded)")
        XCTAssertFalse(reloaded.output.contains("keyring=\(firstKeyring)"), "a new persistent keyring: \(reloaded)")
        XCTAssertTrue(reloaded.output.hasSuffix("always value get=0\ntoken\talways\n"), "kc get brought it back from the vault, at its level: \(reloaded)")

        XCTAssertEqual(try VaultAccount.run("\"$KC\" lock", vault: vault).status, 0)
        try expirePersistentKeyring()
        let locked = try VaultAccount.run("\"$KC\" get \(service) token", vault: vault)
        XCTAssertEqual(locked.status, 1, "\(locked)")
        XCTAssertEqual(locked.standardError, "kc: no item 'token' in service '\(service)' in the kernel: the vault holds it but is locked; run 'kc unlock'\n")
    }

    /// Sharing is not saved in the vault (README, design notes): after a reboot and the
    /// owner's unlock the item is back but private, and sharing it again (`kc share`)
    /// gives the group its value back.
    func testASharedServiceComesBackPrivateAfterARebootUntilSharedAgain() throws {
        _ = try VaultAccount.require()
        let owner = TestAccount(VaultAccount.name, groups: [TestAccount.shareGroup]), member = TestAccount.member
        guard owner.ensure(), member.ensure() else { throw XCTSkip("could not put the test accounts in \(TestAccount.shareGroup)") }
        addCleanup { _ = try? runCommand("/usr/bin/gpasswd", ["-d", VaultAccount.name, TestAccount.shareGroup]) }
        VaultAccount.reset()
        let vault = try makeVault(owner: VaultAccount.name)
        let service = "kc-test.\(getpid()).vault-shared"
        let shared = try VaultAccount.run("""
            printf '%s' "$PASSPHRASE" | "$KC" vault init --work-factor 10 2>/dev/null
            printf 'for the group' | "$KC" set --group \(TestAccount.shareGroup) --access after-first-unlock \(service) token
            "$KC" share \(service)
            """, vault: vault)
        XCTAssertEqual(shared.output, "\(service): shared with group \(TestAccount.shareGroup) (read-only)\n", "\(shared)")
        let before = try member.run("\"$KC\" get --from \(VaultAccount.name) \(service) token")
        XCTAssertEqual(before.output, "for the group", "\(before)")

        VaultAccount.simulateReboot()
        let unlocked = try VaultAccount.run("printf '%s' \"$PASSPHRASE\" | \"$KC\" unlock; \"$KC\" get \(service) token", vault: vault)
        XCTAssertEqual(unlocked.output, "for the group", "the owner has the item back: \(unlocked)")
        let privately = try member.run("\"$KC\" get --from \(VaultAccount.name) \(service) token")
        XCTAssertNotEqual(privately.status, 0, "not shared until the owner shares it again: \(privately)")
        XCTAssertEqual(privately.output, "")
        let again = try VaultAccount.run("\"$KC\" share \(service) --group \(TestAccount.shareGroup)", vault: vault)
        XCTAssertEqual(again.status, 0, "\(again)")
        let after = try member.run("\"$KC\" get --from \(VaultAccount.name) \(service) token")
        XCTAssertEqual(after.output, "for the group", "the member reads it again: \(after)")
    }
}
