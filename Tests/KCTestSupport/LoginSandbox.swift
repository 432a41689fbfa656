import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A machine of the test's own to log in to: users, PAM stacks and, if asked, a real
/// OpenSSH server on 127.0.0.1, with Debian's PAM configuration and kc's pam-auth-update
/// profile switched on, for tests that log in as a user would.
///
/// Nothing outside the sandbox changes. It is a mount and a PID namespace (`unshare`)
/// whose first process is sshd (or a placeholder), where every process sees: `/etc` as
/// an overlay whose writes (`useradd`, `passwd`) stay in the namespace; `/etc/pam.d`
/// a copy with kc's lines (`pam_kc.so` as Tools/build-pam.sh built it, running the
/// suite's root-owned kc copy), to which tests add services (``writePAMService(_:_:)``);
/// `/etc/nsswitch.conf` with `files extrausers`, over a copy of `/var/lib/extrausers`;
/// `/dev/log` a socket the test reads (``drainLog()``); `/run/sshd`, `/run/utmp` and the
/// login records in `/var/log` of their own. Ending the namespace's first process ends
/// every process in it, so a test that fails, even one that dies, leaves none behind.
/// Root only; ``init(budget:sshd:)`` throws XCTSkip (with the reason) where it cannot run.
public final class LoginSandbox {
    /// A user the server knows: made in the namespace's `/etc/passwd`, or only in the
    /// extrausers files (then no `files` lookup finds it), with a home of its own.
    public struct Account {
        public let name: String
        public let uid: UInt32
        public let gid: UInt32
        public let home: String
        public var password: String
    }

    public enum Method: String {
        case password
        case keyboardInteractive = "keyboard-interactive"
    }

    public let folder: String
    public let port: Int
    /// The kc the PAM lines run, and the tests run as the users: root's, 0755.
    public let kc: String
    /// pam_kc.so as built from PAM/pam_kc.c.
    public let module: String
    private let log: SyslogCollector
    private let namespace: SpawnedProcess
    /// The namespace's first process (sshd), by its pid outside the namespace.
    public let serverPID: pid_t
    private let namespaceIdentity: String
    private var accounts: [Account] = []
    private var beforeStop: [() -> Void] = []
    private var stopped = false
    private var drained = 0

    nonisolated(unsafe) private static var counter = 0

