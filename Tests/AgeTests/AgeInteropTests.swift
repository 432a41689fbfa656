import Foundation
import XCTest
import Age

/// kc's age files and Debian's `age` (1.1.1) read each other's: X25519 both ways,
/// and passphrase files both ways, with `age`'s prompts answered through a pty.
final class AgeInteropTests: XCTestCase {
    static let sizes = [0, 1, 65536, 200_000]
    var folder: TemporaryFolder!

    override func setUpWithError() throws {
        folder = try TemporaryFolder(purpose: "interop")
    }

    override func tearDown() {
        folder?.remove()
    }

    func testAgeDecryptsWhatKcEncryptsToAnIdentity() throws {
        let age = try Self.ageCommand()
        let identity = AgeX25519Identity.generate()
        let other = AgeX25519Identity.generate()
        let identityFile = folder.path("identity.txt")
        try Self.write(Array("# kc test identity\n\(identity.encoded)\n".utf8), to: identityFile)
        for size in Self.sizes {
            let plaintext = Self.randomBytes(count: size)
            let encrypted = folder.path("kc-\(size).age")
            try Self.write(try Age.encrypt(plaintext, to: [other.recipient, identity.recipient]), to: encrypted)
            let result = try runProgram(age, ["-d", "-i", identityFile, encrypted])
            XCTAssertEqual(result.status, 0, "size \(size): \(result.standardError)")
            XCTAssertEqual(result.standardOutput, plaintext, "size \(size)")
        }
    }

    func testKcDecryptsWhatAgeEncryptsToAnAgeKeygenIdentity() throws {
        let age = try Self.ageCommand()
        let keygen = try XCTUnwrap(executable("/usr/bin/age-keygen"), "age-keygen is missing")
        let keyFile = folder.path("key.txt")
        let generated = try runProgram(keygen, ["-o", keyFile])
        XCTAssertEqual(generated.status, 0, generated.standardError)
        let identities = try Age.identities(inIdentityFile: [UInt8](Data(contentsOf: URL(fileURLWithPath: keyFile))))
        XCTAssertEqual(identities.count, 1)
        // age-keygen prints the recipient as "Public key: age1…" on standard error.
        XCTAssertTrue(generated.standardError.contains(identities[0].recipient.encoded), generated.standardError)

        for size in Self.sizes {
            let plaintext = Self.randomBytes(count: size)
            let plaintextFile = folder.path("plain-\(size)")
            let encrypted = folder.path("age-\(size).age")
            try Self.write(plaintext, to: plaintextFile)
            let result = try runProgram(age, ["-r", identities[0].recipient.encoded, "-o", encrypted, plaintextFile])
            XCTAssertEqual(result.status, 0, result.standardError)
            let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: encrypted)))
            XCTAssertEqual(try Age.decrypt(file, identities: identities), plaintext, "size \(size)")
        }
    }

    func testAgeDecryptsKcsPassphraseFileWithThePassphraseTypedAtItsPrompt() throws {
        let age = try Self.ageCommand()
        let passphrase = "kc interop: correct horse 42"
        let plaintext = Self.randomBytes(count: 70000)
        let encrypted = folder.path("kc-passphrase.age")
        let output = folder.path("kc-passphrase.out")
        try Self.write(try Age.encrypt(plaintext, passphrase: Array(passphrase.utf8), logN: 16), to: encrypted)
        let result = try runAtTerminal([age, "-d", "-o", output, encrypted], answering: passphrase)
        XCTAssertEqual(result.status, 0, result.standardError)
        XCTAssertEqual(try [UInt8](Data(contentsOf: URL(fileURLWithPath: output))), plaintext)
    }

    func testKcDecryptsAgesPassphraseFile() throws {
        let age = try Self.ageCommand()
        let passphrase = "kc interop: battery staple 7"
        let plaintext = Self.randomBytes(count: 70000)
        let plaintextFile = folder.path("age-passphrase.in")
        let encrypted = folder.path("age-passphrase.age")
        try Self.write(plaintext, to: plaintextFile)
        let result = try runAtTerminal([age, "-p", "-o", encrypted, plaintextFile], answering: passphrase)
        XCTAssertEqual(result.status, 0, result.standardError)
        let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: encrypted)))
        XCTAssertEqual(try Age.scryptWorkFactor(of: file), 18, "age -p's default work factor")
        XCTAssertEqual(try Age.decrypt(file, passphrase: Array(passphrase.utf8)), plaintext)
        XCTAssertThrowsError(try Age.decrypt(file, passphrase: Array("not it".utf8))) { error in
            XCTAssertEqual(error as? AgeError, .noMatchingIdentity)
        }
    }

    // MARK: Helpers

    static func ageCommand() throws -> String {
        guard let age = executable("/usr/bin/age") else {
            throw XCTSkip("Debian's age is not installed (/usr/bin/age); Tools/install-deps.sh installs it")
        }
        return age
    }

    /// Runs `command` on a new pty (age reads passphrases from its terminal, never
    /// from standard input), typing `passphrase` and Enter at each passphrase prompt.
    /// The passphrase reaches the helper through its environment, not its arguments.
    func runAtTerminal(_ command: [String], answering passphrase: String) throws -> ProgramResult {
        guard let python = executable("/usr/bin/python3", "/usr/local/bin/python3") else {
            throw XCTSkip("python3 is needed to drive age's passphrase prompt through a pty")
        }
        let script = folder.path("answer-prompts.py")
        try Self.write(Array(Self.promptAnswerer.utf8), to: script)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script] + command
        process.environment = ["KC_TEST_PASSPHRASE": passphrase, "PATH": "/usr/bin:/bin", "TERM": "dumb"]
        let standardError = Pipe()
        process.standardError = standardError
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errors = Collector(standardError.fileHandleForReading)
        process.waitUntilExit()
        return ProgramResult(
            status: process.terminationStatus, standardOutput: [],
            standardError: String(decoding: errors.wait(), as: UTF8.self)
        )
    }

    /// Forks the command onto a pty, answers every "passphrase" prompt once, relays
    /// what the terminal showed to standard error, and exits with the command's status.
    static let promptAnswerer = #"""
    import os, pty, select, signal, sys, time
    answer = os.environ["KC_TEST_PASSPHRASE"].encode() + b"\n"
    pid, terminal = pty.fork()
    if pid == 0:
        os.execv(sys.argv[1], sys.argv[1:])
    shown, answered, deadline = b"", 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([terminal], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(terminal, 4096)
        except OSError:  # EIO: the command exited and closed the terminal
            break
        if not data:
            break
        shown += data
        while answered < shown.count(b"passphrase"):
            os.write(terminal, answer)
            answered += 1
    else:
        os.kill(pid, signal.SIGKILL)
        sys.stderr.write("timed out\n")
    _, status = os.waitpid(pid, 0)
    sys.stderr.write(shown.replace(answer.rstrip(b"\n"), b"<passphrase>").decode(errors="replace"))
    sys.exit(os.waitstatus_to_exitcode(status))
    """#

    static func write(_ bytes: [UInt8], to path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    static func randomBytes(count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in generator.next() }
    }
}
