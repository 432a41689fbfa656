// usage:
//   keychain-bench read SERVICE KEY ITERATIONS   -> nanoseconds per Keychain read
//   keychain-bench populate PREFIX COUNT         -> COUNT services PREFIX.0 ... with one item each
//   keychain-bench fill SERVICE COUNT            -> COUNT items in one service
//   keychain-bench clear PREFIX COUNT            -> removes what populate made
//   keychain-bench soak SERVICE WORKER SECONDS   -> the library side of Tools/soak
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

/// The same self-describing values as Tools/soak/soak.sh: v:<writer>:<seq>:<fill>.
func soakValue(_ writer: String, _ seq: Int) -> String {
    let character = Character(Unicode.Scalar(UInt8(97 + seq % 26)))
    return "v:\(writer):\(seq):" + String(repeating: character, count: seq % 50 + 1)
}

func soakValid(_ value: String) -> Bool {
    let parts = value.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
    guard parts.count == 4, parts[0] == "v", let seq = Int(parts[2]) else { return false }
    return value == soakValue(String(parts[1]), seq)
}

func soak(service: String, worker: String, seconds: UInt64) throws {
    let keychain = try Keychain(service: service)
    let deadline = now() + seconds * 1_000_000_000
    var seq = 0, operations = 0, bad = 0
    var own: String? = nil
    while now() < deadline {
        seq += 1
        operations += 1
        switch Int.random(in: 0..<6) {
        case 5: _ = try keychain.remove("shared-\(Int.random(in: 0..<4))")
        case 0, 1: try keychain.set(soakValue(worker, seq), forKey: "shared-\(Int.random(in: 0..<4))")
        case 2:
            if let value = try keychain.string(forKey: "shared-\(Int.random(in: 0..<4))"), !soakValid(value) { bad += 1 }
        case 3:
            try keychain.set(soakValue(worker, seq), forKey: "own-\(worker)")
            own = soakValue(worker, seq)
        default:
            if let own, try keychain.string(forKey: "own-\(worker)") != own { bad += 1 }
        }
    }
    if let own, try keychain.string(forKey: "own-\(worker)") != own { bad += 1 }
    print("\(worker): \(operations) operations" + (bad > 0 ? " BAD \(bad)" : ""))
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
    case "soak":
        guard let seconds = UInt64(arguments[4]) else { fail("seconds") }
        try soak(service: arguments[2], worker: arguments[3], seconds: seconds)
    default:
        fail("unknown command \(arguments[1])")
    }
} catch {
    fail("\(error)")
}