    /// The repository (this file is Tests/KCTestSupport/LoginSandbox.swift).
    public static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// Makes the sandbox. `budget`: pam_kc's `budget=` option in the common-* files
    /// (seconds), none for its default. `sshd`: whether a real sshd listens (``ssh(_:_:method:password:)``).
    public init(budget: Double? = nil, sshd: Bool = true) throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: PAM, users, sshd and mount namespaces") }
        let sshPrograms = sshd ? ["/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen", "/usr/bin/sshpass"] : []
        for program in sshPrograms + ["/usr/bin/unshare", "/usr/bin/nsenter", "/usr/bin/setpriv", "/usr/sbin/pam-auth-update",
                                      "/usr/sbin/useradd", "/usr/bin/pamtester"]
        where !FileManager.default.isExecutableFile(atPath: program) {
            throw XCTSkip("\(program) is not installed (Tools/install-deps.sh --tests installs openssh-server, sshpass, pamtester and the rest)")
        }
        module = try Self.builtModule()
        kc = UnprivilegedUser.kcCopy
        Self.counter += 1
        let folder = "/tmp/kc-test-ssh-\(Self.counter)-\(getpid())"
        self.folder = folder
        _ = try? runCommand("/bin/rm", ["-rf", folder])
        guard mkdir(folder, 0o755) == 0 else { throw XCTSkip("cannot make \(folder): \(String(cString: strerror(errno)))") }
        var started: SpawnedProcess?
        var collector: SyslogCollector?
        do {
            try Self.writePAMConfiguration(into: folder, module: module, kc: kc, budget: budget, sshd: sshd)
            try Self.writeNameService(into: folder)
            let port = sshd ? try Self.freePort() : 0
            self.port = port
            if sshd { try Self.writeServerConfiguration(into: folder, port: port) }
            let log = try SyslogCollector(address: folder + "/log.sock")
            collector = log
            self.log = log
            try Self.namespaceScript.write(toFile: folder + "/namespace.sh", atomically: true, encoding: .utf8)
            // setpriv's parent-death signal and unshare's --kill-child: if this process
            // dies, unshare dies, and with it the namespace's first process and so every
            // process in the namespace.
            let process = try SpawnedProcess("/usr/bin/setpriv", [
                "--pdeathsig", "KILL", "/usr/bin/unshare", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL",
                "--propagation", "private", "/bin/sh", folder + "/namespace.sh", folder,
            ])
            started = process
            namespace = process
            let ready = Self.waitFor(seconds: 15) { readWholeFile(folder + "/namespace.ready") != nil || !process.isRunning }
            guard ready, process.isRunning, let first = Self.firstChild(of: process.pid) else {
                let why = (readWholeFile(folder + "/namespace.log") ?? "") + (process.isRunning ? "" : process.wait().standardError)
                throw XCTSkip("cannot make the sandbox's private mount and PID namespaces here: \(why)")
            }
            serverPID = first
            namespaceIdentity = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(first)/ns/pid")) ?? ""
            let listening = Self.waitFor(seconds: 15) {
                !sshd || (readWholeFile(folder + "/sshd.log") ?? "").contains("Server listening on 127.0.0.1 port \(port)") || !process.isRunning
            }
            guard listening, process.isRunning else {
                throw NSError(domain: "LoginSandbox", code: 1, userInfo: [NSLocalizedDescriptionKey:
                    "sshd did not start: \(readWholeFile(folder + "/sshd.log") ?? "") \(readWholeFile(folder + "/namespace.log") ?? "")"])
            }
        } catch {
            if let started {
                kill(started.pid, SIGKILL)
                _ = started.wait()
            }
            collector?.close()
            _ = try? runCommand("/bin/rm", ["-rf", folder])
            throw error
        }
    }

    deinit { stop() }

    // MARK: Setting up

    /// pam_kc.so as Tools/build-pam.sh builds it (Tools/test.sh does, first).
    public static func builtModule() throws -> String {
        let module = repository + "/.build/pam/pam_kc.so"
        if !FileManager.default.fileExists(atPath: module) {
            let built = try runCommand("/bin/bash", [repository + "/Tools/build-pam.sh"])
            guard built.status == 0 else { throw XCTSkip("the PAM module could not be built: \(built)") }
        }
        return module
    }

    /// This machine's pam-configs profiles and the common-* files made from them, with
    /// kc's profile added, copied into `root`; then `pam-auth-update --root ROOT` run
    /// there with `arguments` (none: the copy as it is).
    public static func debianPAMRoot(_ root: String, _ arguments: [String]) throws {
        let copied = try runShell("""
            set -e
            mkdir -p '\(root)/usr/share/pam-configs' '\(root)/etc/pam.d' '\(root)/var/lib/pam'
            cp /usr/share/pam-configs/* '\(root)/usr/share/pam-configs/'
            cp '\(repository)/PAM/kc' '\(root)/usr/share/pam-configs/kc'
            cp /etc/pam.d/common-* '\(root)/etc/pam.d/'
            cp -a /var/lib/pam/. '\(root)/var/lib/pam/'
            """)
        guard copied.status == 0 else { throw XCTSkip("cannot copy this machine's PAM configuration: \(copied)") }
        if !arguments.isEmpty {
            let update = try runCommand("/usr/sbin/pam-auth-update", ["--root", root] + arguments,
                                        environment: ["DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"])
            guard update.status == 0 else {
                throw NSError(domain: "LoginSandbox", code: 2, userInfo: [NSLocalizedDescriptionKey: "pam-auth-update \(arguments): \(update)"])
            }
        }
    }

    /// `folder/pam.d`: a copy of /etc/pam.d (sshd's own file, pam_keyinit in it, included)
    /// whose common-* files are pam-auth-update's with kc's profile enabled, the profile's
    /// `pam_kc.so` standing for the built module running `kc`.
    private static func writePAMConfiguration(into folder: String, module: String, kc: String, budget: Double?, sshd: Bool) throws {
        // pam-auth-update takes most of a second: once per test process.
        let root = "/tmp/kc-test-ssh-pam-\(getpid())"
        if !FileManager.default.fileExists(atPath: root + "/etc/pam.d/common-auth") {
            _ = try? runCommand("/bin/rm", ["-rf", root])
            try debianPAMRoot(root, ["--enable", "kc"])
        }
        let copied = try runShell("mkdir -p '\(folder)/pam.d' && cp -a /etc/pam.d/. '\(folder)/pam.d/'")
        guard copied.status == 0 else { throw XCTSkip("cannot copy /etc/pam.d: \(copied)") }
        guard !sshd || FileManager.default.fileExists(atPath: folder + "/pam.d/sshd") else { throw XCTSkip("no /etc/pam.d/sshd (openssh-server's)") }
        let options = "kc=\(kc)" + (budget.map { " budget=\($0)" } ?? "")
        for name in try FileManager.default.contentsOfDirectory(atPath: root + "/etc/pam.d") where name.hasPrefix("common-") {
            let text = (readWholeFile(root + "/etc/pam.d/" + name) ?? "").replacingOccurrences(of: "pam_kc.so", with: "\(module) \(options)")
            try text.write(toFile: folder + "/pam.d/" + name, atomically: true, encoding: .utf8)
        }
    }

    /// nsswitch.conf with `files extrausers` for users, groups and shadow entries, and
    /// a copy of /var/lib/extrausers to add users to.
    private static func writeNameService(into folder: String) throws {
        let lines = (readWholeFile("/etc/nsswitch.conf") ?? "hosts: files\n").split(separator: "\n", omittingEmptySubsequences: false).map { line in
            for database in ["passwd", "group", "shadow"] where line.hasPrefix(database + ":") { return "\(database): files extrausers" }
            return String(line)
        }
        try lines.joined(separator: "\n").write(toFile: folder + "/nsswitch.conf", atomically: true, encoding: .utf8)
        let extrausers = folder + "/extrausers"
        guard mkdir(extrausers, 0o755) == 0 else { throw XCTSkip("mkdir \(extrausers)") }
        for database in ["passwd", "group", "shadow"] {
            let text = readWholeFile("/var/lib/extrausers/" + database) ?? ""
            guard FileManager.default.createFile(atPath: extrausers + "/" + database, contents: Data(text.utf8),
                                                 attributes: [.posixPermissions: database == "shadow" ? 0o600 : 0o644]) else {
                throw XCTSkip("cannot write \(extrausers)/\(database)")
            }
        }
    }

    private static func writeServerConfiguration(into folder: String, port: Int) throws {
        let key = try runCommand("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "kc-test", "-f", folder + "/host_ed25519_key"])
        guard key.status == 0 else { throw XCTSkip("ssh-keygen: \(key)") }
        try """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(folder)/host_ed25519_key
            UsePAM yes
            PasswordAuthentication yes
            KbdInteractiveAuthentication yes
            PubkeyAuthentication no
            AuthorizedKeysFile none
            PermitRootLogin no
            PermitUserEnvironment no
            PidFile none
            PrintMotd no
            PrintLastLog no
            LogLevel VERBOSE

            """.write(toFile: folder + "/sshd_config", atomically: true, encoding: .utf8)
    }

    /// Run by `unshare` in the new namespaces with the folder as $1; execs sshd (or, without
    /// its configuration, a sleep that holds the namespaces). /run and
    /// /dev become a tmpfs holding the original entries (bound, or copied: regular files),
    /// so /run/sshd, /run/utmp and /dev/log can be the namespace's own; /dev/ptmx is the
    /// devpts one (a bound /dev/ptmx finds no pts beside it, and sshd -tt needs a pty).
    private static let namespaceScript = #"""
        #!/bin/sh
        set -eu
        folder=$1
        exec 2>"$folder/namespace.log"
        mkdir -p "$folder/etc-changes" "$folder/run-original" "$folder/dev-original"
        # The overlay's changes on a tmpfs of the namespace's own: it goes with it, and an
        # overlay cannot keep its changes on another overlay (a container's /tmp).
        mount -t tmpfs -o mode=700 tmpfs "$folder/etc-changes"
        mkdir "$folder/etc-changes/upper" "$folder/etc-changes/work"
        mount -t overlay overlay -o "lowerdir=/etc,upperdir=$folder/etc-changes/upper,workdir=$folder/etc-changes/work" /etc
        mount --bind "$folder/pam.d" /etc/pam.d
        cp "$folder/nsswitch.conf" /etc/nsswitch.conf
        if [ -d /var/lib/extrausers ]; then mount --bind "$folder/extrausers" /var/lib/extrausers; fi
        own_copy() {
            directory=$1; original=$2; shift 2
            mount --rbind "$directory" "$original"
            mount -t tmpfs -o mode=755 tmpfs "$directory"
            for entry in "$original"/* "$original"/.[!.]*; do
                [ -e "$entry" ] || [ -L "$entry" ] || continue
                name=${entry##*/}
                for skipped in "$@"; do [ "$name" = "$skipped" ] && continue 2; done
                if [ -L "$entry" ]; then cp -P "$entry" "$directory/$name"
                elif [ -d "$entry" ]; then mkdir -p "$directory/$name"; mount --rbind "$entry" "$directory/$name"
                elif [ -f "$entry" ]; then cp -p "$entry" "$directory/$name"
                else : > "$directory/$name"; mount --bind "$entry" "$directory/$name"; fi
            done
        }
        own_copy /run "$folder/run-original" sshd utmp nscd motd.dynamic
        own_copy /dev "$folder/dev-original" log ptmx
        ln -s pts/ptmx /dev/ptmx
        ln -s "$folder/log.sock" /dev/log
        mkdir -m 755 /run/sshd
        : > /run/utmp
        for record in wtmp btmp lastlog; do
            if [ -e "/var/log/$record" ]; then : > "$folder/$record"; mount --bind "$folder/$record" "/var/log/$record"; fi
        done
        if [ -d /sys/fs/fuse/connections ]; then mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null || true; fi
        echo ready > "$folder/namespace.ready"
        # sshd reaps every child it is left (a kc that outlived pam_kc's budget, say).
        if [ -e "$folder/sshd_config" ]; then exec /usr/sbin/sshd -D -f "$folder/sshd_config" -E "$folder/sshd.log"; fi
        exec sleep infinity
        """#

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw XCTSkip("no TCP socket here") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw XCTSkip("cannot bind a port on 127.0.0.1 here") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func firstChild(of pid: pid_t) -> pid_t? {
        for _ in 0..<100 {
            if let text = readWholeFile("/proc/\(pid)/task/\(pid)/children"),
               let child = text.split(separator: " ").first.flatMap({ pid_t($0) }) { return child }
            usleep(10_000)
        }
        return nil
    }

    @discardableResult
    static func waitFor(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    // MARK: Users

    /// A throwaway login password pam_unix's `obscure` accepts (no quote in it).
    public static func newPassword() -> String {
        "Pw-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(14)
    }

    /// A uid (and gid) no account of this machine has: far above UID_MAX, 64 per test
    /// process (4 for each of its servers), so two runs at once never share a user keyring.
    private func nextIdentity() -> UInt32 {
        2_000_000_000 + UInt32(getpid() % 1_000_000) * 64 + UInt32(Self.counter % 16) * 4 + UInt32(accounts.count % 4)
    }

    /// A home for `name`: /tmp/kc-test-ssh-LABEL-PID, the user's, mode 0700 (kc keeps a
    /// vault only in a folder of the user's own inside /tmp).
    private func makeHome(_ label: String, uid: UInt32, gid: UInt32) throws -> String {
        let home = "/tmp/kc-test-ssh-\(label)-\(Self.counter)-\(getpid())"
        _ = try? runCommand("/bin/rm", ["-rf", home])
        guard mkdir(home, 0o700) == 0, chown(home, uid, gid) == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(errno), userInfo: [NSLocalizedDescriptionKey: "mkdir \(home)"])
        }
        return home
    }

    /// A user in the namespace's /etc/passwd and /etc/shadow (useradd and chpasswd there),
    /// with a group of its own, /bin/sh and a fresh home.
    public func addLocalUser(_ label: String, password: String) throws -> Account {
        let id = nextIdentity()
        let name = "kc-ssh-\(label)-\(getpid())"
        let home = try makeHome(label, uid: id, gid: id)
        let made = try inside(["/bin/sh", "-c", "groupadd -g \(id) \(name) && useradd -M -N -g \(id) -u \(id) -d '\(home)' -s /bin/sh \(name) 2>/dev/null && chpasswd"],
                              input: Array("\(name):\(password)\n".utf8))
        guard made.status == 0 else { throw NSError(domain: "LoginSandbox", code: 3, userInfo: [NSLocalizedDescriptionKey: "useradd \(name): \(made)"]) }
        let account = Account(name: name, uid: id, gid: id, home: home, password: password)
        accounts.append(account)
        return account
    }

    /// A user only libnss-extrausers knows: lines in the namespace's
    /// /var/lib/extrausers/{passwd,group,shadow} (a SHA-512 crypt hash from openssl), none
    /// in /etc. XCTSkip where the name service does not find it (libnss-extrausers missing).
    public func addExtrausersUser(_ label: String, password: String) throws -> Account {
        let id = nextIdentity()
        let name = "kc-ssh-\(label)-\(getpid())"
        let home = try makeHome(label, uid: id, gid: id)
        let account = Account(name: name, uid: id, gid: id, home: home, password: password)
        accounts.append(account)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else { throw XCTSkip("openssl is needed to hash the password") }
        let hash = try runCommand("/usr/bin/openssl", ["passwd", "-6", "-stdin"], input: Array((password + "\n").utf8))
        guard hash.status == 0 else { throw XCTSkip("openssl passwd -6: \(hash)") }
        let days = Int(Date().timeIntervalSince1970 / 86_400)
        let entries = [("passwd", "\(name):x:\(id):\(id)::\(home):/bin/sh\n"), ("group", "\(name):x:\(id):\n"),
                       ("shadow", "\(name):\(hash.output.trimmingCharacters(in: .whitespacesAndNewlines)):\(days):0:99999:7:::\n")]
        for (database, line) in entries {
            guard let file = FileHandle(forWritingAtPath: folder + "/extrausers/" + database) else { throw XCTSkip("cannot write the extrausers copy") }
            file.seekToEndOfFile()
            file.write(Data(line.utf8))
            file.closeFile()
        }
        let found = try inside(["/usr/bin/getent", "passwd", name])
        guard found.status == 0 else {
            throw XCTSkip("the name service does not find a user in /var/lib/extrausers here (is libnss-extrausers installed?): \(found)")
        }
        return account
    }

    /// Runs `script` with sh as `account` in the namespace (setpriv, no PAM) in a fresh
    /// session keyring, with only HOME, USER, PATH and `$KC` (kc) in its environment.
    @discardableResult
    public func asUser(_ account: Account, _ script: String, input: [UInt8] = []) throws -> CommandResult {
        var result = try inside(["/usr/bin/setpriv", "--reuid=\(account.uid)", "--regid=\(account.gid)", "--init-groups",
                                 "/usr/bin/env", "-i", "HOME=\(account.home)", "USER=\(account.name)", "PATH=/usr/bin:/bin", "KC=\(kc)",
                                 "/usr/bin/keyctl", "session", "-", "/bin/sh", "-c", "cd; " + script], input: input)
        if result.standardError.hasPrefix("Joined session keyring: ") {
            result.standardError = String(result.standardError.drop { $0 != "\n" }.dropFirst())
        }
        return result
    }

    /// The account's vault, sealed with its login password (`kc vault init --work-factor
    /// 10` as the account), holding `session` (when-unlocked, value "session value") and
    /// `user` (after-first-unlock, "user value") in `service`; then its keys dropped as by
    /// a reboot: locked. What the commands printed (nothing when all went well).
    public func makeVault(_ account: Account, service: String) throws -> CommandResult {
        let made = try asUser(account, """
            "$KC" vault init --work-factor 10 2>/dev/null || echo "init failed"
            printf 'session value' | "$KC" set \(service) session || echo "set failed"
            printf 'user value' | "$KC" set --access after-first-unlock \(service) user || echo "set failed"
            """, input: Array(account.password.utf8))
        simulateReboot(account)
        return made
    }

    /// Shell lines that print the value of `item` in the `kc:SERVICE` keyring linked
    /// directly in the session keyring (where kc's session step puts when-unlocked
    /// items), or "no kc:SERVICE in the session keyring"; with keyctl only, so no kc runs.
    public static func sessionItemScript(service: String, item: String) -> String {
        """
        ring=; for key in $(keyctl rlist @s); do case "$(keyctl rdescribe $key)" in "keyring;"*";kc:\(service)") ring=$key;; esac; done
        if [ -n "$ring" ]; then keyctl print "$(keyctl search $ring user \(item))"; else echo "no kc:\(service) in the session keyring"; fi
        """
    }

    /// What a reboot does to the account's keys: its user and persistent keyrings emptied
    /// (the vault's key with them: the vault is locked).
    public func simulateReboot(_ account: Account) {
        _ = try? asUser(account, "keyctl clear @u; keyctl clear \"$(keyctl get_persistent @s)\" 2>/dev/null; true")
    }

    /// Runs a program as root inside the namespace.
    @discardableResult
    public func inside(_ arguments: [String], input: [UInt8] = []) throws -> CommandResult {
        try runCommand("/usr/bin/nsenter", ["-t", String(serverPID), "-m", "-p", "--"] + arguments, input: input,
                       environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"])
    }

    /// A file in /etc/pam.d as the namespace sees it (`folder/pam.d`), removed with it.
    public func writePAMService(_ name: String, _ text: String) throws {
        try text.write(toFile: folder + "/pam.d/" + name, atomically: true, encoding: .utf8)
    }

    // MARK: Logging in

    /// Runs `pamtester SERVICE USER OPERATIONS...` in the sandbox with `input` as what the
    /// user types; as root, or (`asUser`) with the user's real uid, as the setuid passwd
    /// runs, so that pam_unix asks for the current password.
    public func pamtester(_ service: String, _ account: Account, _ operations: [String], input: String,
                          asUser: Bool = false) throws -> CommandResult {
        let realUser = asUser ? ["/usr/bin/setpriv", "--ruid=\(account.uid)"] : []
        return try inside(realUser + ["/usr/bin/pamtester", service, account.name] + operations, input: Array(input.utf8))
    }

    /// `ssh USER@127.0.0.1 -p PORT COMMAND` with the password (sshpass, from its
    /// environment, never argv) by `method`: its result and how long it took.
    public func ssh(_ account: Account, _ command: String, method: Method = .password,
                    password: String? = nil) throws -> (result: CommandResult, seconds: Double) {
        let started = Date()
        let result = try runCommand("/usr/bin/timeout", ["60", "/usr/bin/sshpass", "-e"] + sshArguments(method: method) + [
            "\(account.name)@127.0.0.1", command,
        ], environment: ["SSHPASS": password ?? account.password, "PATH": "/usr/bin:/bin", "HOME": folder])
        return (result, Date().timeIntervalSince(started))
    }

    /// ssh's options for this server: no config file, no known hosts kept, one method.
    public func sshArguments(method: Method) -> [String] {
        ["/usr/bin/ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", "PreferredAuthentications=\(method.rawValue)",
         "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
         "-p", String(port)]
    }

    /// The lines syslog got from the namespace since the last call (what PAM's modules
    /// and sshd log), once nothing more arrived for `quiet` seconds.
    public func drainLog(quiet: Double = 0.2) -> [String] {
        let lines = log.lines(quiet: quiet)
        defer { drained = lines.count }
        return Array(lines.dropFirst(drained))
    }

    /// Everything logged so far and sshd's own log: for failure messages.
    public var diagnostics: String {
        "syslog:\n" + log.lines(quiet: 0.05).joined(separator: "\n") + "\nsshd:\n" + (readWholeFile(folder + "/sshd.log") ?? "")
    }

    // MARK: A filesystem that never answers

    /// Mounts Tools/review/unanswering_fuse.py over `mountpoint` as `account`, from a
    /// process outside any login (in the server's mount namespace, so that logins see
    /// it). Whatever looks inside then waits in the kernel until the daemon ends. At
    /// ``stop()`` (or the returned closure) the daemon is killed, which fails what
    /// waits, and the mount goes. XCTSkip where FUSE cannot work.
    @discardableResult
    public func mountUnansweringFilesystem(as account: Account, over mountpoint: String) throws -> () -> Void {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/fusermount3"), FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw XCTSkip("fusermount3 (fuse3) and python3 are needed for a FUSE filesystem that does not answer")
        }
        let script = folder + "/unanswering_fuse.py"
        if !FileManager.default.fileExists(atPath: script) {
            try FileManager.default.copyItem(atPath: Self.repository + "/Tools/review/unanswering_fuse.py", toPath: script)
            chmod(script, 0o644)
        }
        // /dev/fuse is 0666 on Debian; where it is not, the user gets rw by an ACL until stop.
        let canOpen = try inside(["/usr/bin/setpriv", "--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups",
                                  "/bin/sh", "-c", "test -r /dev/fuse && test -w /dev/fuse"])
        if canOpen.status != 0 {
            let granted = try runCommand("/usr/bin/env", ["setfacl", "-m", "u:\(account.uid):rw", "/dev/fuse"])
            guard granted.status == 0 else { throw XCTSkip("/dev/fuse is not usable by a user here, and setfacl cannot grant it: \(granted)") }
            beforeStop.append { _ = try? runCommand("/usr/bin/env", ["setfacl", "-x", "u:\(account.uid)", "/dev/fuse"]) }
        }
        _ = try asUser(account, "mkdir -p '\(mountpoint)'")
        let ready = account.home + "/.unanswering-ready"
        let daemon = try SpawnedProcess("/usr/bin/nsenter", [
            "-t", String(serverPID), "-m", "--", "/usr/bin/setpriv", "--reuid=\(account.uid)", "--regid=\(account.gid)", "--init-groups",
            "--pdeathsig", "KILL", "/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "HOME=\(account.home)",
            "/bin/sh", "-c", "exec /usr/bin/python3 '\(script)' '\(mountpoint)' > '\(ready)'",
        ])
        var ended = false
        let server = serverPID
        let end = {
            guard !ended else { return }
            ended = true
            kill(daemon.pid, SIGKILL)
            _ = daemon.wait()
            _ = try? runCommand("/usr/bin/nsenter", ["-t", String(server), "-m", "--", "/usr/bin/fusermount3", "-u", "-z", mountpoint])
            // What waited on it fails now and ends.
            _ = Self.waitFor(seconds: 10) { Self.processes(of: account.uid).isEmpty }
        }
        beforeStop.append(end)
        guard Self.waitFor(seconds: 10, { readWholeFile(ready) == "ready\n" || !daemon.isRunning }), daemon.isRunning else {
            let why = daemon.isRunning ? "" : daemon.wait().standardError
            end()
            throw XCTSkip("the unanswering FUSE filesystem could not be mounted here: \(why)")
        }
        return end
    }

    /// The pids (outside the namespace) of `uid`'s processes, with their state and command.
    public static func processes(of uid: UInt32) -> [(pid: pid_t, state: String, command: String)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.compactMap { pid_t($0) }.compactMap { pid in
            guard let status = readWholeFile("/proc/\(pid)/status") else { return nil }
            var fields: [String: String] = [:]
            for line in status.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2 { fields[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces) }
            }
            guard fields["Uid"]?.split(separator: "\t").first == Substring(String(uid)) else { return nil }
            return (pid, String(fields["State"]?.prefix(1) ?? "?"), fields["Name"] ?? "")
        }
    }

    // MARK: Stopping

    /// The processes of the namespace still alive (outside pids).
    private func processesInNamespace() -> [pid_t] {
        guard !namespaceIdentity.isEmpty else { return [] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.compactMap { pid_t($0) }.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\($0)/ns/pid")) == namespaceIdentity
        }
    }

    /// Ends sshd and every process of the namespace, then removes the users' homes,
    /// what they left in the kernel's user and persistent keyrings, and the folder. The
    /// pids still alive after 10 s (none unless something is stuck for good).
    @discardableResult
    public func stop() -> [pid_t] {
        guard !stopped else { return [] }
        stopped = true
        for step in beforeStop.reversed() { step() }
        beforeStop = []
        // A FUSE connection of the namespace that no daemon will answer is aborted, so
        // nothing waits on it for ever (only those mounted in the namespace).
        abortFUSEConnectionsInNamespace()
        // The namespace's first process first: unshare, its parent, then reaps it at once
        // (killed first, unshare would leave it to init, which may take its time).
        kill(serverPID, SIGKILL)
        if !Self.waitFor(seconds: 5, { !namespace.isRunning }) { kill(namespace.pid, SIGKILL) }
        _ = namespace.wait()
        var left: [pid_t] = []
        Self.waitFor(seconds: 10) {
            left = processesInNamespace()
            return left.isEmpty
        }
        log.close()
        for account in accounts {
            Self.waitFor(seconds: 5) { Self.processes(of: account.uid).isEmpty }
            // Its keyrings go whole: invalidated by serial (a lookup of @u or @us would make
            // both again), from an anonymous session keyring that dies with the shell.
            _ = try? runCommand("/usr/bin/setpriv", ["--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups",
                                                     "/usr/bin/keyctl", "session", "-", "/bin/sh", "-c", """
                                                     user=$(keyctl id @u); userSession=$(keyctl id @us); persistent=$(keyctl get_persistent @s)
                                                     keyctl clear "$user"; keyctl invalidate "$persistent"; keyctl invalidate "$userSession"; keyctl invalidate "$user"
                                                     """],
                                environment: ["PATH": "/usr/bin:/bin"])
            _ = try? runCommand("/bin/rm", ["-rf", account.home])
        }
        _ = try? runCommand("/bin/rm", ["-rf", folder])
        return left
    }

    private func abortFUSEConnectionsInNamespace() {
        guard let table = readWholeFile("/proc/\(serverPID)/mountinfo") else { return }
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let separator = fields.firstIndex(of: "-"), separator + 1 < fields.count, fields[separator + 1].hasPrefix("fuse"),
                  fields.count > 2, let minor = fields[2].split(separator: ":").last else { continue }
            _ = try? inside(["/bin/sh", "-c", "[ -e /sys/fs/fuse/connections/\(minor)/abort ] && echo 1 > /sys/fs/fuse/connections/\(minor)/abort; true"])
        }
    }
}

/// Reads /dev/log's datagrams as they come, on a thread of its own: a Unix datagram
/// socket queues only `net.unix.max_dgram_qlen` of them (10 by default), and past that
/// every program that logs (sshd, its PAM modules) waits in syslog(3).
private final class SyslogCollector: @unchecked Sendable {
    private let receiver: DatagramReceiver
    private let lock = NSLock()
    private var received: [String] = []
    private var lastArrival = Date()
    private var stopping = false
    private var finished = false

    init(address: String) throws {
        receiver = try DatagramReceiver(address: address)
        let thread = Thread { [self] in
            while !lock.withLock({ stopping }) {
                guard let datagram = receiver.receive(within: 0.05) else { continue }
                let line = String(decoding: datagram, as: UTF8.self)
                lock.withLock {
                    received.append(line)
                    lastArrival = Date()
                }
            }
            lock.withLock { finished = true }
        }
        thread.start()
    }

    /// Every line so far, once none came for `quiet` seconds since the call (at most 10 s
    /// of waiting).
    func lines(quiet: Double) -> [String] {
        let called = Date()
        let deadline = called.addingTimeInterval(10)
        while Date() < deadline, lock.withLock({ Date().timeIntervalSince(max(lastArrival, called)) < quiet }) { usleep(20_000) }
        return lock.withLock { received }
    }

    func close() {
        lock.withLock { stopping = true }
        for _ in 0..<100 where !lock.withLock({ finished }) { usleep(10_000) }
        receiver.close()
    }
}
