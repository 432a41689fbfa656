import KCAgent
import KernelKeychain
import Keyrings
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// kc-agent: kc as OpenBao's agent. Secrets from the cluster land in kernel keyrings
// (never on disk), where `cat ~/kc/SERVICE/KEY`, `kc get`, `kc exec`, podman and the
// Secret Service read them. `kc agent ...` runs this program.
let usage = """
usage: kc-agent run CONFIG      keep kc in step with OpenBao until stopped
       kc-agent sync CONFIG     one turn: log in, mirror every secret once, then exit
       kc-agent check CONFIG    read CONFIG and print what it syncs, without contacting OpenBao

CONFIG is a JSON file (man kc-agent):
  {"address": "https://bao.example:8200", "ca_file": "/etc/kc/bao-ca.pem",
   "auth": {"method": "approle", "service": "openbao"},
   "kv": [{"secret": "secret/app", "service": "com.app"}]}
AppRole's role id and secret id are kc items: kc set openbao role_id; kc set openbao secret_id.
Exit status of sync: 0 when every secret was mirrored, 1 when one was not, 64 for bad usage.

"""

func fail(_ message: String, status: Int32 = 64) -> Never {
    var line = Array(("kc-agent: " + message + "\n").utf8)
    _ = write(2, &line, line.count)
    exit(status)
}

/// One line on standard error. Key names and a server's messages come from outside:
/// a control character in them is shown as \xNN, so none can forge a line of the log
/// or move a terminal's cursor.
func logLine(_ message: String) {
    var line = Array("kc-agent: ".utf8)
    for byte in message.utf8 {
        if byte < 0x20 || byte == 0x7f {
            let hex = Array("0123456789abcdef".utf8)
            line += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
        } else {
            line.append(byte)
        }
    }
    line.append(UInt8(ascii: "\n"))
    _ = write(2, &line, line.count)
}

/// Secrets and the token pass through this process: no core file, no crash report
/// printing memory, no ptrace or /proc/PID/mem by the user's other processes.
func guardSecrets() {
    var limit = rlimit(rlim_cur: 0, rlim_max: 0)
    _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
    try? disableDumping()
    try? disableCrashReports()
}

/// Plain HTTP trusts every local user: while OpenBao is down or restarting, any of them
/// may listen on its port and be sent the token, then the AppRole's ids.
func warnAboutPlainHTTP() {
    for address in configuration.addresses where address.lowercased().hasPrefix("http://") {
        logLine("\(address) is plain HTTP: the token and the secrets cross it unencrypted, and while OpenBao is down any local user listening on its port is sent the token; use https with \"ca_file\"")
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.isEmpty || arguments.contains("--help") || arguments.contains("-h") || arguments == ["help"] {
    print(usage, terminator: "")
    exit(arguments.isEmpty ? 64 : 0)
}
guard ["run", "sync", "check"].contains(arguments[0]) else {
    fail("unknown command '\(arguments[0])': use run, sync or check (kc-agent --help)")
}
guard arguments.count == 2 else { fail("\(arguments[0]) takes one argument, the configuration file (kc-agent --help)") }

let configuration: AgentConfiguration
do {
    configuration = try AgentConfiguration.load(path: arguments[1])
} catch {
    fail("\(arguments[1]): \(error)", status: 78)
}

switch arguments[0] {
case "check":
    print("OpenBao: \(configuration.addresses.joined(separator: ", "))\(configuration.tls.caFile.map { " (CA \($0))" } ?? "")")
    switch configuration.auth {
    case .appRole(let mount, let service, let level):
        print("auth: AppRole at auth/\(mount), role_id and secret_id from kc service \(service); token kept there at \(level.name)")
    case .token(let service, _):
        print("auth: the token stored in kc as \(service)/token")
    }
    for mapping in configuration.kv {
        print("kv: \(mapping.secret) -> service \(mapping.service) at \(mapping.level.name), polled every \(configuration.pollInterval)")
    }
    for mapping in configuration.leases {
        print("lease: \(mapping.method) \(mapping.path) -> service \(mapping.service) at \(mapping.level.name), until the lease ends")
    }
case "sync":
    guardSecrets()
    warnAboutPlainHTTP()
    exit(Agent(configuration: configuration, log: logLine).run(once: true))
default:
    guardSecrets()
    warnAboutPlainHTTP()
    logLine("syncing \(configuration.kv.count) KV secret\(configuration.kv.count == 1 ? "" : "s") and \(configuration.leases.count) lease\(configuration.leases.count == 1 ? "" : "s") from \(configuration.addresses.joined(separator: ", "))")
    exit(Agent(configuration: configuration, log: logLine).run(once: false))
}
