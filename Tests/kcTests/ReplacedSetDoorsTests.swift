import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// A service whose whole set is replaced again and again (as kc-agent mirrors a KV
/// secret): every door reads an item of it at any moment, never "no such item", and
/// `kc exec` hands a program one whole set.
final class ReplacedSetDoorsTests: KeyringTestCase {
    func testEveryDoorFindsTheItemsWhileTheirSetIsReplaced() throws {
        let mount = try MountFixture()
        defer { mount.unmount() }
        let service = uniqueService()
        let keychain = try Keychain(service: service).accessibility(.afterFirstUnlock)
        let keys = ["a", "b", "c"]
        @Sendable func set(_ version: Int) -> [(key: KeyName, value: [UInt8])] { keys.map { (key: KeyName($0), value: Array("v\(version)".utf8)) } }
        try keychain.replaceAllItems(with: set(0))
        let done = DoorsFlag()
        let writer = Thread {
            var version = 1
            while !done.isSet {
                try? keychain.replaceAllItems(with: set(version))
                version += 1
            }
        }
        writer.start()
        defer { done.set() }
        var failures: [String] = []
        for round in 0..<40 {
            let get = try kc("get", service, "b")
            if get.status != 0 || !get.output.hasPrefix("v") { failures.append("kc get: \(get)") }
            if (try? String(contentsOfFile: mount.file(service, "c"), encoding: .utf8))?.hasPrefix("v") != true {
                failures.append("cat in the mount, round \(round)")
            }
            let exec = try kc("exec", "--service", service, "--env", "--", "/bin/sh", "-c", "echo $A $B $C")
            if exec.status != 0 || Swift.Set(exec.output.split(whereSeparator: \.isWhitespace)).count != 1 {
                failures.append("kc exec: \(exec)")
            }
        }
        done.set()
        XCTAssertEqual(failures, [])
    }
}

private final class DoorsFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
