import Foundation
import KCTestSupport
import KernelKeychain
import Synchronization
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Writers racing on one item must not lose it (DESIGN §3: "an item has one home";
/// §8: concurrent writers lose nothing). Two writers of one key at two levels leave
/// exactly one item, holding one of the two values; a set racing the removal of its
/// service may lose, but never fails with a kernel error.
///
/// Rounds: KC_RACE_ROUNDS (in-process, default 2000) and KC_RACE_CLI_ROUNDS (processes,
/// default 200); Tools/soak/race.sh runs 10000 of each.
final class LevelRaceTests: KeyringTestCase {
    private static func rounds(_ variable: String, default value: Int) -> Int {
        ProcessInfo.processInfo.environment[variable].flatMap(Int.init).map { max($0, 1) } ?? value
    }

    private var libraryRounds: Int { Self.rounds("KC_RACE_ROUNDS", default: 2000) }
    private var cliRounds: Int { Self.rounds("KC_RACE_CLI_ROUNDS", default: 200) }

    // MARK: In-process

    func testTwoThreadsSettingOneKeyAtTwoLevelsAlwaysLeaveExactlyOneItem() throws {
        let service = uniqueService()
        let session = try Keychain(service: service, accessibility: .whenUnlocked)
        let user = try Keychain(service: service, accessibility: .afterFirstUnlock)
        let rounds = libraryRounds
        let errors = RaceLog()
        var bad: [String] = []
        race(rounds: rounds, errors: errors, [
            { round in try session.set("session-\(round)", forKey: "k") },
            { round in try user.set("user-\(round)", forKey: "k") },
        ], check: { round in
            let items = try Keychain(service: service).items()
            let value = try Keychain(service: service).string(forKey: "k")
            if items.count != 1 || (value != "session-\(round)" && value != "user-\(round)") {
                bad.append("round \(round): \(items.count) item(s) \(items.map { $0.accessibility?.name ?? "?" }), value \(value.debugDescription)")
            }
        })
        XCTAssertTrue(errors.messages.isEmpty, "set threw in \(errors.messages.count) of \(rounds) rounds; first: \(errors.messages.prefix(3))")
        XCTAssertTrue(bad.isEmpty, "the item was lost or doubled in \(bad.count) of \(rounds) rounds; first: \(bad.prefix(3))")
    }

    /// Writers setting items in the service while another thread removes the whole
    /// service over and over: a set may find its service keyring gone under it
    /// (add_key: ENOKEY), or lose the creation race to a keyring that is then removed
    /// (keyctl_move: EEXIST). It may lose its item then, but must not throw.
    func testSetRacingRemoveAllNeverFailsWithAKernelError() throws {
        let service = uniqueService()
        let rounds = libraryRounds
        let writers = 4  // more threads than this machine's cores: a preempted set widens the window
        let errors = RaceLog(), removeErrors = RaceLog(), quotaErrors = RaceLog()
        let done = DispatchGroup()
        let running = RaceFlag()
        for writer in 0..<writers {
            done.enter()
            Thread {
                for round in 0..<rounds {
                    do {
                        try Keychain(service: service, accessibility: Self.level(round)).set("v\(round)", forKey: "k\(writer)")
                    } catch KeychainError.quotaExceeded {
                        quotaErrors.append("writer \(writer), round \(round)")
                    } catch {
                        errors.append("writer \(writer), round \(round): \(error)")
                    }
                }
                done.leave()
            }.start()
        }
        let removerStopped = DispatchSemaphore(value: 0)
        Thread {
            while running.isSet {
                do { try Keychain(service: service).removeAll() } catch { removeErrors.append("\(error)") }
            }
            removerStopped.signal()
        }.start()
        done.wait()
        running.clear()
        removerStopped.wait()
        XCTAssertTrue(errors.messages.isEmpty,
                      "set threw in \(errors.messages.count) of \(rounds * writers) calls racing removeAll(); first: \(errors.messages.prefix(3))")
        // The kernel counts a removed key against its owner's quota until its garbage
        // collector has run, which a loop this tight outpaces: an ordinary user (200
        // keys) can then see EDQUOT for a moment; root's quota is far too large for that.
        if getuid() == 0 {
            XCTAssertTrue(quotaErrors.messages.isEmpty, "root hit its key quota \(quotaErrors.messages.count) times")
        } else if !quotaErrors.messages.isEmpty {
            print("note: \(quotaErrors.messages.count) of \(rounds * writers) sets met the 200-key quota while the kernel collected removed keys")
        }
        if !removeErrors.messages.isEmpty { print("note: removeAll threw \(removeErrors.messages.count) times; first: \(removeErrors.messages.prefix(3))") }
    }

    private static func level(_ round: Int) -> Accessibility { round % 2 == 0 ? .whenUnlocked : .afterFirstUnlock }

    // MARK: Processes

    func testTwoKcSetProcessesAtTwoLevelsAlwaysLeaveExactlyOneItem() throws {
        let service = uniqueService()
        let rounds = cliRounds
        var bad: [String] = []
        var failures: [String] = []
        for round in 0..<rounds {
            let results = try runTogether([
                (["set", "--access", "when-unlocked", service, "k"], "session-\(round)"),
                (["set", "--access", "after-first-unlock", service, "k"], "user-\(round)"),
            ])
            for result in results where result.status != 0 { failures.append("round \(round): \(result)") }
            let items = try Keychain(service: service).items()
            let value = try Keychain(service: service).string(forKey: "k")
            if items.count != 1 || (value != "session-\(round)" && value != "user-\(round)") {
                bad.append("round \(round): \(items.count) item(s) \(items.map { $0.accessibility?.name ?? "?" }), value \(value.debugDescription)")
            }
        }
        XCTAssertTrue(failures.isEmpty, "kc set failed in \(failures.count) of \(rounds) rounds; first: \(failures.prefix(3))")
        XCTAssertTrue(bad.isEmpty, "the item was lost or doubled in \(bad.count) of \(rounds) rounds; first: \(bad.prefix(3))")
    }

    /// `kc set` while its service is removed (as `rmdir` through the mount or
    /// `removeAll()` do) may lose its item, but exits 0. A process can be paused at any
    /// instruction for a while (a loaded machine deschedules it); the removed keyring is
    /// freed once the kernel's RCU grace period has passed, and a set that then adds to
    /// it gets ENOKEY. So each round pauses `kc set` (SIGSTOP) at a random moment of its
    /// ~1 ms of work, removes the service, waits 30 ms and lets it go on (SIGCONT).
    func testKcSetRacingRemovalOfTheServiceNeverFails() throws {
        let service = uniqueService()
        let rounds = cliRounds
        var failures: [String] = []
        for round in 0..<rounds {
            let access = round % 2 == 0 ? "when-unlocked" : "after-first-unlock"
            // Half the rounds find the service there, half create it.
            if round % 4 < 2 { try Keychain(service: service, accessibility: Self.level(round)).set("seed", forKey: "seed") }
            let process = try SpawnedProcess(builtKC, ["set", "--access", access, service, "k"])
            process.waitUntilReadingInput()
            process.send(Array("v\(round)".utf8))
            spin(microseconds: Int.random(in: 0...1500))
            kill(process.pid, SIGSTOP)
            try? Keychain(service: service).removeAll()
            usleep(30_000)
            kill(process.pid, SIGCONT)
            let result = process.wait()
            if result.status != 0 { failures.append("round \(round) (\(access)): status \(result.status), \(result.standardError.debugDescription)") }
        }
        XCTAssertTrue(failures.isEmpty, "kc set failed in \(failures.count) of \(rounds) rounds racing the service's removal; first: \(failures.prefix(3))")
    }

    // MARK: Helpers

    /// Runs each body on its own thread, all released together each round (the threads
    /// spin on a shared round number, so they start within a few microseconds of each
    /// other), each after a random delay of up to `jitter` microseconds (so their kernel
    /// calls interleave in every order over the rounds); then `check` on this thread.
    private func race(rounds: Int, errors: RaceLog, jitter: Int = 60, _ bodies: [@Sendable (Int) throws -> Void],
                      check: (Int) throws -> Void) {
        let gate = RoundGate()
        for body in bodies {
            // New threads inherit this thread's session keyring (the test's own).
            Thread {
                for round in 0..<rounds {
                    gate.waitForRound(round)
                    spin(microseconds: Int.random(in: 0...jitter))
                    do { try body(round) } catch { errors.append("round \(round): \(error)") }
                    gate.finished()
                }
            }.start()
        }
        for round in 0..<rounds {
            gate.start(round)
            gate.waitUntilFinished(count: (round + 1) * bodies.count)
            do { try check(round) } catch { errors.append("round \(round), checking: \(error)") }
        }
    }

    /// Starts every `kc` command, each blocked reading its value from a pipe, then
    /// writes all the values at once so the commands reach the kernel together.
    private func runTogether(_ commands: [(arguments: [String], value: String)]) throws -> [Outcome] {
        let processes = try commands.map { try SpawnedProcess(builtKC, $0.arguments) }
        for process in processes { process.waitUntilReadingInput() }
        for (process, command) in zip(processes, commands) { process.send(Array(command.value.utf8)) }
        return processes.map { process in
            let result = process.wait()
            return Outcome(status: result.status, standardError: result.standardError)
        }
    }
}

/// How a `kc` process ended.
private struct Outcome: CustomStringConvertible {
    var status: Int32
    var standardError: String
    var description: String { "status \(status), stderr \(standardError.debugDescription)" }
}

/// Errors collected from several threads.
private final class RaceLog: @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [String] = []
    func append(_ message: String) { lock.withLock { collected.append(message) } }
    var messages: [String] { lock.withLock { collected } }
}

/// A flag one thread clears and others poll.
private final class RaceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = true
    var isSet: Bool { lock.withLock { value } }
    func clear() { lock.withLock { value = false } }
}

/// Starts rounds for racing threads: they spin (yielding) on the round number.
private final class RoundGate: Sendable {
    private let round = Atomic<Int>(-1)
    private let done = Atomic<Int>(0)

    func start(_ number: Int) { round.store(number, ordering: .releasing) }
    func finished() { done.add(1, ordering: .releasing) }

    func waitForRound(_ number: Int) {
        while round.load(ordering: .acquiring) < number { sched_yield() }
    }

    func waitUntilFinished(count: Int) {
        while done.load(ordering: .acquiring) < count { sched_yield() }
    }
}
