import CSDBus
import KernelKeychain
import Keyrings
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// kc-secretd's objects on the bus: the service, its collections and items, sessions and
/// prompts, all under `/org/freedesktop/secrets`, answered by one handler (an sd-bus
/// fallback) on one thread. Every call is answered: an error names what to do.
final class SecretService {
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let sessionInterface = "org.freedesktop.Secret.Session"
    static let promptInterface = "org.freedesktop.Secret.Prompt"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let introspectableInterface = "org.freedesktop.DBus.Introspectable"

    static let plainAlgorithm = "plain"
    static let dhAlgorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"

    let bus: OpaquePointer
    let store: SecretStore
    let audit: Bool

    var sessions = SessionTable()
    var prompts: [String: String] = [:]
    private var counter: UInt64 = 0
    /// The next session's key pair, made while the daemon is idle so an `OpenSession`
    /// pays for one exponentiation, not two.
    var spareKeyPair: DHKeyPair?

    /// Who called: the sending connection's process and user, asked of the bus once per
    /// connection (a unique name is never reused).
    struct Caller {
        var name: String
        var pid: Int32
        var uid: UInt32
    }
    private var callers: [String: Caller] = [:]
    /// The uid this daemon serves, its own: asked once, not at every call.
    private let servedUID = geteuid()

    init(bus: OpaquePointer, store: SecretStore, audit: Bool) {
        self.bus = bus
        self.store = store
        self.audit = audit
    }

    func nextPath(_ prefix: String, _ letter: String) -> String {
        counter += 1
        return prefix + letter + String(counter)
    }

    // MARK: Dispatch

    /// Handles one method call on a path under `/org/freedesktop/secrets`: 1 when it was
    /// answered, 0 to let sd-bus answer (`org.freedesktop.DBus.Peer`).
    func handle(_ call: OpaquePointer) -> Int32 {
        guard sd_bus_message_is_method_call(call, nil, nil) > 0 else { return 0 }
        let interface = sd_bus_message_get_interface(call).map { String(cString: $0) } ?? ""
        let member = sd_bus_message_get_member(call).map { String(cString: $0) } ?? ""
        let path = sd_bus_message_get_path(call).map { String(cString: $0) } ?? ""
        if interface == "org.freedesktop.DBus.Peer" { return 0 }
        do throws(BusError) {
            let caller = try self.caller(of: call)
            guard caller.uid == servedUID else {
                throw .accessDenied("kc-secretd serves uid \(servedUID) only; uid \(caller.uid) has its own")
            }
            try dispatch(call, path: path, interface: interface, member: member, caller: caller)
        } catch {
            if sd_bus_message_get_expect_reply(call) > 0 {
                _ = kc_bus_reply_error(call, error.name, error.message)
            }
            Log.info("\(member) on \(path): \(error)")
        }
        return 1
    }

    private func caller(of call: OpaquePointer) throws(BusError) -> Caller {
        guard let senderPointer = sd_bus_message_get_sender(call) else { throw .accessDenied("a call without a sender") }
        let sender = String(cString: senderPointer)
        if let known = callers[sender] { return known }
        var creds: OpaquePointer? = nil
        let mask = UInt64(SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID)
        guard sd_bus_query_sender_creds(call, mask, &creds) >= 0, let creds else {
            throw .accessDenied("the bus did not say who \(sender) is")
        }
        defer { sd_bus_creds_unref(creds) }
        var uid: uid_t = 0
        var pid: pid_t = 0
        guard sd_bus_creds_get_euid(creds, &uid) >= 0 else { throw .accessDenied("the bus did not say who \(sender) is") }
        _ = sd_bus_creds_get_pid(creds, &pid)
        let caller = Caller(name: sender, pid: pid, uid: uid)
        callers[sender] = caller
        return caller
    }

    /// A connection left the bus: its sessions close.
    func forget(connection name: String) {
        callers[name] = nil
        sessions.closeAll(of: name)
    }

    private func dispatch(_ call: OpaquePointer, path: String, interface: String, member: String, caller: Caller) throws(BusError) {
        guard let target = SecretPath.parse(path) else {
            // Under a collection or an alias, a path that names no item is an item that is
            // not there: the spec's error, which clients turn into "not found".
            if path.hasPrefix(SecretPath.collectionPrefix) || path.hasPrefix(SecretPath.aliasPrefix) { throw .noSuchObject(path) }
            throw .unknownObject(path)
        }
        let object = try resolve(target, path: path)
        let message = BusReader(message: call)
        switch (interface, member) {
        case (Self.introspectableInterface, "Introspect"):
            try message.expect("")
            let xml = try introspection(of: object)
            try reply(call) { $0.string(xml) }
        case (Self.propertiesInterface, "Get"):
            try message.expect("ss")
            let (name, property) = (try message.string(), try message.string())
            let value = try properties(of: object, interface: name).first { $0.0 == property }
            guard let value else { throw .unknownProperty("\(name).\(property)") }
            try reply(call) { $0.variant(value.1) }
        case (Self.propertiesInterface, "GetAll"):
            try message.expect("s")
            let all = try properties(of: object, interface: try message.string())
            try reply(call) { $0.properties(all) }
        case (Self.propertiesInterface, "Set"):
            guard message.signature.hasPrefix("ssv") || message.signature == "ssv" else { throw .invalidArguments("expected arguments of type 'ssv', got '\(message.signature)'") }
            let (name, property) = (try message.string(), try message.string())
            try setProperty(of: object, interface: name, property, try message.variant(for: property))
            try reply(call) { _ in }
        default:
            try invoke(object, interface: interface, member: member, message: message, call: call, caller: caller, path: path)
        }
    }

