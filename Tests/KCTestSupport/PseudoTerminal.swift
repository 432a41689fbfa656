import Foundation
import XCTest

/// Runs a program on a real pseudo-terminal (python3's pty module) and answers its
/// prompts in order: for each `(prompt, reply)`, it reads until `prompt` appears in what
/// the program printed since the last answer, then types `reply` and a newline. The
/// result's output is everything the program printed on the terminal; its status is
/// the program's. Gives up after 30 s.
public enum PseudoTerminal {
    public static func run(_ executable: String, _ arguments: [String], answers: [(prompt: String, reply: String)] = [],
                           translateNewlines: Bool = true, environment: [String: String]? = nil) throws -> CommandResult {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw XCTSkip("python3 is needed to drive a pseudo-terminal")
        }
        // argv: ONLCR (0/1), the number of answers, the prompt/reply pairs, the program.
        let driver = """
            import os, pty, select, sys, termios, time
            onlcr, count = sys.argv[1] == "1", int(sys.argv[2])
            answers = [(sys.argv[3 + 2 * i].encode(), sys.argv[4 + 2 * i].encode()) for i in range(count)]
            program = sys.argv[3 + 2 * count:]
            pid, fd = pty.fork()
            if pid == 0:
                if not onlcr:
                    attributes = termios.tcgetattr(0)
                    attributes[1] &= ~termios.ONLCR
                    termios.tcsetattr(0, termios.TCSANOW, attributes)
                os.execv(program[0], program)
            out, since, deadline = b"", b"", time.time() + 30
            while time.time() < deadline:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if not ready:
                    continue
                try:
                    chunk = os.read(fd, 1024)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
                since += chunk
                if answers and answers[0][0] in since:
                    os.write(fd, answers.pop(0)[1] + b"\\n")
                    since = b""
            _, status = os.waitpid(pid, 0)
            sys.stdout.buffer.write(out)
            if answers:
                sys.stderr.write("the program never asked %r\\n" % answers[0][0])
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        var argv = ["-c", driver, translateNewlines ? "1" : "0", String(answers.count)]
        for answer in answers { argv += [answer.prompt, answer.reply] }
        return try runCommand("/usr/bin/python3", argv + [executable] + arguments, environment: environment)
    }
}
