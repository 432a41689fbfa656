import KCSecretService
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// kc-secretd: the Secret Service (org.freedesktop.secrets) over kc's keychain. D-Bus
// starts it on a client's first call (its service file names this program), or a
// systemd user unit does; it serves until the session bus goes away.
let usage = """
usage: kc-secretd [--no-audit] [--verbose]
       kc-secretd status

Serves the Secret Service (org.freedesktop.secrets) on the session bus: secret-tool,
libsecret, python keyring and other clients keep their secrets in kc. Items are kc items
(kc get SERVICE ITEM reads them); attributes and labels are kept in the vault.

  --no-audit   do not log each secret read (pid, uid, executable) to the journal or syslog
  --verbose    log every refused call on standard error
  status       say who owns org.freedesktop.secrets and whether it answers

"""

func fail(_ message: String) -> Never {
    var line = Array(("kc-secretd: " + message + "\n").utf8)
    _ = write(2, &line, line.count)
    exit(64)
}

var options = SecretDaemon.Options()
var arguments = CommandLine.arguments.dropFirst()
if arguments.first == "status" {
    guard arguments.count == 1 else { fail("status takes no arguments") }
    let (status, text) = SecretDaemon.status()
    print(text)
    exit(status)
}
for argument in arguments {
    switch argument {
    case "--no-audit": options.audit = false
    case "--verbose": options.verbose = true
    case "-h", "--help":
        print(usage, terminator: "")
        exit(0)
    default: fail("unknown argument '\(argument)'; see kc-secretd --help")
    }
}
exit(SecretDaemon.run(options))
