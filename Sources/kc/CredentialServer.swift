import ArgumentParser
import KCIntegrations
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

extension KC {
    struct CredentialServer: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "credential-server",
            abstract: "Serve items to systemd units as credentials (LoadCredential=ID:SOCKET).",
            discussion: """
            Listens on an AF_UNIX stream socket. systemd connects once per
            credential from an abstract address that names the unit and the
            credential (RANDOM/unit/UNIT/ID) and reads to the end; kc writes the
            value of item ID and closes. Only uid 0 (the system manager) and your
            own uid (your user manager) are served. A refused request (another uid,
            an address of another shape, no such item) gets nothing, and one line
            on standard error; no line ever holds a value.

              kc credential-server --service com.example.web
              # in the unit: LoadCredential=token:/run/kc/credentials.sock

            Items are read as your keychain reads them: a unit run by the system
            manager is outside your login session, so store its items at
            --access after-first-unlock or always. A socket passed by systemd
            socket activation (LISTEN_FDS) is used instead of --socket. SIGTERM
            or SIGINT stops the server and removes its socket (only if it is still
            the one it made). A --socket in or under a directory that another user
            owns, or that others may write without the sticky bit, is refused:
            whoever can rename the socket could serve units their own values.
            """
        )

        @Option(help: ArgumentHelp(
            "The socket to listen on (default: /run/kc/credentials.sock for root, else $XDG_RUNTIME_DIR/kc/credentials.sock).",
            valueName: "path"))
        var socket: String?

        @Option(help: "The service whose items are served to every unit without a --unit-service of its own.")
        var service: String?

        @Option(name: .customLong("unit-service"), help: ArgumentHelp(
            "Serve this unit from its own service (repeatable): UNIT=SERVICE, such as web.service=com.example.web.",
            valueName: "unit=service"))
        var unitServices: [String] = []

        func validate() throws {
            guard service != nil || !unitServices.isEmpty else {
                throw ValidationError("name the service to serve: --service S (or --unit-service UNIT=SERVICE)")
            }
            _ = try servedServices()
        }

        func run() throws {
            let served = try servedServices()
            var listener: CredentialListener
            if let activated = CredentialListener.fromSocketActivation() {
                listener = activated
            } else {
                listener = try CredentialListener.binding(try socketPath())
            }
            listener.serve(served)
        }

        /// The services to serve from: the default and the per-unit ones.
        private func servedServices() throws -> ServedServices {
            var units: [String: KeyName] = [:]
            let pairs = unitServices.map { pair -> (String, String) in
                guard let equals = pair.firstIndex(of: "=") else { return (pair, "") }
                return (String(pair[..<equals]), String(pair[pair.index(after: equals)...]))
            }
            let names = try RawArguments.exactNames((service.map { [$0] } ?? []) + pairs.map(\.1))
            if service != nil { try validateArgument(names[0], as: .service) }
            for (index, (unit, _)) in pairs.enumerated() {
                let name = names[index + (service == nil ? 0 : 1)]
                guard CredentialRequest.isUnitName(Array(unit.utf8)), !name.bytes.isEmpty else {
                    throw ValidationError("--unit-service takes UNIT=SERVICE, such as web.service=com.example.web (got '\(unit)')")
                }
                try validateArgument(name, as: .service)
                units[unit] = name
            }
            return ServedServices(fallback: service == nil ? nil : names[0], units: units)
        }

        private func socketPath() throws -> String {
            if let socket { return absolutePath(socket) }
            if getuid() == 0 { return "/run/kc/credentials.sock" }
            guard let runtime = getenv("XDG_RUNTIME_DIR"), runtime.pointee != 0 else {
                standardError("kc: XDG_RUNTIME_DIR is not set; name the socket with --socket PATH")
                throw ExitStatus.usage
            }
            return String(cString: runtime) + "/kc/credentials.sock"
        }
    }
}

/// The listening socket and its accept loop.
struct CredentialListener {
    let descriptor: Int32
    /// The socket file to remove at exit; nil when systemd owns the socket.
    let createdPath: String?
    /// The device and inode of that socket file when it was bound: at exit only that
    /// file is removed, never one that has since taken its name (another server's).
    var createdFile: (device: UInt64, inode: UInt64)? = nil
    /// The directory made for it, removed at exit if empty.
    let createdDirectory: String?

