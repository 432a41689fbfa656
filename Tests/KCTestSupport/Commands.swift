import Foundation

/// What a child process did.
public struct CommandResult: CustomStringConvertible {
    public var status: Int32
    public var standardOutput: [UInt8]
    public var standardError: String

    public var output: String { String(decoding: standardOutput, as: UTF8.self) }

    public var description: String {
        "status \(status), stdout \(output.debugDescription), stderr \(standardError.debugDescription)"
    }
}

/// Runs a program with `input` on standard input and collects both outputs.
@discardableResult
public func runCommand(_ executable: String, _ arguments: [String], input: [UInt8] = [],
                       environment: [String: String]? = nil) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    try process.run()
    // Write and read on separate threads so a large value cannot deadlock the pipes.
    let writer = Thread {
        // A program may exit before it reads its input (kc refuses a bad name first):
        // the write then fails with EPIPE. SIGPIPE is blocked in this thread only, so
        // it cannot end the test process, and the programs it starts keep the default.
        var broken = sigset_t()
        sigemptyset(&broken)
        sigaddset(&broken, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &broken, nil)
        if !input.isEmpty { try? stdin.fileHandleForWriting.write(contentsOf: Data(input)) }
        try? stdin.fileHandleForWriting.close()
    }
    writer.start()
    let errorData = LockedData()
    let errorReader = Thread { errorData.set(stderr.fileHandleForReading.readDataToEndOfFile()) }
    errorReader.start()
    let outputData = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while !errorData.isSet { usleep(1000) }
    return CommandResult(status: process.terminationStatus, standardOutput: Array(outputData),
                         standardError: String(decoding: errorData.value, as: UTF8.self))
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    func set(_ value: Data) { lock.withLock { data = value } }
    var isSet: Bool { lock.withLock { data != nil } }
    var value: Data { lock.withLock { data ?? Data() } }
}

/// Runs a shell script (`sh -c`), for steps that must share one session or run at once.
@discardableResult
public func runShell(_ script: String, input: [UInt8] = []) throws -> CommandResult {
    try runCommand("/bin/sh", ["-c", script], input: input)
}

/// The `kc` built next to this test bundle.
public var builtKC: String {
    runsThroughTheFront ? builtFolder + "/kc-front" : builtFullKC
}

/// The full kc SwiftPM built, whatever `KC_TEST_THROUGH_FRONT` says: what FrontTests
/// hold the front to.
public var builtFullKC: String { builtFolder + "/kc" }

/// The folder of the built executables (and of the front Tools/build-front.sh builds).
public var builtFolder: String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().path
}

/// With `KC_TEST_THROUGH_FRONT=1` (Tools/test.sh's pass through the front), the suites
/// run kc as it is installed: `builtKC` is the front, which runs the full kc beside it
/// (`kc-full`) for what it does not serve itself. Only where the front was built.
public var runsThroughTheFront: Bool {
    ProcessInfo.processInfo.environment["KC_TEST_THROUGH_FRONT"] == "1"
        && FileManager.default.isExecutableFile(atPath: builtFolder + "/kc-front")
}

/// Runs the built `kc`.
@discardableResult
public func kc(_ arguments: String..., input: [UInt8] = []) throws -> CommandResult {
    try runCommand(builtKC, arguments, input: input)
}

public func kc(_ arguments: [String], input: [UInt8] = []) throws -> CommandResult {
    try runCommand(builtKC, arguments, input: input)
}

/// Whether a program is on PATH.
public func programExists(_ name: String) -> Bool {
    (try? runShell("command -v \(name)"))?.status == 0
}

/// Runs the real `keyctl` from keyutils.
@discardableResult
public func keyctl(_ arguments: String..., input: [UInt8] = []) throws -> CommandResult {
    try runCommand("/usr/bin/env", ["keyctl"] + arguments, input: input)
}

/// The serial `keyctl search` finds, or nil.
public func keyctlSearch(_ keyring: String, _ type: String, _ description: String) -> String? {
    guard let result = try? keyctl("search", keyring, type, description), result.status == 0 else { return nil }
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
}