    /// A resolved object: existing now.
    enum Object {
        case service
        case collection(String)
        case item(SecretStore.Found)
        case session(String)
        case prompt(String)
        case folder(String)
    }

    func resolve(_ target: SecretPath.Target, path: String) throws(BusError) -> Object {
        switch target {
        case .service:
            return .service
        case .collection(let name, let alias):
            return .collection(try collectionName(name, alias: alias, path: path))
        case .item(let collection, let alias, let id):
            let name = try collectionName(collection, alias: alias, path: path)
            guard let found = try store.item(id, in: name) else { throw .noSuchObject(path) }
            return .item(found)
        case .session(let path):
            guard sessions.owner(of: path) != nil else { throw .unknownObject(path) }
            return .session(path)
        case .prompt(let path):
            guard prompts[path] != nil else { throw .unknownObject(path) }
            return .prompt(path)
        case .folder(let name):
            return .folder(name)
        }
    }

    func collectionName(_ name: String, alias: Bool, path: String) throws(BusError) -> String {
        if alias {
            guard let target = store.alias(name) else { throw .noSuchObject(path) }
            return target
        }
        guard store.collection(name) != nil else { throw .noSuchObject(path) }
        return name
    }

    // MARK: Replies and signals

    func reply(_ call: OpaquePointer, _ write: (inout BusWriter) -> Void) throws(BusError) {
        guard sd_bus_message_get_expect_reply(call) > 0 else { return }
        var reply: OpaquePointer? = nil
        guard sd_bus_message_new_method_return(call, &reply) >= 0, let reply else { throw .failed("out of memory") }
        defer { sd_bus_message_unref(reply) }
        var writer = BusWriter(reply)
        write(&writer)
        guard writer.failure == 0 else { throw .failed("the reply could not be written: \(String(cString: strerror(-writer.failure)))") }
        // A caller gone since it asked is not an error of the daemon's.
        _ = sd_bus_send(nil, reply, nil)
    }

    func emit(_ path: String, _ interface: String, _ member: String, _ write: (inout BusWriter) -> Void) {
        var signal: OpaquePointer? = nil
        guard sd_bus_message_new_signal(bus, &signal, path, interface, member) >= 0, let signal else { return }
        defer { sd_bus_message_unref(signal) }
        var writer = BusWriter(signal)
        write(&writer)
        guard writer.failure == 0 else { return }
        _ = sd_bus_send(bus, signal, nil)
    }

    /// `PropertiesChanged` for the properties `names` of the object at `path`, with their
    /// new values, as gnome-keyring sends it. libsecret takes a value from the signal
    /// only: a property merely invalidated leaves its cache without it, and its next
    /// `ItemCreated` or `CollectionCreated` then reads no list and crashes the client
    /// (seahorse). A value that cannot be read now (the object is gone) is invalidated.
    func emitPropertiesChanged(_ path: String, _ interface: String, changed names: [String]) {
        var values: [(String, PropertyValue)] = []
        if let target = SecretPath.parse(path), let object = try? resolve(target, path: path),
           let current = try? properties(of: object, interface: interface) {
            values = current.filter { names.contains($0.0) }
        }
        let invalidated = names.filter { name in !values.contains { $0.0 == name } }
        emit(path, Self.propertiesInterface, "PropertiesChanged") { writer in
            writer.string(interface)
            writer.properties(values)
            writer.open("a", "s")
            for name in invalidated { writer.string(name) }
            writer.close()
        }
    }

    /// After a `Lock` or `Unlock` of `paths` (collections or items, by alias too): each
    /// collection's and its items' `Locked`, and `CollectionChanged`, as gnome-keyring
    /// announces them, so that a libsecret client (seahorse) does not show a stale lock.
    func announceLockChange(of paths: [String]) {
        var collections: [String] = []
        for path in paths {
            guard let target = SecretPath.parse(path) else { continue }
            switch target {
            case .collection(let name, let alias), .item(let name, let alias, _):
                if let resolved = try? collectionName(name, alias: alias, path: path), !collections.contains(resolved) {
                    collections.append(resolved)
                }
            default:
                continue
            }
        }
        for collection in collections {
            for item in (try? store.items(in: collection, matching: [:])) ?? [] {
                emitPropertiesChanged(itemPath(item), Self.itemInterface, changed: ["Locked"])
            }
            emitPropertiesChanged(SecretPath.collection(collection), Self.collectionInterface, changed: ["Locked"])
            emit(SecretPath.service, Self.serviceInterface, "CollectionChanged") { $0.objectPath(SecretPath.collection(collection)) }
        }
    }

    func itemPath(_ item: SecretStore.Found) -> String { SecretPath.item(item.id, in: item.collection) }
}