    /// A peer that does not read what it asked for is given up after this long.
    static let peerTimeoutSeconds = 5

    /// The socket systemd passed (LISTEN_FDS, first descriptor 3) when LISTEN_PID is
    /// this process. The variables are removed so no child takes them for its own.
    static func fromSocketActivation() -> CredentialListener? {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = getenv("LISTEN_PID").map({ String(cString: $0) }), pid_t(pid) == getpid(),
              let count = getenv("LISTEN_FDS").map({ String(cString: $0) }).flatMap({ Int($0) }), count >= 1
        else { return nil }
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        return CredentialListener(descriptor: 3, createdPath: nil, createdDirectory: nil)
    }

    /// Binds a new socket at `path` (mode 0600; its directory is made 0700 if missing).
    /// A socket file left by a server that died is replaced; a live one is refused.
    static func binding(_ path: String) throws -> CredentialListener {
        guard let address = UnixSocketAddress(path) else {
            try refuse("the socket path \(path) is too long (at most 107 bytes); choose a shorter --socket")
        }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        var createdDirectory: String? = nil
        if !directory.isEmpty, mkdir(directory, 0o700) == 0 {
            createdDirectory = directory
        } else if !directory.isEmpty, errno != EEXIST {
            try refuse("cannot create \(directory): \(String(cString: strerror(errno))); create it, or choose another --socket")
        }
        if let (unsafe, problem) = SocketDirectorySafety.unsafeDirectory(holding: directory.isEmpty ? "/" : directory) {
            // Whoever may rename entries in the directory or one above it may swap the
            // socket for their own, and every unit would then load that impostor's values.
            if let createdDirectory { rmdir(createdDirectory) }
            try refuse("\(unsafe) \(problem), who could replace the socket; choose a --socket in a directory only you (or root) can write")
        }
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard existing.st_mode & S_IFMT == S_IFSOCK else {
                try refuse("\(path) exists and is not a socket; remove it or choose another --socket")
            }
            if isAnswering(address) {
                try refuse("a server already listens on \(path); stop it first, or choose another --socket")
            }
            unlink(path)
        }
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { try refuse("cannot create a socket: \(String(cString: strerror(errno)))") }
        var bound = address
        let previousMask = umask(0o177)
        let status = bound.withSockaddr { bind(descriptor, $0, $1) }
        let bindError = errno
        umask(previousMask)
        guard status == 0 else {
            close(descriptor)
            try refuse("cannot listen on \(path): \(String(cString: strerror(bindError)))")
        }
        // bind made the file 0600 under the umask above; no chmod by path afterwards,
        // which would follow a symbolic link put in the socket's place.
        var boundFile = stat()
        guard lstat(path, &boundFile) == 0, boundFile.st_mode & S_IFMT == S_IFSOCK else {
            close(descriptor)
            try refuse("\(path) was replaced as it was bound; choose a --socket in a directory only you (or root) can write")
        }
        guard listen(descriptor, 64) == 0 else {
            let listenError = errno
            close(descriptor)
            unlink(path)
            try refuse("cannot listen on \(path): \(String(cString: strerror(listenError)))")
        }
        var listener = CredentialListener(descriptor: descriptor, createdPath: path, createdDirectory: createdDirectory)
        listener.createdFile = (UInt64(boundFile.st_dev), UInt64(boundFile.st_ino))
        return listener
    }

    /// Whether something accepts connections at `address`.
    private static func isAnswering(_ address: UnixSocketAddress) -> Bool {
        let probe = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        var target = address
        return target.withSockaddr { connect(probe, $0, $1) } == 0
    }

    /// Accepts until SIGTERM, SIGINT or SIGHUP, then removes the socket it made and
    /// exits 0. Each connection is answered on a thread of its own, so a slow peer holds
    /// up nobody else.
    func serve(_ served: ServedServices) -> Never {
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&stopSignals, signal) }
        // Blocked before any thread starts, so every thread inherits the mask and the
        // signals wait for sigwait below.
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
        let loop = AcceptLoop(descriptor: descriptor, served: served)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(loop).toOpaque()
        guard pthread_create(&thread, nil, { context in
            Unmanaged<AcceptLoop>.fromOpaque(context!).takeRetainedValue().run()
        }, context) == 0 else {
            Unmanaged<AcceptLoop>.fromOpaque(context).release()
            standardError("kc: credential-server: cannot start a thread: \(String(cString: strerror(errno)))")
            removeSocket()
            exit(ExitStatus.failure.rawValue)
        }
        var received: Int32 = 0
        while sigwait(&stopSignals, &received) != 0 {}
        removeSocket()
        exit(0)
    }

    /// Removes the socket this server bound, if it is still the file at its path.
    private func removeSocket() {
        if let createdPath, let createdFile {
            var info = stat()
            if lstat(createdPath, &info) == 0, UInt64(info.st_dev) == createdFile.device, UInt64(info.st_ino) == createdFile.inode {
                unlink(createdPath)
            }
        }
        if let createdDirectory { rmdir(createdDirectory) }
    }
}

