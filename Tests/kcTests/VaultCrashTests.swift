import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Writers that die at any moment, and writers at the same time: the kernel and the
/// vault never disagree in a way a reboot would show as a value nobody wrote.
final class VaultCrashTests: VaultTestCase {
    func testKillingKcSetAtAnyMomentLeavesTheOldOrTheNewValueAndAReadableVault() throws {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "token", "value-0").status, 0)
        var written: Set<String> = ["value-0"]
        var current = "value-0"
        var bad: [String] = []
        var rounds = 0, completed = 0, changedBeforeKill = 0
        var generator = SystemRandomNumberGenerator()
        let arguments = ["XDG_DATA_HOME=\(vault.dataHome)", builtKC, "set", service, "token"]
        // Kill anywhere in a whole run of kc set: at 0 to 110% of how long one takes here.
        var durations: [UInt32] = []
        for trial in 0..<5 {
            let start = DispatchTime.now().uptimeNanoseconds
            let process = try SpawnedProcess("/usr/bin/env", arguments)
            process.send(Array("value-0.\(trial)".utf8))
            XCTAssertEqual(process.wait().status, 0)
            written.insert("value-0.\(trial)")
            durations.append(UInt32((DispatchTime.now().uptimeNanoseconds - start) / 1000))
        }
        current = "value-0.4"
        let longest = max(20_000, durations.sorted()[2] * 11 / 10)
        let end = Date().addingTimeInterval(20)
        while Date() < end {
            rounds += 1
            let new = "value-\(rounds)"
            written.insert(new)
            let process = try SpawnedProcess("/usr/bin/env", arguments)
            process.send(Array(new.utf8))
            usleep(UInt32.random(in: 0...longest, using: &generator))
            kill(process.pid, SIGKILL)
            let (status, standardError) = process.wait()
            let now = try Keychain(service: service).string(forKey: "token") ?? "<none>"
            if now != current && now != new {
                bad.append("round \(rounds): the kernel holds \(now), neither \(current) nor \(new)")
            }
            if status == 0 {
                completed += 1
                if now != new { bad.append("round \(rounds): kc set succeeded but the kernel holds \(now)") }
            } else if status != 128 + SIGKILL {
                bad.append("round \(rounds): kc set failed on its own: \(status) \(standardError)")
            } else if now == new {
                changedBeforeKill += 1
            }
            current = now
        }
        XCTAssertEqual(bad, [], "after \(rounds) rounds")
        XCTAssertLessThan(completed, rounds, "some rounds were killed while kc set ran")

        // Without a reboot, an unlock finds the kernel's value newer than a file a killed
        // writer did not put in place, and saves it again; then a reboot brings it back.
        let (refresh, refreshReport) = try vault.unlock()
        XCTAssertEqual(refresh.status, 0, "\(refresh)")
        XCTAssertEqual(refreshReport?.unreadable.count, 0, "\(refresh)")
        XCTAssertEqual(vault.stagedFiles(), [], "the files killed writers staged in tmp/ are removed")
        simulateReboot()
        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(report?.unreadable.count, 0, "no file was left half-written: \(result)")
        XCTAssertEqual(report?.loadedCount, 1, "\(result)")
        let final = try XCTUnwrap(try Keychain(service: service).string(forKey: "token"))
        XCTAssertTrue(written.contains(final), "a value that was written: \(final)")
        XCTAssertEqual(final, current, "the value the kernel had before the reboot")
        XCTAssertEqual(vault.itemFiles(), ["when-unlocked/\(service)/token"])
        print("kill -9 soak: \(rounds) rounds killed at 0-\(longest) µs, \(completed) completed, \(changedBeforeKill) killed after the kernel changed")
    }

    func testConcurrentWritersLeaveTheKernelAndTheVaultWithTheSameLastValueAndLevel() throws {
        let vault = try makeVault()
        let service = uniqueService()
        // Eight writers of 25 values each; odd writers store at after-first-unlock, so
        // the item also moves between keyrings and folders.
        let result = try vault.bash("""
            for writer in 1 2 3 4 5 6 7 8; do
                access=when-unlocked; [ $((writer % 2)) -eq 1 ] && access=after-first-unlock
                ( for round in $(seq 1 25); do
                    printf "w$writer-$round" | kc set --access $access '\(service)' token || echo "failed: $writer $round" >&2
                  done ) &
            done
            wait
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.standardError, "", "every write succeeded")

        let listed = try vaultListedItems(KeyName(service))
        XCTAssertEqual(listed.count, 1, "one item: \(listed)")
        let level = try XCTUnwrap(listed.first?.access)
        let kernel = try XCTUnwrap(try Keychain(service: service).string(forKey: "token"))
        XCTAssertNotNil(kernel.range(of: #"^w[1-8]-[0-9]+$"#, options: .regularExpression), kernel)
        XCTAssertEqual(vault.itemFiles(), ["\(level)/\(service)/token"], "one file, at the kernel's level")
        XCTAssertEqual(vault.stagedFiles(), [])

        simulateReboot()
        let (unlocked, report) = try vault.unlock()
        XCTAssertEqual(unlocked.status, 0, "\(unlocked)")
        XCTAssertEqual(report?.loaded, [level: 1], "\(unlocked)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), kernel, "the last writer won in the kernel and in the vault")
        XCTAssertEqual(try vaultListedItems(KeyName(service)).first?.access, level)
    }

    /// A level move puts the new file in place, then removes the old one: a crash in
    /// between leaves both. The newer write wins at unlock, whichever level it is at, and
    /// the older file goes.
    func testAnItemLeftAtTwoLevelsByACrashLoadsItsNewerWrite() throws {
        let vault = try makeVault()
        let service = uniqueService()
        for (name, first, second) in [("up", "when-unlocked", "after-first-unlock"), ("down", "after-first-unlock", "when-unlocked")] {
            XCTAssertEqual(try vault.set(service, name, "older", options: ["--access", first]).status, 0)
            let older = try Data(contentsOf: URL(fileURLWithPath: vault.itemFile(first, service, name)))
            usleep(10_000)
            XCTAssertEqual(try vault.set(service, name, "newer", options: ["--access", second]).status, 0)
            XCTAssertFalse(FileOps.exists(vault.itemFile(first, service, name)), "the move removed the old file")
            try FileManager.default.createDirectory(atPath: vault.path + "/items/\(first)/\(service)", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            try older.write(to: URL(fileURLWithPath: vault.itemFile(first, service, name)))
            XCTAssertEqual(chmod(vault.itemFile(first, service, name), 0o600), 0)
        }
        simulateReboot()
        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(report?.loaded, ["when-unlocked": 1, "after-first-unlock": 1], "\(result)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "up"), "newer")
        XCTAssertEqual(try Keychain(service: service).item("up")?.accessibility, .afterFirstUnlock)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "down"), "newer")
        XCTAssertEqual(try Keychain(service: service).item("down")?.accessibility, .whenUnlocked)
        XCTAssertEqual(vault.itemFiles(), ["after-first-unlock/\(service)/up", "when-unlocked/\(service)/down"], "the older files are removed")
    }
}
