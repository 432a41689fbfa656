import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// Many writers storing new items into one service while several threads keep removing
/// it whenever it is empty (what `rmdir` of the service in the mount does): no store that reported
/// success loses its item. A hostile review found two losses that one writer and one
/// remover (FirstHourTests) never meet: a restore that moved items into a newer keyring
/// nobody held, and a removal that detached a keyring it had listed but another removal
/// had taken out since (the kernel unlinks by name, so the newer keyring went instead).
final class EmptyServiceRaceTests: KeyringTestCase {
    func testManyWritersAndRemoversAtTheSessionLevelLoseNoItem() throws {
        try race(accessibility: .whenUnlocked)
    }

    func testManyWritersAndRemoversAtTheUserLevelLoseNoItem() throws {
        try race(accessibility: .afterFirstUnlock)
    }

    func testManyWritersAndRemoversWithTimedItemsLoseNoItem() throws {
        // A timed item's deadline record, in the user keyring, can outlive an item that a
        // racing removal took (until its deadline): an ordinary user's 200 keys are too
        // few to spend on that.
        try XCTSkipIf(getuid() != 0, "run as root only: records of raced timed items hold an ordinary user's key quota until their deadline")
        try race(accessibility: .whenUnlocked, timed: true)
    }

    private func race(accessibility: Accessibility, timed: Bool = false) throws {
        let service = uniqueService()
        let base = try Keychain(service: service)
        var writer = base.accessibility(accessibility)
        if timed { writer = try writer.timeout(.seconds(3600)) }
        let log = SharedRaceLog()
        // An ordinary user's 200 keys hold fewer writers' churn.
        let writers = 4, removers = 2, rounds = getuid() == 0 ? 300 : 60
        let removing = DispatchGroup(), writing = DispatchGroup()
        for _ in 0..<removers {
            removing.enter()
            Thread {
                defer { removing.leave() }
                while !log.writersFinished {
                    if (try? base.removeServiceIfEmpty()) == true { log.record { $0.removals += 1 } }
                }
            }.start()
        }
        for thread in 0..<writers {
            writing.enter()
            Thread { [writer] in
                defer { writing.leave() }
                for round in 0..<rounds {
                    let name = "w\(thread).\(round)"
                    // An ordinary user's 200 keys: the keyrings this churns wait for the
                    // kernel's collector, and the other writers take the room it frees.
                    // Not what is tested: wait, and store it again.
                    var failure: (any Error)?
                    for _ in 0..<20 {
                        do {
                            try writer.set(name, forKey: name)
                            failure = nil
                            break
                        } catch let error as KeychainError {
                            failure = error
                            guard case .quotaExceeded = error else { break }
                            TestQuota.waitForRoom(keys: 20, bytes: 1000)
                        } catch {
                            failure = error
                            break
                        }
                    }
                    if let failure {
                        log.record { $0.failures.append("\(name): \(failure)") }
                        continue
                    }
                    // A read while a remover holds the keyring aside misses for a moment;
                    // an item lost with a destroyed keyring never comes back.
                    var found = (try? base.string(forKey: name)) == name
                    for _ in 0..<200 where !found {
                        usleep(5_000)
                        found = (try? base.string(forKey: name)) == name
                    }
                    if !found { log.record { $0.lost.append(name) } }
                    _ = try? base.remove(name)
                }
            }.start()
        }
        writing.wait()
        log.record { $0.writersDone = true }
        removing.wait()
        _ = try? base.removeAll()
        let result = log.snapshot
        XCTAssertEqual(result.lost, [], "items lost with a removed service keyring")
        XCTAssertEqual(result.failures, [], "every store succeeded")
        XCTAssertGreaterThan(result.removals, 0, "the empty service was removed meanwhile")
    }
}

/// What the race's threads did, behind a lock.
private final class SharedRaceLog: @unchecked Sendable {
    struct State {
        var lost: [String] = []
        var failures: [String] = []
        var removals = 0
        var writersDone = false
    }
    private let lock = NSLock()
    private var state = State()

    func record(_ change: (inout State) -> Void) { lock.withLock { change(&state) } }
    var snapshot: State { lock.withLock { state } }
    var writersFinished: Bool { lock.withLock { state.writersDone } }
}