/// accept(2) in a loop, one thread per connection.
private final class AcceptLoop {
    let descriptor: Int32
    let served: ServedServices

    init(descriptor: Int32, served: ServedServices) {
        self.descriptor = descriptor
        self.served = served
    }

    func run() -> Never {
        while true {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else {
                // EMFILE and the like: wait rather than spin.
                if errno != EINTR && errno != ECONNABORTED { usleep(100_000) }
                continue
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            CredentialConnection(descriptor: connection, served: served).start()
        }
    }
}

/// One connection: who is asking (SO_PEERCRED), for what (the peer's address), and
/// the value if the answer is yes.
final class CredentialConnection {
    let descriptor: Int32
    let served: ServedServices

    init(descriptor: Int32, served: ServedServices) {
        self.descriptor = descriptor
        self.served = served
    }

    func start() {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        guard pthread_create(&thread, nil, { context in
            Unmanaged<CredentialConnection>.fromOpaque(context!).takeRetainedValue().answer()
            return nil
        }, context) == 0 else {
            Unmanaged<CredentialConnection>.fromOpaque(context).release()
            answer()
            return
        }
        pthread_detach(thread)
    }

    private func answer() {
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: CredentialListener.peerTimeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let peer = CredentialPeer(connection: descriptor) else {
            log("refused a peer whose credentials cannot be read; nothing sent")
            return
        }
        let who = "pid \(peer.pid) uid \(peer.uid)"
        guard peer.isServed(byServerRunningAs: getuid()) else {
            log("refused \(who): only \(CredentialPeer.servedUIDs(byServerRunningAs: getuid())) served; nothing sent")
            return
        }
        guard let request = CredentialRequest(connection: descriptor) else {
            log("refused \(who): its address is not systemd's \\0RANDOM/unit/UNIT/ID (use LoadCredential=ID:SOCKET); nothing sent")
            return
        }
        let named = "credential \(ReadAudit.escaped(request.id.bytes)) for \(request.unit) (\(who))"
        guard let service = served.service(for: request.unit) else {
            log("refused \(named): no service for this unit; add --unit-service \(request.unit)=SERVICE or --service; nothing sent")
            return
        }
        let serviceText = ReadAudit.escaped(service.bytes)
        do {
            let sent = try Keychain(service: service).withBytes(forKey: request.id) { value in
                sendAll(value)
            }
            switch sent {
            case nil:
                log("refused \(named): no item \(ReadAudit.escaped(request.id.bytes)) in service \(serviceText); store it with kc set \(serviceText) \(ReadAudit.escaped(request.id.bytes)); nothing sent")
            case false?:
                log("gave up on \(named): the peer did not read within \(CredentialListener.peerTimeoutSeconds) s or closed")
            case true?:
                log("served \(named) from service \(serviceText)")
            }
        } catch {
            log("refused \(named): \(error); nothing sent")
        }
    }

    /// send(2) of every byte, never raising SIGPIPE; false if the peer closed or timed out.
    private func sendAll(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if sent < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += sent
        }
        return true
    }

    private func log(_ line: String) {
        standardError("kc: credential-server: " + line)
    }
}
