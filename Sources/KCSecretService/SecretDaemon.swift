import CSDBus
import Keyrings
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// kc-secretd's main loop: connects to the user's session bus, answers under
/// `/org/freedesktop/secrets`, owns `org.freedesktop.secrets`, and serves until the bus
/// goes away.
public enum SecretDaemon {
    public static let busName = "org.freedesktop.secrets"

    public struct Options: Sendable {
        public var audit = true
        public var verbose = false
        public init() {}
    }

    /// Runs the daemon; returns the process's exit status.
    public static func run(_ options: Options) -> Int32 {
        // It hands secrets to clients: no core file, no ptrace by the uid's other
        // processes, no crash report that prints memory.
        try? disableDumping()
        try? disableCrashReports()
        Log.verbose = options.verbose
        guard let bus = openSessionBus() else { return 1 }
        defer { sd_bus_flush_close_unref(bus) }
        let store = SecretStore()
        let service = SecretService(bus: bus, store: store, audit: options.audit)
        let context = Unmanaged.passRetained(service)
        defer { context.release() }

        guard sd_bus_add_fallback(bus, nil, SecretPath.service, { call, userdata, _ in
            guard let call, let userdata else { return 0 }
            return Unmanaged<SecretService>.fromOpaque(userdata).takeUnretainedValue().handle(call)
        }, context.toOpaque()) >= 0 else {
            Log.error("cannot serve \(SecretPath.service) on the bus")
            return 1
        }
        let departures = "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'"
        _ = sd_bus_add_match(bus, nil, departures, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let reader = BusReader(message: message)
            guard reader.signature == "sss", let name = try? reader.string(), let _ = try? reader.string(),
                  let newOwner = try? reader.string(), newOwner.isEmpty, name.hasPrefix(":") else { return 0 }
            Unmanaged<SecretService>.fromOpaque(userdata).takeUnretainedValue().forget(connection: name)
            return 0
        }, context.toOpaque())

        let requested = sd_bus_request_name(bus, busName, 0)
        guard requested >= 0 else {
            if requested == -EEXIST || requested == -EALREADY {
                Log.error("\(busName) is already owned by \(ownerDescription(on: bus) ?? "another program"); stop it first (kc-secretd does not share the name)")
            } else {
                Log.error("cannot own \(busName): \(String(cString: strerror(-requested)))")
            }
            return 1
        }
        if store.inMemoryOnly {
            Log.error("no vault (kc vault init): secrets stored over D-Bus are kept in the kernel until reboot, and their attributes only while kc-secretd runs")
        } else if let location = store.bootIndexLocation {
            Log.info("no vault (kc vault init): secrets stored over D-Bus are kept in the kernel until reboot, and their attributes as long in \(location)")
        } else if store.index == nil {
            Log.error("the vault is locked: items are locked until 'kc unlock' (or a login through PAM) opens it")
        }
        service.prepareKeyPair()
        while true {
            let processed = sd_bus_process(bus, nil)
            if processed < 0 {
                // The bus went away (logout, dbus-run-session's end): nothing to serve.
                if processed != -ECONNRESET && processed != -ENOTCONN { Log.error("the bus failed: \(String(cString: strerror(-processed)))") }
                return 0
            }
            if processed > 0 { continue }
            service.prepareKeyPair()
            let waited = sd_bus_wait(bus, UInt64.max)
            if waited < 0 && waited != -EINTR { return 0 }
        }
    }

    static func openSessionBus(quietly: Bool = false) -> OpaquePointer? {
        var bus: OpaquePointer? = nil
        let opened = sd_bus_open_user(&bus)
        guard opened >= 0, let bus else {
            if !quietly { Log.error("no session bus (\(String(cString: strerror(-opened)))): run under 'dbus-run-session', or log in with dbus-user-session, so that DBUS_SESSION_BUS_ADDRESS or $XDG_RUNTIME_DIR/bus names one") }
            return nil
        }
        return bus
    }

    /// `NAME (pid N)` of the connection that owns the Secret Service name, if any.
    static func ownerDescription(on bus: OpaquePointer) -> String? {
        var creds: OpaquePointer? = nil
        guard sd_bus_get_name_creds(bus, busName, UInt64(SD_BUS_CREDS_PID), &creds) >= 0, let creds else { return nil }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0 else { return nil }
        return "\(commandName(of: pid) ?? "a process") (pid \(pid))"
    }

    /// The program's name: the last part of its first argument (`comm` is cut at 15
    /// bytes: `gnome-keyring-d`).
    static func commandName(of pid: pid_t) -> String? {
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        let first = buffer[..<count].split(separator: 0, omittingEmptySubsequences: false).first ?? []
        let name = first.split(separator: UInt8(ascii: "/")).last.map { String(decoding: $0, as: UTF8.self) }
        return name?.isEmpty == false ? name : nil
    }

    /// What `kc-secretd status` and `kc doctor` say: who owns the Secret Service name on
    /// this session bus, and whether it answers. Exit 0: kc-secretd answers; 1: no bus or
    /// nobody owns it; 2: another program owns it (or the owner does not answer).
    public static func status() -> (status: Int32, text: String) {
        guard getenv("DBUS_SESSION_BUS_ADDRESS") != nil || getenv("XDG_RUNTIME_DIR") != nil, let bus = openSessionBus(quietly: true) else {
            return (1, "no session bus here, so no Secret Service: run the program under 'dbus-run-session', or log in with dbus-user-session")
        }
        defer { sd_bus_flush_close_unref(bus) }
        _ = sd_bus_set_method_call_timeout(bus, 3_000_000)
        guard let owner = ownerDescription(on: bus) else {
            return (1, "nobody owns \(busName) yet; D-Bus starts kc-secretd on the first call if its service file is installed (Tools/setup.sh installs it)")
        }
        guard owner.hasPrefix("kc-secretd ") else {
            return (2, "\(busName) is owned by \(owner), not kc-secretd: stop it (and remove its D-Bus service file or autostart) to use kc's")
        }
        var error = sd_bus_error()
        var reply: OpaquePointer? = nil
        defer {
            sd_bus_error_free(&error)
            if let reply { sd_bus_message_unref(reply) }
        }
        let called = kc_bus_call_empty(bus, busName, SecretPath.service, "org.freedesktop.DBus.Peer", "Ping", &error, &reply)
        guard called >= 0 else { return (2, "\(owner) owns \(busName) but does not answer: \(error.message.map { String(cString: $0) } ?? String(cString: strerror(-called)))") }
        return (0, "\(owner) owns \(busName) and answers")
    }
}
