// A small program over the KernelKeychain library, so the sharing tests can use the
// library as other users (a test process cannot change its own uid and go on).
//
//   kc-keychain-probe get|set|rm|ls SERVICE [KEY] [--group G] [--from USER] [--writable]
//   kc-keychain-probe read-serial SERIAL
//
// Prints the value (get), the item names (ls) or "ok"; on failure prints
// "error <case> <description>" and exits 2. `set` reads the value from standard input.
import Foundation
import KernelKeychain
import Keyrings

var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    let value = arguments[index + 1]
    arguments.removeSubrange(index...index + 1)
    return value
}
let group = option("--group"), owner = option("--from")
let writable = arguments.contains("--writable")
arguments.removeAll { $0 == "--writable" }

func fail(_ error: any Error) -> Never {
    let name = Mirror(reflecting: error).children.first?.label ?? "\(error)"
    print("error \(name) \(error)")
    exit(2)
}

do {
    switch arguments.first {
    case "read-serial":
        let serial = KeySerial(rawValue: Int32(arguments[1]) ?? 0)
        print(String(decoding: try serial.read(), as: UTF8.self))
    case "get":
        let keychain = try Keychain(service: arguments[1], accessGroup: group, owner: owner)
        guard let value = try keychain.string(forKey: arguments[2]) else { print("missing"); exit(1) }
        print(value)
    case "set":
        // A member's write keeps the owner's level (only the owner chooses one).
        var keychain = try Keychain(service: arguments[1], accessGroup: group, owner: owner, groupWritable: writable)
        if owner == nil { keychain.accessibility = .afterFirstUnlock }
        try keychain.set(Array(FileHandle.standardInput.readDataToEndOfFile()), forKey: arguments[2])
        print("ok")
    case "rm":
        let keychain = try Keychain(service: arguments[1], accessGroup: group, owner: owner)
        print(try keychain.remove(arguments[2]) ? "ok" : "missing")
    case "ls":
        let keychain = try Keychain(service: arguments[1], accessGroup: group, owner: owner)
        print(try keychain.allKeys().joined(separator: " "))
    default:
        print("usage: kc-keychain-probe get|set|rm|ls SERVICE [KEY] [--group G] [--from USER] [--writable]")
        exit(64)
    }
} catch {
    fail(error)
}
