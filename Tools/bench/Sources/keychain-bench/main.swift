// usage:
//   keychain-bench read SERVICE KEY ITERATIONS   -> nanoseconds per Keychain read
//   keychain-bench populate PREFIX COUNT         -> COUNT services PREFIX.0 ... with one item each
//   keychain-bench fill SERVICE COUNT            -> COUNT items in one service
//   keychain-bench clear PREFIX COUNT            -> removes what populate made
import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func fail(_ message: String) -> Never {
    var line = "keychain-bench: \(message)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 4 || arguments.count == 5 else { fail("see the usage in main.swift") }
do {
    switch arguments[1] {
    case "read":
        guard let iterations = Int(arguments[4]) else { fail("iterations") }
        let keychain = try Keychain(service: arguments[2])
        var total = 0
        let start = now()
        for _ in 0..<iterations {
            guard let count = try keychain.withBytes(forKey: arguments[3], { $0.count }) else { fail("no such item") }
            total &+= count
        }
        let elapsed = now() - start
        print(elapsed / UInt64(iterations))
        if total == 0 { fail("empty reads") }
    case "populate", "clear":
        guard let count = Int(arguments[3]) else { fail("count") }
        for index in 0..<count {
            let keychain = try Keychain(service: "\(arguments[2]).\(index)")
            if arguments[1] == "populate" { try keychain.set("v", forKey: "item") } else { try keychain.removeAll() }
        }
    case "fill":
        guard let count = Int(arguments[3]) else { fail("count") }
        let keychain = try Keychain(service: arguments[2])
        for index in 0..<count { try keychain.set("value-\(index)", forKey: "item-\(index)") }
    default:
        fail("unknown command \(arguments[1])")
    }
} catch {
    fail("\(error)")
}
