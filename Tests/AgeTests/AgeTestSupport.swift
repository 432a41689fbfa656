import Foundation
import XCTest

/// A folder under /tmp named kc-test-age-<pid>-<purpose>-<random>, removed by `remove()`.
struct TemporaryFolder {
    let url: URL

    init(purpose: String) throws {
        let name = "kc-test-age-\(getpid())-\(purpose)-\(UInt32.random(in: 0...UInt32.max))"
        url = URL(fileURLWithPath: "/tmp").appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// What a finished program printed and how it exited.
struct ProgramResult {
    var status: Int32
    var standardOutput: [UInt8]
    var standardError: String
}

/// Runs `executable` with `arguments` and standard input from `input`, to completion.
/// Output is drained while the program runs, so a large output cannot block it.
func runProgram(_ executable: String, _ arguments: [String], input: [UInt8] = []) throws -> ProgramResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let standardInput = Pipe()
    let standardOutput = Pipe()
    let standardError = Pipe()
    process.standardInput = standardInput
    process.standardOutput = standardOutput
    process.standardError = standardError
    try process.run()
    let outputReader = Collector(standardOutput.fileHandleForReading)
    let errorReader = Collector(standardError.fileHandleForReading)
    if !input.isEmpty { standardInput.fileHandleForWriting.write(Data(input)) }
    try standardInput.fileHandleForWriting.close()
    process.waitUntilExit()
    return ProgramResult(
        status: process.terminationStatus,
        standardOutput: [UInt8](outputReader.wait()),
        standardError: String(decoding: errorReader.wait(), as: UTF8.self)
    )
}

/// The first of `candidates` that is an executable file.
func executable(_ candidates: String...) -> String? {
    candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// Reads a file handle to its end on a thread of its own.
final class Collector: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data = Data()

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}
